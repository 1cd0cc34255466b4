//! The pieces a report is made of, shared by the sections that build them (markdown, model)
//! and rendered to report.md by `markdown.rs` (report.html is that Markdown, rendered).

/// A piece of the report.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Block {
    Heading(u8, String),
    Para(String),
    List(Vec<String>),
    Table(Vec<String>, Vec<Vec<String>>),
    /// Index into `ReportData::plots`.
    Figure(usize),
    Code(String),
}
