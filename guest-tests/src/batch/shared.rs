//! Is a path visible to the nodes that will run the tasks?
//!
//! 1. When every node of the partition is this host (its name, host name or address is this
//!    machine's host name, `localhost` or a loopback address), every path is visible.
//! 2. Otherwise a path must lie on a network or cluster filesystem (NFS, SMB, Lustre, GPFS,
//!    BeeGFS, CephFS, GlusterFS/FUSE, AFS, OCFS2, GFS2, 9p, virtiofs): a local filesystem
//!    (ext4, xfs, btrfs, tmpfs, ...) is another disk on every node.
//! 3. The check reads only `statfs(2)` of the path (or of its nearest existing ancestor): it
//!    creates nothing.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::slurm::SlurmNode;

/// Filesystems that several machines mount (statfs `f_type` magic numbers, linux/magic.h and
/// the filesystems' own headers).
const SHARED_FS: &[(i64, &str)] = &[
    (0x6969, "nfs"),
    (0x517B, "smb"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    (0x0BD0_0BD0, "lustre"),
    (0x4750_4653, "gpfs"),
    (0x1983_0326, "beegfs"),
    (0x00C3_6400, "ceph"),
    (0x6573_5546, "fuse"),
    (0x5346_414F, "afs"),
    (0x7461_636F, "ocfs2"),
    (0x0116_1970, "gfs2"),
    (0x0102_1997, "9p"),
    (0x6A65_6A63, "virtiofs"),
];

/// A few local filesystems by name, for the message.
const LOCAL_FS: &[(i64, &str)] = &[
    (0xEF53, "ext2/3/4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0x0102_1994, "tmpfs"),
    (0x794C_7630, "overlayfs"),
    (0x2FC1_2FC1, "zfs"),
];

/// The filesystem type of `path` (or of its nearest existing ancestor).
pub fn fs_type(path: &Path) -> Option<i64> {
    let mut p = Some(path);
    while let Some(cur) = p {
        if cur.exists() {
            let c = CString::new(cur.as_os_str().as_bytes()).ok()?;
            let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
            // SAFETY: `c` is a NUL-terminated path that outlives the call and `st` points to
            // writable memory the size of a `statfs`; the kernel fills it or returns -1.
            let rc = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
            if rc != 0 {
                return None;
            }
            // SAFETY: statfs returned 0, so it initialised the whole struct.
            let st = unsafe { st.assume_init() };
            #[allow(clippy::unnecessary_cast)]
            return Some(st.f_type as i64);
        }
        p = cur.parent();
    }
    None
}

fn fs_name(t: i64) -> String {
    SHARED_FS
        .iter()
        .chain(LOCAL_FS)
        .find(|(m, _)| *m == t)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("filesystem type {t:#x}"))
}

/// True when `node` is this machine.
pub fn is_this_host(node: &SlurmNode, hostname: &str) -> bool {
    let short = hostname.split('.').next().unwrap_or(hostname);
    [&node.name, &node.hostname, &node.addr].iter().any(|n| {
        let n = n.as_str();
        n == hostname
            || n.split('.').next() == Some(short)
            || n == "localhost"
            || n.starts_with("127.")
            || n == "::1"
    })
}

/// Checks rule 1 and 2 for each `(what, path, fs type)`; the error names the first path that
/// the nodes cannot see.
pub fn check(
    nodes: &[SlurmNode],
    hostname: &str,
    paths: &[(String, &Path, Option<i64>)],
) -> Result<(), String> {
    if nodes.iter().all(|n| is_this_host(n, hostname)) {
        return Ok(());
    }
    let remote: Vec<&str> = nodes
        .iter()
        .filter(|n| !is_this_host(n, hostname))
        .map(|n| n.name.as_str())
        .collect();
    for (what, path, t) in paths {
        let shared = t.is_some_and(|t| SHARED_FS.iter().any(|(m, _)| *m == t));
        if !shared {
            return Err(format!(
                "{what} {} is on {}, local to this host, but the partition's nodes {} are other \
                 machines: put it on a path they all mount (NFS, Lustre, ...)",
                path.display(),
                t.map_or("an unreadable filesystem".into(), fs_name),
                remote.join(",")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, host: &str) -> SlurmNode {
        SlurmNode {
            name: name.into(),
            hostname: host.into(),
            addr: host.into(),
            partition: "p".into(),
            state: "idle".into(),
        }
    }

    #[test]
    fn this_host_sees_everything() {
        let p = Path::new("/tmp/x");
        let paths = [("--out".to_string(), p, Some(0x0102_1994))];
        assert!(check(&[node("vm", "vm")], "vm", &paths).is_ok());
        assert!(check(&[node("n0", "localhost")], "box.lab", &paths).is_ok());
        assert!(check(&[node("vm", "vm.lab.example")], "vm", &paths).is_ok());
    }

    #[test]
    fn other_nodes_need_a_shared_filesystem() {
        let p = Path::new("/scratch/cache");
        let nodes = [node("vm", "vm"), node("n1", "n1"), node("n2", "n2")];
        let err = check(&nodes, "vm", &[("VB_CACHE".into(), p, Some(0xEF53))]).unwrap_err();
        assert!(
            err.contains("VB_CACHE /scratch/cache is on ext2/3/4"),
            "{err}"
        );
        assert!(err.contains("n1,n2") && !err.contains("vm,"), "{err}");
        assert!(!err.contains('\n'));
        assert!(check(&nodes, "vm", &[("VB_CACHE".into(), p, Some(0x6969))]).is_ok());
        let err = check(&nodes, "vm", &[("--out".into(), p, None)]).unwrap_err();
        assert!(err.contains("unreadable"), "{err}");
    }

    #[test]
    fn fs_type_reads_an_existing_ancestor() {
        let d = tempfile::tempdir().unwrap();
        let t = fs_type(d.path()).unwrap();
        assert_eq!(fs_type(&d.path().join("not/yet/made")), Some(t));
        assert!(!d.path().join("not").exists(), "nothing created");
        assert!(fs_type(Path::new("/proc")).is_some());
    }
}
