//! Which litmus tests judge a kernel, and what in it is not checked.
//!
//! Rules:
//! 1. A kernel `LINE(+COMPONENT)*` carries its line's own tests (reported under the line's name,
//!    superseded as `base`) and each component's (`litmus` in images/kernels.toml, files in the
//!    line's patch_dir). A component's `litmus_supersedes` drops the tests of the parts it names
//!    when they are in the same kernel: a stacked kernel is judged by the tests of its final
//!    code, so `rt+seed000+seed000-paired` by seed000-paired's, not seed000's, nor the base's.
//! 2. A user's `patch:FILE` carries the tests beside it: `FILE` with the extension `.litmus`
//!    (`fix.patch` -> `fix.litmus`) and every `*.litmus` in `FILE` with the extension
//!    `.litmus.d` (`fix.litmus.d/`); a `tree:PATH` kernel likewise `PATH.litmus` and
//!    `PATH.litmus.d/`. A tree's code is its own, so it carries none of the line's tests. Such a
//!    test's header may say `Supersedes: base COMPONENT...`.
//! 3. Not checked ("ordering not checked"): a patch set with neither tests nor
//!    `litmus_exempt`, a user patch or tree with no test beside it, a line without tests of
//!    its own: unless what they changed is superseded by a part that has tests. Config
//!    overlays and command-line words change no code.
//! 4. The model: a tree's own tools/memory-model; else the line's (`lkmm`, by default its
//!    source).
//! 5. The tests that judge a kernel model its code only where the parts without tests of their
//!    own leave it alone: each test's header names the functions it models (`Models:`), and a
//!    part without tests (a patch set, exempt or not, or a user's patch) that changes one of
//!    them is not checked, `LABEL (FUNCTION changed)`. A non-exempt part whose diff changes lines
//!    outside any function it can name (file scope, or a hunk without function context) is not
//!    checked either: what it changed is unknown. A part that changes only functions no test
//!    models keeps the remaining tests valid for this kernel and is checked by them. A tree is
//!    never checked by the line's tests.
//! 6. A part not checked because it changes modelled functions is `pending`: the check may
//!    still derive tests for it from the kernel's own source (`derive`), and then it is checked
//!    by them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gt_images::manifest::litmus::BASE_TESTS;
use gt_images::manifest::Manifest;
use gt_images::spec::{Base, KernelSpec};

use super::changes::changed_functions;
use super::litmus::{parse_header, Header};
use super::OrderingError;

/// Whose memory model judges the kernel (rule 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelOf {
    /// A source of the manifest.
    Source(String),
    Tree {
        path: PathBuf,
        rev: Option<String>,
    },
    /// A line without a model (a prebuilt line without `lkmm`): nothing can be checked.
    Nothing,
}

/// One litmus test a kernel carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Test {
    /// The part it belongs to: the line's name, a component, `patch:FILE` or `tree:PATH`.
    pub component: String,
    pub file: PathBuf,
    pub header: Header,
}

impl Test {
    /// The file's stem, the test's name in the results.
    pub fn stem(&self) -> String {
        self.file
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into_owned())
    }
}

/// What `guest-tests ordering` runs for one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub kernel: String,
    pub model: ModelOf,
    pub tests: Vec<Test>,
    pub unchecked: Vec<String>,
    /// Rule 6: the parts whose tests may be derived (each also in `unchecked`).
    pub pending: Vec<Pending>,
    /// Every patch file of the kernel, in order (its code is the line's source with these).
    pub code: Vec<PathBuf>,
    /// The manifest line and its source, for a kernel built from one.
    pub line: Option<(String, String)>,
    /// Set by the check when it derived tests (`derive`): from whose, what it read.
    pub derived: Option<String>,
}

/// A part without tests that changes modelled functions (rule 6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub label: String,
    /// Its entry in `unchecked`.
    pub reason: String,
    pub functions: Vec<String>,
}

