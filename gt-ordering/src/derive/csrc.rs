//! C source as the derivation reads it: comments stripped, a function's definition found by
//! name, text normalized so that layout does not count, a diff cut down to one file.
//!
//! Rules:
//! 1. Comments (`/* */`, `//`) become a blank; string and character literals are kept as they
//!    are (a brace or `/*` inside one is not code).
//! 2. A function's definition starts on a line at column 0 that names `NAME(`, is not a
//!    preprocessor line and does not end in `;`; it runs to the brace that closes the first `{`
//!    after the name. A macro `#define NAME(` runs over its `\` continuation lines. Every
//!    definition of the name in the text is taken, in order (`#ifdef` variants).
//! 3. Normalized text keeps one blank only between two identifier characters, so `smp_mb ( ) ;`
//!    and `smp_mb();` are the same text.
//! 4. Never panics, whatever the text.

/// Rule 1.
pub fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied()) {
            (b'/', Some(b'*')) => {
                let end = src[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                // Keep the newlines, so that column 0 stays column 0.
                out.extend(b[i..end].iter().filter(|&&c| c == b'\n'));
                out.push(b' ');
                i = end;
            }
            (b'/', Some(b'/')) => {
                let end = src[i..].find('\n').map_or(b.len(), |e| i + e);
                out.push(b' ');
                i = end;
            }
            (q @ (b'"' | b'\''), _) => {
                let mut j = i + 1;
                while j < b.len() && b[j] != q && b[j] != b'\n' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(b.len());
                out.extend_from_slice(&b[i..end]);
                i = end;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Whether `line` names `name(` as a whole identifier.
fn names(line: &str, name: &str) -> bool {
    let b = line.as_bytes();
    line.match_indices(name).any(|(at, _)| {
        let before_ok = at == 0 || !ident(b[at - 1]);
        let rest = line[at + name.len()..].trim_start();
        before_ok && rest.starts_with('(')
    })
}

/// Rule 2: every definition of `name` in `src` (comments already stripped), concatenated.
pub fn definitions(src: &str, name: &str) -> Option<String> {
    let mut found = String::new();
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if let Some(rest) = line.strip_prefix("#define") {
            let rest = rest.trim_start();
            if rest.starts_with(name) && rest[name.len()..].starts_with('(') {
                found.push_str(&macro_text(&src[start..]));
                found.push('\n');
            }
            continue;
        }
        let first = line.bytes().next().unwrap_or(b' ');
        if first.is_ascii_whitespace() || first == b'#' || line.trim_end().ends_with(';') {
            continue;
        }
        if names(line, name) {
            if let Some(body) = braced(&src[start..]) {
                found.push_str(body);
                found.push('\n');
            }
        }
    }
    (!found.is_empty()).then_some(found)
}

/// What is left of `src` (comments already stripped) without its function definitions (rule
/// 2's, for any name), normalized: declarations, types, macros, variables.
pub fn file_scope(src: &str) -> String {
    let mut out = String::new();
    let mut skip_to = 0;
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if start < skip_to {
            continue;
        }
        let first = line.bytes().next().unwrap_or(b' ');
        let definition = !first.is_ascii_whitespace()
            && first != b'#'
            && line.contains('(')
            && !line.trim_end().ends_with(';');
        if let Some(body) = definition.then(|| braced(&src[start..])).flatten() {
            skip_to = start + body.len();
            out.push('\n');
            continue;
        }
        out.push_str(line);
    }
    normalize(&out)
}

/// A macro's lines, continuations included.
fn macro_text(from: &str) -> String {
    let mut out = String::new();
    for line in from.lines() {
        out.push_str(line);
        out.push('\n');
        if !line.trim_end().ends_with('\\') {
            break;
        }
    }
    out
}

/// From the start of `text` to the brace closing its first `{`, if the `{` comes before any `;`.
fn braced(text: &str) -> Option<&str> {
    let open = text.find('{')?;
    if text[..open].contains(';') {
        return None;
    }
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let b = text.as_bytes();
    let mut i = open;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(_) if c == b'\\' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' => quote = Some(c),
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return text.get(..=i);
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// Rule 3.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_blank = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_blank = true;
            continue;
        }
        if pending_blank {
            let prev = out.bytes().last();
            if prev.is_some_and(ident) && c.is_ascii() && ident(c as u8) {
                out.push(' ');
            }
            pending_blank = false;
        }
        out.push(c);
    }
    out
}

