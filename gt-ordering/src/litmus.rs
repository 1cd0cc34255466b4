//! A litmus file's header: the test's name (`C NAME`, the first line) and what its leading
//! comment says about it. Read from the comment block `(* ... *)` that follows the name, one
//! `Key: value` per line (a leading `*` and blanks are ignored):
//!
//! - `Result: Never | Sometimes | Always [DATARACE]` (or `DEADLOCK`, `Maybe`): what herd7 must
//!   answer, the LKMM's own convention (tools/memory-model/scripts/judgelitmus.sh reads the same
//!   line); the project's tests all carry one, and CI fails when an answer differs.
//! - `Path: NAME`: which kernel path reaching the check the test models (e.g. `none`,
//!   `sched-dispatch`); shown beside the answer.
//! - `Supersedes: NAME...`: (a user's test beside a patch or tree) whose tests this one
//!   replaces: `base` (the line's own) or component names, as `litmus_supersedes` in the
//!   manifest.
//! - `Models: FUNCTION...`: the kernel functions whose accesses and ordering the test stands
//!   for. A patch without tests of its own that changes one of them is not checked by this
//!   test (`plan`, rule 5).
//!
//! Never panics: anything else in the comment is prose; a file without a `C NAME` first line
//! or with an unknown `Result:` word is an error with the reason.

/// herd7's three answers to an `exists` clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ExistsAnswer {
    Always,
    Sometimes,
    Never,
}

impl ExistsAnswer {
    pub fn parse(word: &str) -> Option<ExistsAnswer> {
        match word {
            "Always" => Some(ExistsAnswer::Always),
            "Sometimes" => Some(ExistsAnswer::Sometimes),
            "Never" => Some(ExistsAnswer::Never),
            _ => None,
        }
    }
}

impl std::fmt::Display for ExistsAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExistsAnswer::Always => "Always",
            ExistsAnswer::Sometimes => "Sometimes",
            ExistsAnswer::Never => "Never",
        })
    }
}

/// A header's `Result:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Documented {
    Answer(ExistsAnswer),
    /// No execution completes (herd7: `Never 0 0`).
    Deadlock,
    /// Anything goes (the LKMM's scripts accept every answer).
    Maybe,
}

/// What a litmus file says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub result: Option<Documented>,
    /// `Result: ... DATARACE`: herd7 must flag a data race.
    pub datarace: bool,
    pub path: Option<String>,
    pub supersedes: Vec<String>,
    pub models: Vec<String>,
}

/// Parses the header of a litmus file's text (module doc).
pub fn parse_header(text: &str) -> Result<Header, String> {
    let mut lines = text.lines().map(str::trim).skip_while(|l| l.is_empty());
    let first = lines.next().unwrap_or_default();
    let name = match first.split_once(char::is_whitespace) {
        Some(("C", n)) if !n.trim().is_empty() => n.trim().to_string(),
        _ => {
            return Err(format!(
                "not a C litmus test (first line '{first}', want 'C NAME')"
            ))
        }
    };
    let mut h = Header {
        name,
        result: None,
        datarace: false,
        path: None,
        supersedes: Vec::new(),
        models: Vec::new(),
    };
    let mut rest = lines.skip_while(|l| l.is_empty());
    let Some(open) = rest.next().filter(|l| l.starts_with("(*")) else {
        return Ok(h);
    };
    let mut line = open.trim_start_matches("(*");
    loop {
        let (body, closed) = match line.find("*)") {
            Some(i) => (&line[..i], true),
            None => (line, false),
        };
        read_field(&mut h, body.trim().trim_start_matches('*').trim())?;
        if closed {
            break;
        }
        match rest.next() {
            Some(l) => line = l,
            None => break,
        }
    }
    Ok(h)
}

fn read_field(h: &mut Header, text: &str) -> Result<(), String> {
    let Some((key, value)) = text.split_once(':') else {
        return Ok(());
    };
    let mut words = value.split_whitespace();
    match key.trim() {
        "Result" if h.result.is_none() => {
            let w = words.next().unwrap_or_default();
            h.result = Some(match w {
                "DEADLOCK" => Documented::Deadlock,
                "Maybe" => Documented::Maybe,
                _ => Documented::Answer(
                    ExistsAnswer::parse(w).ok_or_else(|| format!("unknown Result: '{w}'"))?,
                ),
            });
            h.datarace = words.any(|w| w == "DATARACE");
        }
        "Path" if h.path.is_none() => h.path = words.next().map(String::from),
        "Supersedes" => h.supersedes.extend(words.map(String::from)),
        "Models" => h.models.extend(words.map(String::from)),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lkmm_convention_and_ours() {
        let h = parse_header(
            "C SB+poonceonces\n\n(*\n * Result: Sometimes\n *\n * This litmus test: prose.\n *)\n\n{}\n",
        )
        .unwrap();
        assert_eq!(h.name, "SB+poonceonces");
        assert_eq!(h.result, Some(Documented::Answer(ExistsAnswer::Sometimes)));
        assert!(!h.datarace && h.path.is_none() && h.supersedes.is_empty());
        let h = parse_header(
            "C t\n(*\n * Result: Never\n * Path: sched-dispatch (mq-deadline)\n * Supersedes: base seed000\n * Supersedes: more\n * Result: Sometimes\n *)\n",
        )
        .unwrap();
        assert_eq!(
            h.result,
            Some(Documented::Answer(ExistsAnswer::Never)),
            "the first Result counts"
        );
        assert_eq!(h.path.as_deref(), Some("sched-dispatch"));
        assert_eq!(h.supersedes, ["base", "seed000", "more"]);
        let h = parse_header("C d\n(* Result: Sometimes DATARACE *)\n").unwrap();
        assert!(h.datarace);
        assert_eq!(h.result, Some(Documented::Answer(ExistsAnswer::Sometimes)));
        assert_eq!(
            parse_header("C d\n(* Result: DEADLOCK *)").unwrap().result,
            Some(Documented::Deadlock)
        );
        assert_eq!(
            parse_header("C d\n(* Result: Maybe *)").unwrap().result,
            Some(Documented::Maybe)
        );
    }

    #[test]
    fn fields_outside_the_first_comment_do_not_count() {
        let h = parse_header("C t\n\n{}\n\nP0(int *x)\n{\n}\n(* Result: Never *)\n").unwrap();
        assert_eq!(h.result, None);
        let h = parse_header("C t\n(* prose *)\n(* Result: Never *)\n").unwrap();
        assert_eq!(h.result, None);
    }

    #[test]
    fn bad_headers_are_errors_and_nothing_panics() {
        assert!(parse_header("").unwrap_err().contains("not a C litmus"));
        assert!(parse_header("AArch64 t\n").unwrap_err().contains("not a C"));
        assert!(parse_header("C\n").is_err());
        let e = parse_header("C t\n(* Result: Perhaps *)").unwrap_err();
        assert!(e.contains("Perhaps"), "{e}");
        for text in [
            "C t\n(*",
            "C t\n(* Result:",
            "C t\n(*\n * Result:\n",
            "C t\n(* : *)",
            "C t\n(**)",
            "C t\n(* Path: *)",
            "C \u{1F600}\n(* Result: Never \u{1F600} *)",
        ] {
            let _ = parse_header(text);
        }
        assert_eq!(
            parse_header("C t\n(* Path: *)").unwrap().path,
            None,
            "an empty Path is no path"
        );
    }
}