/// What rules 1, 3, 5 and 6 make of a kernel's parts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    pub tests: Vec<Test>,
    pub unchecked: Vec<String>,
    pub pending: Vec<Pending>,
}

/// One part of a kernel that changes code: its tests (maybe none) and whose it supersedes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// As reported (`rt`, `seed000`, `patch:fix.patch`).
    pub label: String,
    /// As superseded (`base` for the line's own tests, else the label).
    pub key: String,
    pub tests: Vec<Test>,
    pub supersedes: Vec<String>,
    /// Carries no tests and needs none (`litmus_exempt`), unless it changes a function the
    /// remaining tests model (rule 5).
    pub exempt: bool,
    /// Its diffs (a patch set's files, a user's patch); empty for a line or a tree, whose code
    /// is their own.
    pub patches: Vec<PathBuf>,
}

/// Rules 1, 3, 5 and 6 on the parts of a kernel, in order.
pub fn resolve(parts: Vec<Part>) -> Resolved {
    let gone: BTreeSet<String> = parts
        .iter()
        .filter(|p| !p.tests.is_empty())
        .flat_map(|p| p.supersedes.iter().cloned())
        .collect();
    let kept: Vec<Part> = parts
        .into_iter()
        .filter(|p| !gone.contains(&p.key))
        .collect();
    let modelled: BTreeSet<&str> = kept
        .iter()
        .flat_map(|p| &p.tests)
        .flat_map(|t| t.header.models.iter().map(String::as_str))
        .collect();
    let mut out = Resolved::default();
    for p in kept.iter().filter(|p| p.tests.is_empty()) {
        if let Some((reason, functions)) = unchecked_part(p, &modelled) {
            if !functions.is_empty() {
                out.pending.push(Pending {
                    label: p.label.clone(),
                    reason: reason.clone(),
                    functions,
                });
            }
            out.unchecked.push(reason);
        }
    }
    out.tests = kept.into_iter().flat_map(|p| p.tests).collect();
    out
}

/// Rules 3, 5 and 6 for a part without tests: why it is not checked, if it is not, and the
/// modelled functions it changed when that is the only reason.
fn unchecked_part(p: &Part, modelled: &BTreeSet<&str>) -> Option<(String, Vec<String>)> {
    if p.patches.is_empty() {
        return (!p.exempt).then(|| (p.label.clone(), Vec::new()));
    }
    let mut changed = BTreeSet::new();
    let mut outside = 0;
    for f in &p.patches {
        let Ok(text) = std::fs::read_to_string(f) else {
            return Some((
                format!("{} (its diff {} could not be read)", p.label, f.display()),
                Vec::new(),
            ));
        };
        let c = changed_functions(&text);
        outside += c.file_scope;
        changed.extend(c.functions);
    }
    let hit: Vec<&str> = changed
        .iter()
        .map(String::as_str)
        .filter(|f| modelled.contains(f))
        .collect();
    if !hit.is_empty() {
        let functions = hit.iter().map(ToString::to_string).collect();
        return Some((
            format!("{} ({} changed)", p.label, hit.join(", ")),
            functions,
        ));
    }
    if !p.exempt && changed.is_empty() && outside == 0 {
        return Some((
            format!("{} (no change it could read in its diff)", p.label),
            Vec::new(),
        ));
    }
    (!p.exempt && outside > 0).then(|| {
        (
            format!(
                "{} ({outside} changed lines outside a function the diff names: give the diff function context, diff -p or git)",
                p.label
            ),
            Vec::new(),
        )
    })
}

fn read_test(component: &str, file: PathBuf) -> Result<Test, OrderingError> {
    let text = std::fs::read_to_string(&file)
        .map_err(|e| OrderingError::Input(format!("litmus test {}: {e}", file.display())))?;
    let header = parse_header(&text)
        .map_err(|msg| OrderingError::Input(format!("litmus test {}: {msg}", file.display())))?;
    Ok(Test {
        component: component.to_string(),
        file,
        header,
    })
}

