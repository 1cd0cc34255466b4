//! The manifest's litmus fields, read by `guest-tests ordering` (the `ordering` room):
//!
//! - `[[line]] litmus = [PATH...]`: the line's own code, as shipped (paths relative to the
//!   manifest); `lkmm = "SOURCE"`: whose `tools/memory-model` judges the line (default: the
//!   line's own source when it is built from source; a prebuilt line names the source package of
//!   the same kernel).
//! - `[[component]] litmus = [FILE...]`: the code a patch set leaves, file names in each line's
//!   `patch_dir` (like `patches`, so each line has its own port); `litmus_supersedes = ["base" |
//!   COMPONENT...]`: whose tests these replace in a kernel that has both; `litmus_exempt =
//!   "why"`: a patch set that changes no ordering the tests are about.
//!
//! Rules checked here (the manifest does not load otherwise): every litmus file exists (on
//! every line a component exists on) and ends in `.litmus`; `lkmm` names a source built from
//! source; a line with tests has a model; only patch sets carry tests or an exemption, never
//! both; a component supersedes only when it carries tests itself, and only `base` or a known
//! component; no component is called `base`.

use std::path::Path;

use super::{Component, Line, Manifest, Source};

/// The name `litmus_supersedes` gives a line's own tests.
pub const BASE_TESTS: &str = "base";

fn is_litmus_name(f: &str) -> bool {
    let p = Path::new(f);
    f.ends_with(".litmus")
        && !p.is_absolute()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

impl Manifest {
    /// The source whose LKMM judges `line`: its `lkmm`, else its own source when that is built
    /// from source (None: a prebuilt line without `lkmm`).
    pub fn lkmm_source(&self, line: &Line) -> Option<(&str, &Source)> {
        let name = line.lkmm.as_deref().unwrap_or(&line.source);
        let (name, src) = self.sources.get_key_value(name)?;
        src.is_source().then_some((name.as_str(), src))
    }

    pub(super) fn validate_litmus(&self) -> Result<(), String> {
        for l in &self.lines {
            self.validate_line_litmus(l)?;
        }
        for c in &self.components {
            self.validate_component_litmus(c)?;
        }
        Ok(())
    }

    fn validate_line_litmus(&self, l: &Line) -> Result<(), String> {
        if let Some(s) = &l.lkmm {
            if !self.sources.get(s).is_some_and(Source::is_source) {
                return Err(format!(
                    "line '{}': lkmm '{s}' must name a source built from source (its tools/memory-model)",
                    l.name
                ));
            }
        }
        if !l.litmus.is_empty() && self.lkmm_source(l).is_none() {
            return Err(format!(
                "line '{}': litmus tests need a model: set lkmm to the source package of the same kernel",
                l.name
            ));
        }
        for f in &l.litmus {
            let path = self.dir.join(f);
            if !f.to_string_lossy().ends_with(".litmus") || !path.is_file() {
                return Err(format!(
                    "line '{}': litmus file {} not found (a .litmus file relative to the manifest)",
                    l.name,
                    path.display()
                ));
            }
        }
        Ok(())
    }

    fn validate_component_litmus(&self, c: &Component) -> Result<(), String> {
        let who = format!("component '{}'", c.name);
        if c.name == BASE_TESTS {
            return Err(format!(
                "{who}: '{BASE_TESTS}' names a line's own litmus tests; pick another name"
            ));
        }
        let tests = !c.litmus.is_empty();
        if (tests || c.litmus_exempt.is_some()) && c.patches.is_empty() {
            return Err(format!(
                "{who}: only patch sets carry litmus tests or litmus_exempt"
            ));
        }
        if tests && c.litmus_exempt.is_some() {
            return Err(format!("{who}: give litmus or litmus_exempt, not both"));
        }
        if c.litmus_exempt
            .as_ref()
            .is_some_and(|w| w.trim().is_empty())
        {
            return Err(format!("{who}: litmus_exempt must say why"));
        }
        if !c.litmus_supersedes.is_empty() && !tests {
            return Err(format!(
                "{who}: litmus_supersedes needs litmus tests of its own"
            ));
        }
        for s in &c.litmus_supersedes {
            if s != BASE_TESTS && (self.component(s).is_none() || *s == c.name) {
                return Err(format!(
                    "{who}: litmus_supersedes names '{s}', neither '{BASE_TESTS}' nor another component"
                ));
            }
        }
        if let Some(bad) = c.litmus.iter().find(|f| !is_litmus_name(f)) {
            return Err(format!(
                "{who}: litmus '{bad}' must be a .litmus file name relative to each line's patch_dir"
            ));
        }
        for l in &self.lines {
            let Some(dir) = &l.patch_dir else { continue };
            if c.absent.contains_key(&l.name) {
                continue;
            }
            if let Some(f) = c
                .litmus
                .iter()
                .map(|f| self.dir.join(dir).join(f))
                .find(|p| !p.is_file())
            {
                return Err(format!(
                    "{who} on line '{}': litmus file {} not found",
                    l.name,
                    f.display()
                ));
            }
        }
        Ok(())
    }
}