/// The target path of a diff section's `+++` line, without its first component (`-p1`).
fn target(line: &str) -> Option<&str> {
    let p = line.strip_prefix("+++ ")?.split('\t').next()?.trim();
    p.split_once('/').map(|(_, rest)| rest)
}

/// The parts of a unified diff that change `file` (`a/FILE` / `b/FILE`), headers included.
pub fn diff_for(diff: &str, file: &str) -> String {
    let lines: Vec<&str> = diff.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut keep = false;
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("--- ") {
            if let Some(next) = lines.get(i + 1).filter(|n| n.starts_with("+++ ")) {
                keep = target(next) == Some(file);
            }
        } else if l.starts_with("diff ") {
            keep = false;
            continue;
        }
        if keep {
            out.push_str(l);
        }
    }
    out
}

/// The files a unified diff changes (`-p1` paths).
pub fn files_of(diff: &str) -> Vec<String> {
    let mut out: Vec<String> = diff
        .lines()
        .filter_map(target)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "/* a { comment */\nstatic int x = 1;\n\nvoid f(int a)\n{\n\tif (a) {\n\t\tsmp_mb(); // why\n\t}\n\tputs(\"}\");\n}\n\nint g(void);\n#define h(x) \\\n\tdo { } \\\n\twhile (0)\nvoid ff(void)\n{\n}\n";

    #[test]
    fn a_definition_is_found_by_name_to_its_closing_brace() {
        let s = strip_comments(SRC);
        let f = definitions(&s, "f").unwrap();
        assert!(f.starts_with("void f(int a)"), "{f}");
        assert!(f.trim_end().ends_with("puts(\"}\");\n}"), "{f}");
        assert_eq!(normalize(&f), "void f(int a){if(a){smp_mb();}puts(\"}\");}");
        // A declaration is not a definition; a macro is, with its continuations.
        assert_eq!(definitions(&s, "g"), None);
        assert_eq!(
            normalize(&definitions(&s, "h").unwrap()),
            "#define h(x)\\do{}\\while(0)"
        );
        assert_eq!(
            normalize(&definitions(&s, "ff").unwrap()),
            "void ff(void){}"
        );
        assert_eq!(definitions(&s, "nope"), None);
        assert_eq!(
            file_scope(&s),
            "static int x=1;int g(void);#define h(x)\\do{}\\while(0)"
        );
    }

    #[test]
    fn broken_text_gives_nothing_and_never_panics() {
        for t in [
            "",
            "void f(",
            "void f(\n{",
            "/* open",
            "\"open",
            "void f()\n{\n{",
            "\u{e9}\u{e9}",
        ] {
            let s = strip_comments(t);
            assert_eq!(definitions(&s, "f"), None, "{t:?}");
            let _ = normalize(&s);
        }
    }

    #[test]
    fn a_diff_is_cut_to_one_file() {
        let d = "diff --git a/x.c b/x.c\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/y.h b/y.h\n--- a/y.h\n+++ b/y.h\n@@ -1 +1 @@\n-c\n+d\n";
        assert_eq!(
            diff_for(d, "y.h"),
            "--- a/y.h\n+++ b/y.h\n@@ -1 +1 @@\n-c\n+d\n"
        );
        assert_eq!(
            diff_for(d, "x.c"),
            "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n"
        );
        assert_eq!(diff_for(d, "z"), "");
        assert_eq!(files_of(d), ["x.c", "y.h"]);
    }
}
