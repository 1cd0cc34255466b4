//! report.html: the same blocks as report.md, self-contained (styles and SVG plots inline).

use std::fmt::Write as _;

use super::markdown::{blocks, Block};
use super::ReportData;

/// Escapes text for HTML.
pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Escapes, then turns the Markdown inline marks the report uses (`code`, **bold**) into tags.
fn inline(s: &str) -> String {
    let e = esc(s);
    let mut out = String::new();
    for (i, part) in e.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            for (j, p) in part.split("**").enumerate() {
                if j % 2 == 1 {
                    let _ = write!(out, "<strong>{p}</strong>");
                } else {
                    out.push_str(p);
                }
            }
        }
    }
    out
}

const STYLE: &str =
    "body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}tr:nth-child(even){background:#fafafa}
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:13px;color:#555}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}
code{background:#f3f3f3;padding:0 2px}";

/// report.html
pub(super) fn render(d: &ReportData) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&d.title)
    );
    for b in blocks(d) {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(o, "<h{l}>{}</h{l}>", inline(&t));
            }
            Block::Para(t) => {
                let _ = writeln!(o, "<p>{}</p>", inline(&t));
            }
            Block::List(items) => {
                o.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(o, "<li>{}</li>", inline(&i));
                }
                o.push_str("</ul>\n");
            }
            Block::Table(h, rows) => {
                o.push_str("<table><thead><tr>");
                for c in h {
                    let _ = write!(o, "<th>{}</th>", inline(&c));
                }
                o.push_str("</tr></thead><tbody>\n");
                for r in rows {
                    o.push_str("<tr>");
                    for c in r {
                        let _ = write!(o, "<td>{}</td>", inline(&c));
                    }
                    o.push_str("</tr>\n");
                }
                o.push_str("</tbody></table>\n");
            }
            Block::Figure(i) => {
                let p = &d.plots[i];
                let svg = p.svg.trim_start_matches(|c: char| c != '<').trim_start();
                let svg = match svg.strip_prefix("<?xml") {
                    Some(rest) => rest.split_once("?>").map_or(rest, |(_, r)| r).trim_start(),
                    None => svg,
                };
                let _ = writeln!(
                    o,
                    "<figure id=\"{}\">{svg}<figcaption>{}</figcaption></figure>",
                    esc(&p.file),
                    inline(&p.caption)
                );
            }
            Block::Code(t) => {
                let _ = writeln!(o, "<pre>{}</pre>", esc(&t));
            }
        }
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_marks_and_escaping() {
        assert_eq!(
            inline("`a<b>` and **x & y** <script>"),
            "<code>a&lt;b&gt;</code> and <strong>x &amp; y</strong> &lt;script&gt;"
        );
        assert_eq!(esc("\"'"), "&quot;&#39;");
    }
}
