//! Litmus tests derived from a kernel's own source: the memory model on a patch that brings no
//! test, where the patched code has the shape of code a test already models.
//!
//! Rules:
//! 1. An ordering point is data. `points.toml` beside a line's litmus tests names each point
//!    `FUNCTION/NAME`, the file the function is in, and two anchors in the function's
//!    normalized text (`csrc`): the point is the text between the end of the first `after` and
//!    the start of the next `before`. A test marks where it models a point with a line
//!    `/* point FUNCTION/NAME */`; the line after it holds the primitive there.
//! 2. The primitive at a point is read from the source: `smp_mb()` or `mb()` (a full barrier),
//!    `smp_rmb()`/`rmb()`, `smp_wmb()`/`wmb()`, `smp_mb__before_atomic()`,
//!    `smp_mb__after_atomic()`, or none (`barrier()` orders nothing between CPUs). Two different
//!    ones at one point are not read. Any other text at the point must be the template's.
//! 3. A template is a component of the kernel's line whose tests mark points. Its code is the
//!    line's source with the component's patches; the kernel's code is the source with all the
//!    kernel's patches. The kernel is derivable from the template when every function the
//!    template's tests model has, in both codes, the same text outside the points, the same
//!    text at each point but for the primitive, and the template's primitive at each point is
//!    the one its tests' slots hold (else the data is stale, and nothing is derived). Every
//!    file either patches has the same text outside its function definitions in both codes
//!    (declarations, types, macros, variables).
//! 4. The derived tests are the template's tests with every slot holding the kernel's
//!    primitive, written under the cache; their `Result:` is dropped (the answer is this
//!    kernel's). They replace the kernel's tests that model a function a part without tests
//!    changed.
//! 5. What cannot be derived stays "ordering not checked", with the reason of each template
//!    tried.
//! 6. Never panics on any source, diff or test text; a patch that does not apply is a reason,
//!    not an error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use gt_images::manifest::{Component, Manifest};

use super::litmus::parse_header;
use super::plan::Test;

pub mod csrc;

/// One ordering point (rule 1).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// `FUNCTION/NAME`.
    pub name: String,
    /// The function's file in the source tree, e.g. `block/blk-mq.c`.
    pub file: String,
    pub after: String,
    pub before: String,
    /// What the point is, for a reader of the file.
    #[serde(default)]
    pub about: String,
}

impl Point {
    pub fn function(&self) -> &str {
        self.name.split('/').next().unwrap_or_default()
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PointsFile {
    point: Vec<Point>,
}

/// The points of a line's litmus directory (`DIR/points.toml`; none when absent).
pub fn points_in(dir: &Path) -> Result<Vec<Point>, String> {
    let f = dir.join("points.toml");
    let Ok(text) = std::fs::read_to_string(&f) else {
        return Ok(Vec::new());
    };
    toml::from_str::<PointsFile>(&text)
        .map(|p| p.point)
        .map_err(|e| format!("{}: {e}", f.display()))
}

/// What orders accesses at a point (rule 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primitive {
    Full,
    Read,
    Write,
    BeforeAtomic,
    AfterAtomic,
    Nothing,
}

/// Each primitive: its statements in kernel C, and the one a litmus slot holds.
const PRIMITIVES: [(Primitive, &[&str], &str); 6] = [
    (Primitive::Full, &["smp_mb();", "mb();"], "smp_mb();"),
    (Primitive::Read, &["smp_rmb();", "rmb();"], "smp_rmb();"),
    (Primitive::Write, &["smp_wmb();", "wmb();"], "smp_wmb();"),
    (
        Primitive::BeforeAtomic,
        &["smp_mb__before_atomic();"],
        "smp_mb__before_atomic();",
    ),
    (
        Primitive::AfterAtomic,
        &["smp_mb__after_atomic();"],
        "smp_mb__after_atomic();",
    ),
    (Primitive::Nothing, &["barrier();"], "/* no barrier */"),
];

impl Primitive {
    fn slot(self) -> &'static str {
        PRIMITIVES.iter().find(|p| p.0 == self).map_or("", |p| p.2)
    }

    fn of_slot(line: &str) -> Option<Primitive> {
        let t = line.trim();
        PRIMITIVES.iter().find(|p| p.2 == t).map(|p| p.0)
    }
}

impl std::fmt::Display for Primitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Primitive::Nothing => "no barrier",
            p => p.slot().trim_end_matches(';'),
        })
    }
}

