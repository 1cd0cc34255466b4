//! report.html: report.md rendered by pulldown-cmark (CommonMark with tables), self-contained.
//!
//! Contract:
//! 1. The HTML is report.md's own text rendered, so both files always say the same thing.
//! 2. Self-contained: the styles are inline, and an image of a plot (`![caption](plots/<file>)`)
//!    becomes `<figure id="<file>">` holding the plot's SVG (its XML prolog dropped) and the
//!    caption as `<figcaption>`; when the image is a paragraph of its own, the figure replaces
//!    the paragraph. An image that names no plot of the report is rendered as an image.
//! 3. Text is escaped: raw HTML in report.md (a guest-controlled lock-site name, say) is shown
//!    as text, never passed through, and a link whose target has a scheme other than http(s)
//!    or mailto is shown as its text alone.

use pulldown_cmark::{html, CowStr, Event, Options, Parser, Tag, TagEnd};
use pulldown_cmark_escape::escape_html;

use super::Plot;

const STYLE: &str =
    "body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}tr:nth-child(even){background:#fafafa}
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:13px;color:#555}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}
code{background:#f3f3f3;padding:0 2px}";

/// Escapes text for an HTML attribute or element.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    let _ = escape_html(&mut o, s);
    o
}

/// Whether a link target is safe to keep (rule 3): relative, or http(s) / mailto.
fn safe_url(url: &str) -> bool {
    let url = url.trim();
    match url.find([':', '/', '?', '#']) {
        Some(i) if url.as_bytes()[i] == b':' => {
            let scheme = url[..i].to_ascii_lowercase();
            matches!(scheme.as_str(), "http" | "https" | "mailto")
        }
        _ => true,
    }
}

/// Raw HTML becomes text and unsafe links lose their tags (rule 3).
fn neutralise<'a>(events: impl Iterator<Item = Event<'a>>) -> impl Iterator<Item = Event<'a>> {
    let mut dropped_link = false;
    events.filter_map(move |e| match e {
        Event::Html(s) | Event::InlineHtml(s) => Some(Event::Text(s)),
        Event::Start(Tag::HtmlBlock) => Some(Event::Start(Tag::Paragraph)),
        Event::End(TagEnd::HtmlBlock) => Some(Event::End(TagEnd::Paragraph)),
        Event::Start(Tag::Link { ref dest_url, .. }) if !safe_url(dest_url) => {
            dropped_link = true;
            None
        }
        Event::End(TagEnd::Link) if dropped_link => {
            dropped_link = false;
            None
        }
        e => Some(e),
    })
}

/// The SVG text of a plot without what precedes its root element (XML prolog, blank lines).
fn inline_svg(svg: &str) -> &str {
    let svg = svg.trim_start_matches(|c: char| c != '<').trim_start();
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(rest, |(_, r)| r).trim_start(),
        None => svg,
    }
}

/// The `<figure>` of a plot; `caption` holds the image's inner events (rule 2).
fn figure(p: &Plot, caption: Vec<Event<'_>>) -> Event<'static> {
    let mut cap = String::new();
    html::push_html(&mut cap, caption.into_iter());
    Event::Html(CowStr::from(format!(
        "<figure id=\"{}\">{}<figcaption>{cap}</figcaption></figure>\n",
        esc(&p.file),
        inline_svg(&p.svg)
    )))
}

/// report.md's events with every plot image replaced by its figure (rule 2).
fn with_figures<'a>(md: &'a str, plots: &[Plot]) -> Vec<Event<'a>> {
    let plot = |e: &Event<'_>| match e {
        Event::Start(Tag::Image { dest_url, .. }) => dest_url
            .strip_prefix("plots/")
            .and_then(|f| plots.iter().find(|p| p.file == f)),
        _ => None,
    };
    let mut out = Vec::new();
    let mut it = neutralise(Parser::new_ext(md, Options::ENABLE_TABLES)).peekable();
    while let Some(e) = it.next() {
        let own_paragraph = matches!(e, Event::Start(Tag::Paragraph))
            && it.peek().is_some_and(|n| plot(n).is_some());
        let start = if own_paragraph { it.next() } else { Some(e) };
        let Some(p) = start.as_ref().and_then(plot) else {
            out.extend(start);
            continue;
        };
        let caption: Vec<Event<'_>> = it
            .by_ref()
            .take_while(|e| !matches!(e, Event::End(TagEnd::Image)))
            .collect();
        if !own_paragraph {
            out.push(figure(p, caption));
        } else if matches!(it.peek(), Some(Event::End(TagEnd::Paragraph))) {
            it.next();
            out.push(figure(p, caption));
        } else {
            // More text follows the image in its paragraph: keep the paragraph around it.
            out.push(Event::Start(Tag::Paragraph));
            out.push(figure(p, caption));
        }
    }
    out
}

