//! No Rust reference to guest memory anywhere in the backend (ARCHITECTURE.md, "Guest memory"):
//! the sources of vhost-blk and of the crates below it ([`CRATES`]) are scanned for the ways one would be made (a slice from a
//! raw pointer, an `IoSlice` over a buffer, a raw pointer taken out of a `VolatileSlice` or out
//! of guest memory, a `VolatileSlice` made from a raw pointer), and each occurrence must be on
//! the allow list below, with the reason it is not one. Comments are not scanned. An allow-list
//! entry that no longer matches fails too, so that the list stays true.

use std::path::{Path, PathBuf};

/// The identifiers that make (or lead to) a reference to memory behind a raw pointer.
const FORBIDDEN: &[&str] = &[
    "from_raw_parts", // slice::from_raw_parts(_mut): a &[u8] / &mut [u8] from a pointer
    "IoSlice",        // IoSlice / IoSliceMut wrap a &[u8] / &mut [u8]
    "ptr_guard",      // a raw pointer out of a VolatileSlice
    "get_host_address", // a raw pointer out of guest memory
    "VolatileSlice::new",
    "with_bitmap", // VolatileSlice::with_bitmap: a VolatileSlice from a raw pointer
];

/// The backend's crates: vhost-blk and every crate it is built on.
const CRATES: &[&str] = &[
    "vhost-blk",
    "vhost-blk-units",
    "vhost-blk-storage",
    "vhost-blk-completion",
    "vhost-blk-stats",
    "vhost-blk-scsi",
];

/// (file under the repository, identifier, occurrences, why it is no reference to guest memory)
const ALLOWED: &[(&str, &str, usize, &str)] = &[
    (
        "vhost-blk-storage/src/file.rs",
        "ptr_guard",
        1,
        "iovecs(): the pointer goes to preadv/pwritev only; the kernel copies, no reference",
    ),
    (
        "vhost-blk/src/device/chain.rs",
        "ptr_guard",
        1,
        "check_overlap(): the address is compared, never dereferenced",
    ),
    (
        "vhost-blk-storage/src/null.rs",
        "ptr_guard",
        1,
        "zero(): a memset through the raw pointer (ptr::write_bytes), no reference",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Occurrences of each forbidden identifier in `src`, outside `//` comments (a `//` inside a
/// string literal cuts the line short: the scan errs towards finding nothing there).
fn occurrences(src: &str) -> Vec<(&'static str, usize)> {
    let code: Vec<&str> = src
        .lines()
        .map(|l| l.split_once("//").map_or(l, |(code, _)| code))
        .collect();
    FORBIDDEN
        .iter()
        .map(|&f| (f, code.iter().map(|l| l.matches(f).count()).sum()))
        .filter(|&(_, n)| n > 0)
        .collect()
}

#[test]
fn the_scan_finds_what_it_forbids() {
    let bad = "let s = unsafe { std::slice::from_raw_parts_mut(p, n) }; // a comment\n\
               let v = [IoSlice::new(&b)];\n\
               // from_raw_parts in a comment is fine\n\
               let p = vs.ptr_guard_mut().as_ptr();";
    assert_eq!(
        occurrences(bad),
        [("from_raw_parts", 1), ("IoSlice", 1), ("ptr_guard", 1)]
    );
    assert!(occurrences("/// IoSlice in docs\nlet x = 1; // ptr_guard").is_empty());
}

#[test]
fn no_reference_to_guest_memory_in_vhost_blk() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in CRATES {
        rust_files(&root.join(c).join("src"), &mut files);
    }
    assert!(files.len() > 60, "scanned only {} files", files.len());
    let mut found = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let src = std::fs::read_to_string(f).unwrap();
        for (ident, n) in occurrences(&src) {
            found.push((rel.clone(), ident, n));
        }
    }
    let mut problems = Vec::new();
    for (file, ident, n) in &found {
        match ALLOWED.iter().find(|a| a.0 == file && a.1 == *ident) {
            Some(a) if a.2 == *n => {}
            Some(a) => problems.push(format!(
                "{file}: `{ident}` {n} times, the allow list says {} ({})",
                a.2, a.3
            )),
            None => problems.push(format!(
                "{file}: `{ident}` {n} times: guest memory goes through vm-memory's volatile \
                 access (VolatileSlice, Bytes); if this is not guest memory, allow it here with \
                 the reason"
            )),
        }
    }
    for (file, ident, _, why) in ALLOWED {
        if !found.iter().any(|(f, i, _)| f == file && i == ident) {
            problems.push(format!(
                "allow list: {file} has no `{ident}` any more ({why})"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
