//! The plan of a matrix and its record: [`plan`] orders the runs and gives each its directory
//! and seed; [`Index`] is `index.json`, written the same way by every executor.
//!
//! 1. The plan is a pure function of kernels, variants, repeats and the base seed.
//! 2. Directory names are unique within a plan and start with the run's index.
//! 3. All kernels of one repeat share its seed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Design, MatrixError};
use gt_compare::sequential::SequentialRecord;
use gt_launch::qemu::Accel;
use gt_results::results::RunStatus;

/// One planned run of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    pub index: usize,
    pub kernel: String,
    pub variant: Option<String>,
    pub repeat: u32,
    pub seed: u64,
    pub dir: String,
}

fn dir_word(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Orders runs repeat-major, then variant, then kernel: A B A B ... within every sweep point.
/// All kernels of one repeat share its seed, so pairs are comparable.
pub fn plan(
    kernels: &[String],
    variants: &[Option<String>],
    repeat: u32,
    seed: u64,
) -> Vec<Planned> {
    let mut out = Vec::new();
    for r in 0..repeat {
        for v in variants {
            for k in kernels {
                let index = out.len();
                let vpart = v
                    .as_deref()
                    .map(|v| format!("-{}", dir_word(v)))
                    .unwrap_or_default();
                out.push(Planned {
                    index,
                    kernel: k.clone(),
                    variant: v.clone(),
                    repeat: r,
                    seed: seed + u64::from(r),
                    dir: format!("{index:03}-{}{vpart}-r{r}", dir_word(k)),
                });
            }
        }
    }
    out
}

/// One line of `index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    #[serde(flatten)]
    pub planned: Planned,
    #[serde(flatten)]
    pub status: RunStatus,
    pub boot_to_fio_ready_s: Option<f64>,
    pub total_s: f64,
    /// Boots it took (earlier ones kept as `<dir>.attempt<k>`).
    pub attempts: u32,
}

/// `index.json` of a matrix directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Index {
    pub suite: String,
    pub kernels: Vec<String>,
    pub repeat: u32,
    pub accel: Accel,
    pub runs: Vec<IndexEntry>,
    #[serde(default)]
    pub design: Design,
    /// The sequential test's looks, when the matrix ran until decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<SequentialRecord>,
}

impl Index {
    pub fn write(&self, dir: &Path) -> Result<(), MatrixError> {
        let p = dir.join("index.json");
        let text = serde_json::to_string_pretty(self).map_err(|e| MatrixError::Io {
            path: p.clone(),
            msg: e.to_string(),
        })?;
        std::fs::write(&p, text + "\n").map_err(|e| MatrixError::Io {
            path: p,
            msg: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_interleaves_kernels_within_each_repeat() {
        let k = vec!["a".to_string(), "b+x".to_string()];
        let p = plan(&k, &[None], 3, 10);
        let order: Vec<&str> = p.iter().map(|x| x.kernel.as_str()).collect();
        assert_eq!(order, ["a", "b+x", "a", "b+x", "a", "b+x"]);
        assert_eq!(p[2].seed, 11);
        assert_eq!(p[3].seed, 11);
        assert_eq!(p[5].dir, "005-b+x-r2");
        let dirs: std::collections::BTreeSet<_> = p.iter().map(|x| &x.dir).collect();
        assert_eq!(dirs.len(), p.len());
    }

    #[test]
    fn plan_covers_every_variant_for_every_kernel() {
        let k = vec!["a".to_string(), "b".to_string()];
        let v = vec![Some("l0".to_string()), Some("l20".to_string())];
        let p = plan(&k, &v, 2, 0);
        assert_eq!(p.len(), 8);
        assert_eq!(p[1].dir, "001-b-l0-r0");
        assert_eq!(p[2].variant.as_deref(), Some("l20"));
        assert_eq!(p[2].kernel, "a");
    }

    #[test]
    fn index_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let idx = Index {
            suite: "s".into(),
            kernels: vec!["a".into()],
            repeat: 1,
            accel: Accel::Tcg,
            runs: vec![IndexEntry {
                planned: plan(&["a".into()], &[None], 1, 0).remove(0),
                status: RunStatus::Failed {
                    reason: "timeout after 1 s".into(),
                },
                boot_to_fio_ready_s: None,
                total_s: 1.5,
                attempts: 1,
            }],
            design: Design::Paired,
            sequential: None,
        };
        idx.write(d.path()).unwrap();
        let back: Index =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("index.json")).unwrap())
                .unwrap();
        assert_eq!(back, idx);
    }
}
