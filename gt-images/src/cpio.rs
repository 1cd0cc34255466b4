//! A reproducible `newc` cpio writer: entries sorted by path, fixed owner, mode from the entry,
//! one fixed mtime. Two archives of the same entries are byte-identical.

use std::collections::BTreeMap;

/// What an archive entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File(Vec<u8>),
    Symlink(String),
    /// A character device node (major, minor), e.g. /dev/console.
    CharDev(u32, u32),
}

/// One archive member. `path` is relative, without a leading `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub mode: u32,
    pub kind: EntryKind,
}

/// Builds an archive. Parent directories are added automatically; duplicate paths: last wins.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
    mtime: u32,
}

impl Archive {
    /// An empty archive whose members all carry `mtime` (seconds since the epoch).
    pub fn new(mtime: u32) -> Self {
        Self {
            entries: BTreeMap::new(),
            mtime,
        }
    }

    fn add_parents(&mut self, path: &str) {
        let mut acc = String::new();
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        for p in &parts[..parts.len().saturating_sub(1)] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(p);
            self.entries.entry(acc.clone()).or_insert(Entry {
                path: acc.clone(),
                mode: 0o755,
                kind: EntryKind::Dir,
            });
        }
    }

    /// Adds (or replaces) an entry.
    pub fn add(&mut self, path: &str, mode: u32, kind: EntryKind) {
        let path = path
            .trim_start_matches('/')
            .trim_end_matches('/')
            .to_string();
        self.add_parents(&path);
        self.entries
            .insert(path.clone(), Entry { path, mode, kind });
    }

    pub fn add_file(&mut self, path: &str, mode: u32, data: Vec<u8>) {
        self.add(path, mode, EntryKind::File(data));
    }

    pub fn add_dir(&mut self, path: &str) {
        self.add(path, 0o755, EntryKind::Dir);
    }

    pub fn add_symlink(&mut self, path: &str, target: &str) {
        self.add(path, 0o777, EntryKind::Symlink(target.to_string()));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Serialises the archive (sorted by path) with the `TRAILER!!!` record.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (ino, e) in self.entries.values().enumerate() {
            let (type_bits, data, rdev): (u32, &[u8], (u32, u32)) = match &e.kind {
                EntryKind::Dir => (0o040000, &[], (0, 0)),
                EntryKind::File(d) => (0o100000, d, (0, 0)),
                EntryKind::Symlink(t) => (0o120000, t.as_bytes(), (0, 0)),
                EntryKind::CharDev(ma, mi) => (0o020000, &[], (*ma, *mi)),
            };
            let nlink = if matches!(e.kind, EntryKind::Dir) {
                2
            } else {
                1
            };
            write_record(
                &mut out,
                ino as u32 + 1,
                type_bits | (e.mode & 0o7777),
                nlink,
                self.mtime,
                rdev,
                &e.path,
                data,
            );
        }
        write_record(&mut out, 0, 0, 1, 0, (0, 0), "TRAILER!!!", &[]);
        out
    }
}

#[allow(clippy::too_many_arguments)]
fn write_record(
    out: &mut Vec<u8>,
    ino: u32,
    mode: u32,
    nlink: u32,
    mtime: u32,
    rdev: (u32, u32),
    name: &str,
    data: &[u8],
) {
    let fields = [
        ino,
        mode,
        0, // uid
        0, // gid
        nlink,
        mtime,
        data.len() as u32,
        0, // devmajor
        0, // devminor
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0, // check
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_entries_in_any_order_give_identical_bytes() {
        let mut a = Archive::new(1);
        a.add_file("bin/x", 0o755, b"hello".to_vec());
        a.add_symlink("bin/sh", "busybox");
        let mut b = Archive::new(1);
        b.add_symlink("/bin/sh", "busybox");
        b.add_file("bin/x", 0o755, b"hello".to_vec());
        assert_eq!(a.to_bytes(), b.to_bytes());
        assert_eq!(a.len(), 3); // bin, bin/sh, bin/x
    }

    #[test]
    fn records_are_newc_and_aligned() {
        let mut a = Archive::new(0);
        a.add_file("f", 0o644, vec![1, 2, 3]);
        let bytes = a.to_bytes();
        assert!(bytes.starts_with(b"070701"));
        assert_eq!(bytes.len() % 4, 0);
        // filesize field (7th) of the first record is 3
        assert_eq!(&bytes[6 + 6 * 8..6 + 7 * 8], b"00000003");
        let s = String::from_utf8_lossy(&bytes);
        assert!(s.contains("TRAILER!!!"));
    }

    #[test]
    fn cpio_tool_lists_what_we_wrote() {
        let Ok(out) = std::process::Command::new("cpio").arg("--version").output() else {
            return; // the cpio tool is not installed: the byte-level tests above still hold
        };
        assert!(out.status.success());
        let mut a = Archive::new(0);
        a.add_file("etc/job.env", 0o644, b"A=1\n".to_vec());
        a.add("dev/console", 0o600, EntryKind::CharDev(5, 1));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.cpio");
        std::fs::write(&p, a.to_bytes()).unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("cpio -it < {}", p.display()))
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(listing.contains("etc/job.env"), "{listing}");
        assert!(listing.contains("dev/console"), "{listing}");
    }
}