/// report.html from report.md's text (`md`) and the report's plots.
pub(super) fn render(title: &str, md: &str, plots: &[Plot]) -> String {
    let mut o = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(title)
    );
    html::push_html(&mut o, with_figures(md, plots).into_iter());
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot(file: &str) -> Plot {
        Plot {
            file: file.into(),
            caption: "unused: the caption comes from report.md".into(),
            svg:
                "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>\n"
                    .into(),
        }
    }

    #[test]
    fn markdown_marks_tables_and_code() {
        let md = "# T\n\nSome `a<b>` and **x & y**.\n\n| k | v |\n|---|---|\n| `a\\|b` | 1 |\n\n\
                  - one\n- two\n\n```\nx < y\n```\n";
        let h = render("T <1>", md, &[]);
        assert!(h.contains("<title>T &lt;1&gt;</title>"), "{h}");
        assert!(h.contains("<h1>T</h1>"), "{h}");
        assert!(
            h.contains("<p>Some <code>a&lt;b&gt;</code> and <strong>x &amp; y</strong>.</p>"),
            "{h}"
        );
        assert!(
            h.contains("<table><thead><tr><th>k</th><th>v</th></tr></thead><tbody>"),
            "{h}"
        );
        assert!(h.contains("<td><code>a|b</code></td><td>1</td>"), "{h}");
        assert!(h.contains("<ul>\n<li>one</li>\n<li>two</li>\n</ul>"), "{h}");
        assert!(h.contains("<pre><code>x &lt; y\n</code></pre>"), "{h}");
        assert!(h.starts_with("<!DOCTYPE html>") && h.ends_with("</body></html>\n"));
    }

    #[test]
    fn plot_images_become_inline_svg_figures() {
        let plots = [plot("strip-a.svg"), plot("b.svg")];
        let md = "Text.\n\n![Strip of `a` & more](plots/strip-a.svg)\n\n\
                  Before ![b](plots/b.svg) after\n\n![other](elsewhere.png)\n";
        let h = render("t", md, &plots);
        assert_eq!(h.matches("<svg").count(), 2, "{h}");
        assert!(!h.contains("<?xml"), "{h}");
        assert!(
            h.contains(
                "<figure id=\"strip-a.svg\"><svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>\n\
                 <figcaption>Strip of <code>a</code> &amp; more</figcaption></figure>"
            ),
            "{h}"
        );
        // A figure that is its paragraph's only content is not wrapped in <p>.
        assert!(!h.contains("<p><figure id=\"strip-a.svg\""), "{h}");
        assert!(h.contains("<p>Before <figure id=\"b.svg\">"), "{h}");
        assert!(h.contains("</figure>\n after</p>"), "{h}");
        // An image that is not one of the report's plots stays an image.
        assert!(
            h.contains("<img src=\"elsewhere.png\" alt=\"other\" />"),
            "{h}"
        );
    }

    #[test]
    fn raw_html_and_unsafe_links_are_text() {
        let md = "Site <script>alert(1)</script> here.\n\n<div onclick=\"x\">block</div>\n\n\
                  [bad](javascript:alert(1)) [ok](https://example.org/a) [rel](runs/a.json)\n";
        let h = render("t", md, &[]);
        assert!(!h.contains("<script>") && !h.contains("<div"), "{h}");
        assert!(
            h.contains("Site &lt;script&gt;alert(1)&lt;/script&gt; here."),
            "{h}"
        );
        assert!(
            h.contains("<p>&lt;div onclick=\"x\"&gt;block&lt;/div&gt;"),
            "{h}"
        );
        assert!(!h.contains("javascript:"), "{h}");
        assert!(
            h.contains("<p>bad <a href=\"https://example.org/a\">ok</a>"),
            "{h}"
        );
        assert!(h.contains("<a href=\"runs/a.json\">rel</a>"), "{h}");
        assert!(safe_url("plots/a:b.svg") && safe_url("#x") && safe_url("MAILTO:a@b"));
        assert!(!safe_url(" JavaScript:x") && !safe_url("data:text/html,x"));
    }
}
