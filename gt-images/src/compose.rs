//! Kernel names: `LINE(+COMPONENT)*`, resolved against the manifest into a [`KernelBuild`].
//!
//! ```text
//! NAME      := HEAD(+COMPONENT)*
//! HEAD      := LINE | ALIAS            an alias stands for LINE(+COMPONENT)* (e.g. rt64 = rt+cpus64)
//! COMPONENT := an overlay (cpus64), a patch set (seed000, storm, ...) or command-line words
//! ```
//!
//! Examples: `rt`, `rt+seed000`, `rt73+seed000-v8+storm`, `rt64+noguard+seed003` (=
//! `rt+cpus64+noguard+seed003`), `debian-rt+mitigations-off`.
//!
//! Rules:
//! 1. Components apply in the order written: overlays are merged after the line's fragment in
//!    that order, patch sets are stacked in that order, command-line words are appended. The
//!    cache key lists overlays before patches, so an overlay's place among patch sets does not
//!    change the kernel.
//! 2. A patch set's files come from the line's `patch_dir`: one set of files per line, so the
//!    same component means the same change ported to each line.
//! 3. Errors, before anything is built: an unknown line, alias or component; a component
//!    written twice; a patch file that two components would both apply; an overlay or patch
//!    set on a prebuilt line; a patch set the line does not have (with the manifest's reason).
//! 4. A name means one kernel: the same inputs as the per-combination entries it replaces
//!    (source, fragment, overlays and patches by file name and content), so cached builds and
//!    recorded results keep their keys.

use std::collections::BTreeSet;

use super::manifest::{Component, KernelBuild, Line, Manifest};
use super::ImageError;

/// Where a component can be used: `Ok` on a line, `Err(reason)` where it cannot.
pub type Availability<'a> = Vec<(&'a str, Result<(), String>)>;

impl Manifest {
    /// Resolves a kernel name (module doc) into the variant it builds.
    pub fn variant(&self, name: &str) -> Result<KernelBuild, ImageError> {
        let (line, comps) = self.parts(name)?;
        let mut v = KernelBuild {
            name: name.to_string(),
            source: line.source.clone(),
            description: line.description.clone(),
            fragment: line.fragment.clone(),
            renames: line.renames.clone(),
            overlays: Vec::new(),
            patches: Vec::new(),
            modules: line.modules.clone(),
            cmdline: line.cmdline.clone(),
            boot_trace_events: line.boot_trace_events,
        };
        for comp in comps {
            self.add(&mut v, line, comp)
                .map_err(|why| ImageError::UnknownVariant {
                    name: name.to_string(),
                    why,
                })?;
            v.description
                .push_str(&format!("; + {}: {}", comp.name, comp.description));
        }
        Ok(v)
    }

    /// A kernel name's line and components, in the order written (an alias expanded): the
    /// names checked (rule 3's unknown or repeated parts), not yet whether they combine.
    pub fn parts(&self, name: &str) -> Result<(&Line, Vec<&Component>), ImageError> {
        let err = |why: String| ImageError::UnknownVariant {
            name: name.to_string(),
            why,
        };
        let mut parts = name.split('+');
        let head = parts.next().unwrap_or_default();
        let mut comps: Vec<&str> = Vec::new();
        let line_name = match self.aliases.get(head) {
            Some(target) => {
                let mut t = target.split('+');
                let first = t.next().unwrap_or_default();
                comps.extend(t);
                first
            }
            None => head,
        };
        comps.extend(parts);
        let line = self.line(line_name).ok_or_else(|| {
            err(format!(
                "'{line_name}' is not a kernel line (lines: {}; aliases: {})",
                self.lines
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.aliases
                    .iter()
                    .map(|(a, t)| format!("{a} = {t}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for c in comps {
            if c.is_empty() {
                return Err(err("an empty component (one '+' too many)".into()));
            }
            let comp = self.component(c).ok_or_else(|| {
                err(format!(
                    "unknown component '{c}' (components: {})",
                    self.components
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            if !seen.insert(c) {
                return Err(err(format!("component '{c}' is written twice")));
            }
            out.push(comp);
        }
        Ok((line, out))
    }

    /// Adds one component to `v` (rules 1-3).
    fn add(&self, v: &mut KernelBuild, line: &Line, c: &Component) -> Result<(), String> {
        self.available(line, c)?;
        if let Some(words) = &c.cmdline {
            if !v.cmdline.is_empty() {
                v.cmdline.push(' ');
            }
            v.cmdline.push_str(words);
        }
        if let Some(o) = &c.overlay {
            v.overlays.push(o.clone());
        }
        let dir = line.patch_dir.clone().unwrap_or_default();
        for p in &c.patches {
            let path = dir.join(p);
            if v.patches.contains(&path) {
                return Err(format!(
                    "component '{}' would apply {p} a second time (an earlier component has it)",
                    c.name
                ));
            }
            v.patches.push(path);
        }
        Ok(())
    }

    /// Whether `c` exists on `line`, and if not, why (rule 3).
    fn available(&self, line: &Line, c: &Component) -> Result<(), String> {
        let prebuilt = !self.sources[&line.source].is_source();
        if prebuilt && c.cmdline.is_none() {
            return Err(format!(
                "'{}' is a {} and line '{}' is a prebuilt kernel (only command-line components apply to it)",
                c.name,
                if c.overlay.is_some() { "config overlay" } else { "patch set" },
                line.name
            ));
        }
        if let Some(why) = c.absent.get(&line.name) {
            return Err(format!(
                "component '{}' does not exist on line '{}': {why}",
                c.name, line.name
            ));
        }
        if !c.patches.is_empty() && line.patch_dir.is_none() {
            return Err(format!(
                "line '{}' has no patch_dir, so no patch set '{}'",
                line.name, c.name
            ));
        }
        Ok(())
    }

    /// For `images list`: on which lines `c` can be used, and why not on the others.
    pub fn availability<'a>(&'a self, c: &Component) -> Availability<'a> {
        self.lines
            .iter()
            .map(|l| (l.name.as_str(), self.available(l, c)))
            .collect()
    }
}