/// A point read in one function's normalized text: the text around it and its primitive.
#[derive(Debug, PartialEq, Eq)]
struct AtPoint {
    /// The function's text with the point cut out.
    outside: String,
    /// The point's text without its primitive statements.
    residue: String,
    primitive: Primitive,
}

/// Whether `text` has statement `s` at `at` with an identifier boundary before it.
fn statement_at(text: &str, at: usize, s: &str) -> bool {
    text[at..].starts_with(s)
        && (at == 0
            || !text.as_bytes()[at - 1].is_ascii_alphanumeric() && text.as_bytes()[at - 1] != b'_')
}

/// Rules 1-2 on one function's normalized text.
fn read_point(body: &str, p: &Point) -> Result<AtPoint, String> {
    let after = csrc::normalize(&p.after);
    let before = csrc::normalize(&p.before);
    let a = body
        .find(&after)
        .ok_or_else(|| format!("{}: `{}` not found", p.name, p.after))?
        + after.len();
    let b = body[a..]
        .find(&before)
        .ok_or_else(|| format!("{}: `{}` not found after `{}`", p.name, p.before, p.after))?
        + a;
    let region = &body[a..b];
    let mut found = BTreeSet::new();
    let mut residue = String::new();
    let mut i = 0;
    'scan: while i < region.len() {
        for (prim, stmts, _) in PRIMITIVES {
            if let Some(s) = stmts.iter().find(|s| statement_at(region, i, s)) {
                found.insert(prim as u8);
                i += s.len();
                continue 'scan;
            }
        }
        let c = region[i..].chars().next().unwrap_or(' ');
        residue.push(c);
        i += c.len_utf8();
    }
    let strong: Vec<Primitive> = PRIMITIVES
        .iter()
        .map(|p| p.0)
        .filter(|p| found.contains(&(*p as u8)) && *p != Primitive::Nothing)
        .collect();
    let primitive = match strong.as_slice() {
        [] => Primitive::Nothing,
        [one] => *one,
        more => {
            let names: Vec<String> = more.iter().map(ToString::to_string).collect();
            return Err(format!(
                "{}: several barriers ({})",
                p.name,
                names.join(", ")
            ));
        }
    };
    Ok(AtPoint {
        outside: format!("{}<{}>{}", &body[..a], p.name, &body[b..]),
        residue,
        primitive,
    })
}

/// The slots of a test's text: each marked point's primitive, or why the text is not usable.
fn slots(text: &str) -> Result<BTreeMap<String, Primitive>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = marker(l) else { continue };
        let next = lines.get(i + 1).copied().unwrap_or_default();
        let prim = Primitive::of_slot(next).ok_or_else(|| {
            format!(
                "the slot of {name} holds `{}`, not a primitive",
                next.trim()
            )
        })?;
        if out
            .insert(name.to_string(), prim)
            .is_some_and(|p| p != prim)
        {
            return Err(format!("the slots of {name} differ"));
        }
    }
    Ok(out)
}

fn marker(line: &str) -> Option<&str> {
    let t = line.trim();
    t.strip_prefix("/* point ")?
        .strip_suffix("*/")
        .map(str::trim)
}

/// Rule 4: `text` with every slot of a point in `prims` holding that primitive.
fn rewrite(text: &str, prims: &BTreeMap<String, Primitive>) -> String {
    let mut out = String::new();
    let mut set: Option<Primitive> = None;
    for l in text.lines() {
        if let Some(p) = set.take() {
            let indent = &l[..l.len() - l.trim_start().len()];
            out.push_str(indent);
            out.push_str(p.slot());
        } else if l.trim_start().starts_with("* Result:") {
            out.push_str(
                " * Derived for the kernel's own code: no documented result, the answer is its.",
            );
        } else {
            out.push_str(l);
        }
        out.push('\n');
        set = marker(l).and_then(|n| prims.get(n).copied());
    }
    out
}

/// What a kernel's derivation needs (from its plan and the manifest).
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub kernel: &'a str,
    pub line: &'a str,
    /// The line's source name (manifest `[sources]`).
    pub source: &'a str,
    /// Every patch file of the kernel, in order.
    pub code: Vec<PathBuf>,
    /// The parts without tests that change modelled functions, and those functions.
    pub changed: BTreeSet<String>,
    pub parts: Vec<String>,
}

