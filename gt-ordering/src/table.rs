//! The Markdown table of `guest-tests ordering --markdown` (docs/results/ordering): one table
//! per model, a row per kernel, a column per kernel path the tests model, herd7's answers in
//! the cells (a Sometimes in bold, with the test's name), and optional columns the caller fills
//! (the quiesce storm's result beside the model's, from results the `ordering` room does not
//! read).

use super::{Answer, OrderingCheck};

/// How the columns of the seed-000 tests' paths are headed; other paths by their name.
fn path_heading(path: &str) -> String {
    match path {
        "none" => "`none`: no scheduler".into(),
        "sched-dispatch" => "`sched-dispatch`: mq-deadline/BFQ, request on hctx->dispatch".into(),
        "sched-queued" => "`sched-queued`: mq-deadline/BFQ, request in the scheduler".into(),
        p => format!("`{p}`"),
    }
}

fn cell(c: &OrderingCheck, path: &str) -> String {
    let parts: Vec<String> = c
        .outcomes
        .iter()
        .filter(|o| o.path == path)
        .map(|o| {
            let mut s = match o.answer {
                Answer::Never => "Never".to_string(),
                Answer::Sometimes => format!("**Sometimes** ({})", o.test),
            };
            if let Some(e) = o.expected.filter(|e| *e != o.answer) {
                s.push_str(&format!(" (its header says {e})"));
            }
            s
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join("; ")
    }
}

fn judged_by(c: &OrderingCheck) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for o in &c.outcomes {
        if !seen.contains(&o.component.as_str()) {
            seen.push(&o.component);
        }
    }
    let mut s = seen
        .iter()
        .map(|x| format!("`{x}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if !c.unchecked.is_empty() {
        s.push_str(&format!(
            "; not checked: {}",
            c.unchecked
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    s
}

/// The tables; `extra` names more columns and fills them per kernel.
pub fn markdown(
    checks: &[OrderingCheck],
    extra: &[String],
    fill: &dyn Fn(&OrderingCheck) -> Vec<String>,
) -> String {
    let mut models: Vec<&str> = Vec::new();
    for c in checks {
        if !models.contains(&c.model.as_str()) {
            models.push(&c.model);
        }
    }
    let mut out = String::new();
    for model in models {
        let rows: Vec<&OrderingCheck> = checks.iter().filter(|c| c.model == model).collect();
        let mut paths: Vec<&str> = Vec::new();
        for o in rows.iter().flat_map(|c| &c.outcomes) {
            if !paths.contains(&o.path.as_str()) {
                paths.push(&o.path);
            }
        }
        out.push_str(&format!("{model}:\n\n"));
        let mut head = vec!["kernel".to_string(), "tests of".to_string()];
        head.extend(paths.iter().map(|p| path_heading(p)));
        head.extend(extra.iter().cloned());
        out.push_str(&format!("| {} |\n", head.join(" | ")));
        out.push_str(&format!("|{}\n", "---|".repeat(head.len())));
        for c in rows {
            let mut cells = vec![format!("`{}`", c.kernel), judged_by(c)];
            cells.extend(paths.iter().map(|p| cell(c, p)));
            let mut more = fill(c);
            more.resize(extra.len(), "-".into());
            cells.extend(more);
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::LitmusOutcome;
    use super::*;

    fn check(
        kernel: &str,
        model: &str,
        answers: &[(&str, Answer, Option<Answer>)],
    ) -> OrderingCheck {
        OrderingCheck {
            kernel: kernel.into(),
            model: model.into(),
            outcomes: answers
                .iter()
                .map(|(path, a, e)| LitmusOutcome {
                    component: "seed000".into(),
                    test: format!("seed000-{path}"),
                    path: path.to_string(),
                    answer: *a,
                    expected: *e,
                })
                .collect(),
            unchecked: vec![],
            derived: None,
        }
    }

    #[test]
    fn one_table_per_model_a_column_per_path() {
        use Answer::*;
        let mut a = check(
            "rt+seed000",
            "M612",
            &[
                ("none", Never, Some(Never)),
                ("sched-dispatch", Sometimes, Some(Sometimes)),
            ],
        );
        a.unchecked.push("seed003".into());
        let b = check("rt73", "M73", &[("none", Sometimes, Some(Never))]);
        let t = markdown(&[a, b], &["storm".to_string()], &|c| {
            if c.kernel == "rt73" {
                vec!["6 boots".into()]
            } else {
                vec![]
            }
        });
        let want = "M612:\n\n| kernel | tests of | `none`: no scheduler | `sched-dispatch`: mq-deadline/BFQ, request on hctx->dispatch | storm |\n|---|---|---|---|---|\n| `rt+seed000` | `seed000`; not checked: `seed003` | Never | **Sometimes** (seed000-sched-dispatch) | - |\n\nM73:\n\n| kernel | tests of | `none`: no scheduler | storm |\n|---|---|---|---|\n| `rt73` | `seed000` | **Sometimes** (seed000-none) (its header says Never) | 6 boots |\n\n";
        assert_eq!(t, want);
    }
}