fn read_all(component: &str, files: Vec<PathBuf>) -> Result<Vec<Test>, OrderingError> {
    files.into_iter().map(|f| read_test(component, f)).collect()
}

/// The litmus files beside a user's patch or tree (rule 2).
pub fn beside(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let one = p.with_extension("litmus");
    if one.is_file() && one != p {
        out.push(one);
    }
    if let Ok(d) = std::fs::read_dir(p.with_extension("litmus.d")) {
        let mut more: Vec<PathBuf> = d
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "litmus"))
            .collect();
        more.sort();
        out.extend(more);
    }
    out
}

fn user_part(label: String, at: &Path, patch: bool) -> Result<Part, OrderingError> {
    let tests = read_all(&label, beside(at))?;
    let supersedes = tests
        .iter()
        .flat_map(|t| t.header.supersedes.iter().cloned())
        .collect();
    Ok(Part {
        key: label.clone(),
        label,
        tests,
        supersedes,
        exempt: false,
        patches: if patch {
            vec![at.to_path_buf()]
        } else {
            Vec::new()
        },
    })
}

/// The plan of one kernel (module doc). `spec` must have passed [`KernelSpec::check`].
pub fn plan(m: &Manifest, spec: &KernelSpec) -> Result<Plan, OrderingError> {
    let (model, mut parts, line) = match &spec.base {
        Base::Tree { path, rev } => (
            ModelOf::Tree {
                path: path.clone(),
                rev: rev.clone(),
            },
            vec![user_part(format!("tree:{}", path.display()), path, false)?],
            None,
        ),
        Base::Variant(name) => {
            let (model, parts) = manifest_parts(m, name)?;
            let line = m
                .parts(name)
                .ok()
                .map(|(l, _)| (l.name.clone(), l.source.clone()));
            (model, parts, line)
        }
    };
    for p in &spec.patches {
        parts.push(user_part(format!("patch:{}", p.display()), p, true)?);
    }
    let code = parts
        .iter()
        .flat_map(|p| p.patches.iter().cloned())
        .collect();
    let Resolved {
        tests,
        unchecked,
        pending,
    } = resolve(parts);
    if model == ModelOf::Nothing && !tests.is_empty() {
        return Err(OrderingError::Input(format!(
            "kernel '{}': its line has no memory model (set lkmm in images/kernels.toml)",
            spec.text
        )));
    }
    Ok(Plan {
        kernel: spec.label.clone(),
        model,
        tests,
        unchecked,
        pending,
        code,
        line,
        derived: None,
    })
}

/// A manifest kernel's model and parts: its line's own tests, then each patch set's.
fn manifest_parts(m: &Manifest, name: &str) -> Result<(ModelOf, Vec<Part>), OrderingError> {
    let (line, comps) = m
        .parts(name)
        .map_err(|e| OrderingError::Input(e.to_string()))?;
    let files = line.litmus.iter().map(|f| m.path(f)).collect();
    let mut parts = vec![Part {
        label: line.name.clone(),
        key: BASE_TESTS.to_string(),
        tests: read_all(&line.name, files)?,
        supersedes: Vec::new(),
        exempt: false,
        patches: Vec::new(),
    }];
    let dir = m.path(line.patch_dir.as_deref().unwrap_or(Path::new("")));
    for c in comps.iter().filter(|c| !c.patches.is_empty()) {
        let files = c.litmus.iter().map(|f| dir.join(f)).collect();
        parts.push(Part {
            label: c.name.clone(),
            key: c.name.clone(),
            tests: read_all(&c.name, files)?,
            supersedes: c.litmus_supersedes.clone(),
            exempt: c.litmus_exempt.is_some(),
            patches: c.patches.iter().map(|f| dir.join(f)).collect(),
        });
    }
    let model = match m.lkmm_source(line) {
        Some((name, _)) => ModelOf::Source(name.to_string()),
        None => ModelOf::Nothing,
    };
    Ok((model, parts))
}

#[cfg(test)]
mod tests;