/// Tests derived for a kernel (rule 4).
#[derive(Debug)]
pub struct Derived {
    pub template: String,
    pub tests: Vec<Test>,
    /// Each point's primitive in the kernel's code, `FUNCTION/NAME: smp_rmb()`.
    pub read: Vec<String>,
}

/// The line's source files, patched by `patches` in order: file -> text (empty when the source
/// does not have it and no patch makes it).
fn patched(
    root: &Path,
    files: &[String],
    patches: &[PathBuf],
    work: &Path,
) -> Result<BTreeMap<String, String>, String> {
    let _ = std::fs::remove_dir_all(work);
    let mut out = BTreeMap::new();
    for f in files {
        let dest = work.join(f);
        std::fs::create_dir_all(dest.parent().unwrap_or(work)).map_err(|e| e.to_string())?;
        let orig = std::fs::read(root.join(f)).unwrap_or_default();
        std::fs::write(&dest, orig).map_err(|e| format!("{}: {e}", dest.display()))?;
        for p in patches {
            let diff = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let part = csrc::diff_for(&diff, f);
            if part.is_empty() {
                continue;
            }
            let cut = work.join(".part.diff");
            std::fs::write(&cut, part).map_err(|e| e.to_string())?;
            let st = Command::new("patch")
                .args([
                    "-p1",
                    "--batch",
                    "--forward",
                    "--silent",
                    "--no-backup-if-mismatch",
                    "-d",
                ])
                .arg(work)
                .arg("-i")
                .arg(&cut)
                .output()
                .map_err(|e| format!("patch: {e}"))?;
            if !st.status.success() {
                return Err(format!(
                    "{} does not apply to {f}: {}",
                    p.display(),
                    String::from_utf8_lossy(&st.stdout).trim()
                ));
            }
        }
        let text = std::fs::read(&dest).map_err(|e| e.to_string())?;
        out.insert(
            f.clone(),
            csrc::strip_comments(&String::from_utf8_lossy(&text)),
        );
    }
    let _ = std::fs::remove_dir_all(work);
    Ok(out)
}

/// A function's normalized definitions across `code`'s files (rule 3: absent in both is equal).
fn body_of(code: &BTreeMap<String, String>, function: &str) -> Option<String> {
    let all: Vec<String> = code
        .values()
        .filter_map(|t| csrc::definitions(t, function))
        .map(|d| csrc::normalize(&d))
        .collect();
    (!all.is_empty()).then(|| all.concat())
}

/// A template: a component with tests that mark points.
struct Template<'a> {
    comp: &'a Component,
    tests: Vec<(PathBuf, String, BTreeMap<String, Primitive>)>,
}

/// Rule 3's templates, in manifest order: one per set of tests (the first component that
/// carries it, whose code the tests were written for).
fn templates<'a>(m: &'a Manifest, line: &str, dir: &Path) -> Vec<Template<'a>> {
    let mut seen = BTreeSet::new();
    m.components
        .iter()
        .filter(|c| !c.absent.contains_key(line) && !c.litmus.is_empty())
        .filter(|c| seen.insert(c.litmus.clone()))
        .filter_map(|c| {
            let tests: Option<Vec<_>> = c
                .litmus
                .iter()
                .map(|f| {
                    let file = dir.join(f);
                    let text = std::fs::read_to_string(&file).ok()?;
                    let s = slots(&text).ok()?;
                    Some((file, text, s))
                })
                .collect();
            let tests = tests?;
            tests
                .iter()
                .any(|t| !t.2.is_empty())
                .then_some(Template { comp: c, tests })
        })
        .collect()
}

