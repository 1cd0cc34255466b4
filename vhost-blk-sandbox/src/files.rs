//! Landlock: after start-up the backend can open, create and remove only what its
//! configuration names (the parent's rule 1).
//!
//! Rules:
//! 1. Every file-system right Landlock knows (ABI 5: read, write, execute, make and remove
//!    entries, truncate, device ioctls) is handled, so denied unless a rule grants it; TCP
//!    bind and connect (ABI 4) are handled and granted nowhere; signals and abstract Unix
//!    sockets (ABI 6) are scoped to the backend's own domain.
//! 2. The image, the write log and the listening socket are open before this runs: an open
//!    descriptor keeps working, so they need no rule.
//! 3. Granted: the socket's folder may lose an entry (the socket, removed on the way out);
//!    the statistics file's folder may gain, be written through and lose a regular file (the
//!    temporary that is renamed over it); `/proc/self/fdinfo` may be read (each connection
//!    tells vhost-user-backend's leaked exit eventfds apart there, device::exit_events).
//! 4. Best effort: on a kernel with an older ABI, what it knows is enforced; without Landlock
//!    nothing is, and the start-up log says so. No new privileges in every case.

use std::path::PathBuf;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use super::SandboxError;

/// The folders the running backend still needs (rule 3).
#[derive(Debug, Clone, Default)]
pub struct Paths {
    /// The listening socket's folder.
    pub socket_dir: PathBuf,
    /// The statistics file's folder, if `--stats-file` is given.
    pub stats_dir: Option<PathBuf>,
}

/// The file-system ABI this code was written for (rule 1).
const FS_ABI: ABI = ABI::V5;

/// Restricts this thread and every thread it starts later; returns the log's words.
pub(super) fn restrict(paths: &Paths) -> Result<String, SandboxError> {
    let stats_rights: BitFlags<AccessFs> =
        AccessFs::MakeReg | AccessFs::RemoveFile | AccessFs::WriteFile | AccessFs::Truncate;
    let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> =
        vec![(paths.socket_dir.clone(), AccessFs::RemoveFile.into())];
    if let Some(d) = &paths.stats_dir {
        grants.push((d.clone(), stats_rights));
    }
    grants.push((
        "/proc/self/fdinfo".into(),
        AccessFs::ReadFile | AccessFs::ReadDir,
    ));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))?
        .handle_access(AccessNet::from_all(ABI::V4))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?;
    for (dir, rights) in grants {
        // A folder that cannot be opened gets no rule: its access is then denied.
        match PathFd::new(&dir) {
            Ok(fd) => ruleset = ruleset.add_rule(PathBeneath::new(fd, rights))?,
            Err(e) => tracing::warn!("sandbox: no Landlock rule for {}: {e}", dir.display()),
        }
    }
    let status = ruleset.restrict_self()?;
    Ok(describe(
        &status.ruleset,
        &status.landlock,
        status.no_new_privs,
    ))
}

fn describe(ruleset: &RulesetStatus, landlock: &LandlockStatus, nnp: bool) -> String {
    let abi = match landlock {
        LandlockStatus::Available { effective_abi, .. } => format!("ABI {}", *effective_abi as i32),
        LandlockStatus::NotEnabled => "not enabled on this kernel".into(),
        LandlockStatus::NotImplemented => "not built into this kernel".into(),
    };
    let state = match ruleset {
        RulesetStatus::FullyEnforced => "files confined",
        RulesetStatus::PartiallyEnforced => "files partly confined (older ABI)",
        RulesetStatus::NotEnforced => "files NOT confined",
    };
    format!("Landlock {abi}: {state}; no_new_privs={nnp}")
}
