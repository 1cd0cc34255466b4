//! Which C functions a patch changes, read from its unified diff.
//!
//! Rules:
//! 1. A hunk's changed lines (`+` and `-`) belong to the function whose body they are in: the
//!    function named in the hunk header's trailing context (`@@ -a,b +c,d @@ void f(...)`, as
//!    `diff -p` and git write it) until a line of the hunk starts a new function definition
//!    (a line at column 0 that names `NAME(` and does not end in `;`).
//! 2. A changed line that itself starts a definition belongs to that function (a new or renamed
//!    function is a change of it); a changed `#define NAME(` line, to the macro `NAME`.
//! 3. Without a function in the header and before the hunk's first definition, changed lines
//!    belong to no function (file scope: declarations, includes); they are counted in
//!    `file_scope` so that the caller can say so.
//! 4. Never panics; text that is not a diff gives nothing.

use std::collections::BTreeSet;

/// What a patch changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub functions: BTreeSet<String>,
    /// Changed lines outside any function (rule 3).
    pub file_scope: usize,
}

/// The identifier before the first `(` of a definition line, if the line is one (rule 1).
fn defines(line: &str) -> Option<String> {
    let first = line.chars().next()?;
    if first.is_whitespace() || matches!(first, '{' | '}' | '#' | '/' | '*') {
        return macro_name(line);
    }
    let t = line.trim_end();
    if t.ends_with(';') || t.ends_with(',') {
        return None;
    }
    let head = &t[..t.find('(')?];
    let name = head
        .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()?;
    let keyword = matches!(
        name,
        "if" | "for" | "while" | "switch" | "return" | "sizeof"
    );
    (!name.is_empty() && !keyword && !name.starts_with(|c: char| c.is_ascii_digit()))
        .then(|| name.to_string())
}

/// `#define NAME(` -> NAME (rule 2).
fn macro_name(line: &str) -> Option<String> {
    let rest = line.strip_prefix("#define")?.trim_start();
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    (rest[end..].starts_with('(') && end > 0).then(|| rest[..end].to_string())
}

/// Rules 1-4.
pub fn changed_functions(diff: &str) -> Changes {
    let mut out = Changes::default();
    let mut current: Option<String> = None;
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(h) = line.strip_prefix("@@") {
            in_hunk = true;
            let ctx = h.split_once("@@").map_or("", |(_, c)| c.trim_start());
            current = defines(ctx);
            continue;
        }
        if line.starts_with("--- ") || line.starts_with("+++ ") || line.starts_with("diff ") {
            in_hunk = false;
            current = None;
            continue;
        }
        if !in_hunk {
            continue;
        }
        let (mark, body) = match line.chars().next() {
            Some(c @ ('+' | '-' | ' ')) => (c, &line[1..]),
            _ => continue,
        };
        if let Some(f) = defines(body) {
            current = Some(f);
        }
        if mark == ' ' {
            continue;
        }
        match &current {
            Some(f) => {
                out.functions.insert(f.clone());
            }
            None if !body.trim().is_empty() => out.file_scope += 1,
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_patches_change_the_functions_they_say() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../images/patches/6.12/");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}{f}")).unwrap();
        // v7's diff has no function context: the hunks that start on a definition name it,
        // the one inside blk_mq_run_hw_queue() is file scope (unknown).
        let v7 = changed_functions(&read("seed000-v7.patch"));
        for f in [
            "blk_mq_quiesce_queue_nowait",
            "blk_mq_unquiesce_queue",
            "blk_queue_quiesced",
        ] {
            assert!(v7.functions.contains(f), "{f}: {:?}", v7.functions);
        }
        assert!(v7.file_scope > 0);
        let wrong = changed_functions(&read("wrongbarrier.patch"));
        assert_eq!(
            wrong.functions.iter().collect::<Vec<_>>(),
            ["blk_mq_run_hw_queue"]
        );
        let helper = changed_functions(&read("lockhelper.patch"));
        assert!(helper.functions.contains("blk_mq_hw_queue_need_run_locked"));
        assert!(
            helper.file_scope > 0,
            "its second hunk starts inside the function, no context"
        );
        let trylock = changed_functions(&read("trylockspin.patch"));
        assert_eq!(
            trylock.functions.iter().collect::<Vec<_>>(),
            ["blk_mq_run_hw_queue"]
        );
    }

    #[test]
    fn definitions_macros_and_file_scope() {
        let d = "--- a/x.c\n+++ b/x.c\n@@ -1,3 +1,9 @@\n #include <a.h>\n+static int n;\n \
                 static void f(int a)\n {\n-\told();\n+\tnew();\n }\n+#define G(x) (x)\n \
                 @@ -40,2 +46,2 @@ int h(void)\n-\treturn 1;\n+\treturn 2;\n";
        let c = changed_functions(d);
        assert_eq!(c.functions.iter().collect::<Vec<_>>(), ["G", "f", "h"]);
        assert_eq!(c.file_scope, 1);
    }

    #[test]
    fn calls_and_declarations_are_not_definitions() {
        assert_eq!(defines("\tfoo(bar);"), None);
        assert_eq!(defines("int foo(void);"), None);
        assert_eq!(defines("if (x)"), None);
        assert_eq!(
            defines("void blk_mq_run_hw_queue(struct blk_mq_hw_ctx *hctx, bool async)").as_deref(),
            Some("blk_mq_run_hw_queue")
        );
        assert_eq!(defines("static bool __cold *g(int)").as_deref(), Some("g"));
        for s in ["", "(", "@@", "\u{00e9}(", "#define", "#define (", "+++"] {
            let _ = changed_functions(s);
            let _ = defines(s);
        }
    }
}