/// Rule 3 for one template: the kernel's primitive at each point, or why not.
fn against(
    t: &Template,
    points: &[Point],
    kernel: &BTreeMap<String, String>,
    tmpl: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Primitive>, String> {
    for (f, text) in kernel {
        let other = tmpl.get(f).map(|t| csrc::file_scope(t));
        if other.as_deref() != Some(csrc::file_scope(text).as_str()) {
            return Err(format!("{f} differs outside its functions"));
        }
    }
    let mut models = BTreeSet::new();
    let mut want: BTreeMap<String, Primitive> = BTreeMap::new();
    for (file, text, s) in &t.tests {
        let h = parse_header(text).map_err(|e| format!("{}: {e}", file.display()))?;
        models.extend(h.models);
        want.extend(s.iter().map(|(k, v)| (k.clone(), *v)));
    }
    let mut got = BTreeMap::new();
    for f in &models {
        let (kb, tb) = (body_of(kernel, f), body_of(tmpl, f));
        let here: Vec<&Point> = points.iter().filter(|p| p.function() == f).collect();
        let (Some(kb), Some(tb)) = (kb.clone(), tb.clone()) else {
            if kb == tb {
                continue;
            }
            return Err(format!("{f} is defined in one code and not the other"));
        };
        let (mut ko, mut to) = (kb, tb);
        for p in here {
            let (k, tp) = (read_point(&ko, p)?, read_point(&to, p)?);
            if k.residue != tp.residue {
                return Err(format!(
                    "{}: the code at the point differs beyond its barrier",
                    p.name
                ));
            }
            if want.get(&p.name).is_some_and(|w| *w != tp.primitive) {
                return Err(format!(
                    "{}: the tests' slot says {}, the code they model has {} (stale points data)",
                    p.name, want[&p.name], tp.primitive
                ));
            }
            got.insert(p.name.clone(), k.primitive);
            (ko, to) = (k.outside, tp.outside);
        }
        if ko != to {
            return Err(format!("{f} differs outside its ordering points"));
        }
    }
    if let Some(missing) = want.keys().find(|k| !got.contains_key(*k)) {
        return Err(format!(
            "{missing}: no such point in points.toml, or its function is not modelled"
        ));
    }
    Ok(got)
}

/// Rules 3-5: the kernel's derived tests, written under `cache`, or why none could be.
pub fn derive(cache: &Path, m: &Manifest, req: &Request) -> Result<Derived, String> {
    let line = m
        .line(req.line)
        .ok_or_else(|| format!("no line {}", req.line))?;
    let dir = m.path(line.patch_dir.as_deref().unwrap_or(Path::new("")));
    let points = points_in(&dir.join("litmus"))?;
    let tmpls = templates(m, req.line, &dir);
    let tried: Vec<&Template> = tmpls
        .iter()
        .filter(|t| {
            t.tests.iter().any(|(_, text, _)| {
                parse_header(text).is_ok_and(|h| h.models.iter().any(|f| req.changed.contains(f)))
            })
        })
        .collect();
    if tried.is_empty() {
        return Err(
            "no litmus test of the line marks an ordering point in the changed functions".into(),
        );
    }
    let mut files: BTreeSet<String> = points.iter().map(|p| p.file.clone()).collect();
    let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    for p in &req.code {
        files.extend(csrc::files_of(&read(p)));
    }
    for t in &tried {
        for p in &t.comp.patches {
            files.extend(csrc::files_of(&read(&dir.join(p))));
        }
    }
    let files: Vec<String> = files.into_iter().collect();
    let root =
        gt_images::lkmm::source_files(cache, m, req.source, &files).map_err(|e| e.to_string())?;
    let work = cache
        .join("ordering")
        .join(format!(".derive-{}", std::process::id()));
    let kernel = patched(&root, &files, &req.code, &work)?;
    let mut why = Vec::new();
    for t in tried {
        let tp: Vec<PathBuf> = t.comp.patches.iter().map(|p| dir.join(p)).collect();
        let got =
            patched(&root, &files, &tp, &work).and_then(|tc| against(t, &points, &kernel, &tc));
        match got {
            Ok(prims) => return write(cache, req, t, prims),
            Err(e) => why.push(format!("from {}'s tests: {e}", t.comp.name)),
        }
    }
    Err(why.join("; "))
}

fn write(
    cache: &Path,
    req: &Request,
    t: &Template,
    prims: BTreeMap<String, Primitive>,
) -> Result<Derived, String> {
    let out = cache.join("ordering/derived").join(
        req.kernel
            .replace(|c: char| !(c.is_alphanumeric() || "+-_.".contains(c)), "_"),
    );
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut tests = Vec::new();
    for (file, text, _) in &t.tests {
        let stem = file
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into_owned());
        let dest = out.join(format!("{stem}.derived.litmus"));
        let body = rewrite(text, &prims);
        std::fs::write(&dest, &body).map_err(|e| format!("{}: {e}", dest.display()))?;
        let header = parse_header(&body).map_err(|e| format!("{}: {e}", dest.display()))?;
        tests.push(Test {
            component: req.parts.join("+"),
            file: dest,
            header,
        });
    }
    Ok(Derived {
        template: t.comp.name.clone(),
        tests,
        read: prims.iter().map(|(k, v)| format!("{k}: {v}")).collect(),
    })
}

#[cfg(test)]
mod tests;
