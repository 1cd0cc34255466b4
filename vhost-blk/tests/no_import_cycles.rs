//! Fails when an import cycle between "rooms" comes back.
//!
//! A room is a top-level module (`src/x.rs`, `src/x/mod.rs`, with everything below it) or a
//! first-level submodule of a folder module (`src/x/y.rs`, `src/x/y/...`). Edges come from
//! `crate::...` and `super::...` paths in the source (comments stripped; `use crate::{a, b::c}`
//! groups expanded). A reference from `a/...` to `b/...` is an edge between the top-level rooms
//! `a -> b`; one between two first-level submodules of the same folder is an edge `a::x -> a::y`
//! (a submodule using its folder's root, or the root its submodules, is no edge). Test-only
//! code (`#[cfg(test)]` items and the files of `#[cfg(test)] mod x;`) is skipped: it does not
//! shape the architecture. Crate roots (`lib.rs`, `main.rs`) and `src/bin/` are not rooms.
//!
//! vhost-blk's rooms may have no cycle, and no top-level room may import a room that
//! ARCHITECTURE.md's room list puts at or after its own place (the list's order is the layering,
//! bottom up: `rooms/mod.rs`). The harness is a workspace of crates: Cargo holds its layering.

mod rooms;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The source tree as module paths: `["a", "b"]` for `src/a/b.rs` and `src/a/b/mod.rs`.
struct Tree {
    /// Module path -> source text.
    files: BTreeMap<Vec<String>, String>,
}

impl Tree {
    fn from_dir(src: &Path) -> Tree {
        let mut files = BTreeMap::new();
        walk(src, src, &mut files);
        Tree { files }
    }

    fn from_memory(files: &[(&str, &str)]) -> Tree {
        Tree {
            files: files
                .iter()
                .map(|(p, t)| (p.split("::").map(String::from).collect(), t.to_string()))
                .collect(),
        }
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.files.keys().any(|k| k.starts_with(path))
    }

    fn is_folder(&self, top: &str) -> bool {
        self.files.keys().any(|k| k.len() > 1 && k[0] == top)
    }

    /// The room a module path belongs to (None when it names no module of this crate).
    fn room(&self, path: &[String]) -> Option<String> {
        let top = path.first()?;
        if !self.is_module(&path[..1]) {
            return None;
        }
        if path.len() >= 2 && self.is_folder(top) && self.is_module(&path[..2]) {
            return Some(format!("{top}::{}", path[1]));
        }
        Some(top.clone())
    }

    fn graph(&self) -> Graph {
        // Files declared by `#[cfg(test)] mod x;` (and everything below them) are skipped.
        let mut test_only: Vec<Vec<String>> = Vec::new();
        for (module, text) in &self.files {
            for name in test_modules(text) {
                test_only.push(module.iter().cloned().chain([name]).collect());
            }
        }
        let mut g = Graph::new();
        for (module, text) in &self.files {
            if test_only.iter().any(|t| module.starts_with(t)) {
                continue;
            }
            let Some(from) = self.room(module) else {
                continue;
            };
            g.entry(from.clone()).or_default();
            for target in references(module, &strip_test_items(text)) {
                let Some(to) = self.room(&target) else {
                    continue;
                };
                if let Some((a, b)) = edge(&from, &to) {
                    g.entry(a).or_default().insert(b);
                }
            }
        }
        g
    }
}

/// The edge a reference between two rooms makes, if any (see the module docs).
fn edge(from: &str, to: &str) -> Option<(String, String)> {
    let top = |r: &str| r.split("::").next().unwrap_or("").to_string();
    if top(from) != top(to) {
        Some((top(from), top(to)))
    } else if from != to && from.contains("::") && to.contains("::") {
        Some((from.to_string(), to.to_string()))
    } else {
        None
    }
}

/// Names of `#[cfg(test)] mod x;` declarations.
fn test_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(l) = lines.next() {
        if l != "#[cfg(test)]" {
            continue;
        }
        if let Some(next) = lines.next() {
            let decl = next.strip_prefix("pub(crate) ").unwrap_or(next);
            let decl = decl.strip_prefix("pub ").unwrap_or(decl);
            if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                out.push(name.trim().to_string());
            }
        }
    }
    out
}

/// `text` without the items that follow a `#[cfg(test)]` line (up to their `;` or the brace
/// that closes them; braces in string and char literals are not special-cased, which is fine
/// for the code this scans).
fn strip_test_items(text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    let mut depth = 0usize;
    let mut opened = false;
    for line in text.lines() {
        if !skipping {
            if line.trim() == "#[cfg(test)]" {
                skipping = true;
                depth = 0;
                opened = false;
            } else {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        let code = line.split("//").next().unwrap_or("");
        for c in code.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if (opened && depth == 0) || (!opened && code.trim_end().ends_with(';')) {
            skipping = false;
        }
        out.push('\n');
    }
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<String>, String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let rel = p.strip_prefix(root).unwrap();
        if rel == Path::new("bin") {
            continue;
        }
        if p.is_dir() {
            walk(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let mut segs: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if segs.last().is_some_and(|s| s == "mod") {
                segs.pop();
            }
            if segs == ["lib"] || segs == ["main"] {
                continue;
            }
            out.insert(segs, std::fs::read_to_string(&p).unwrap());
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands the path text after `crate::` / `super::` into item paths: `a::b`, `{a, b::c}`.
fn expand(rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(inner) = rest.strip_prefix('{') {
        // Split the group at top-level commas.
        let mut items = Vec::new();
        let (mut depth, mut cur) = (0usize, String::new());
        for c in inner.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(std::mem::take(&mut cur));
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        items.push(cur);
        return items
            .iter()
            .flat_map(|i| expand(i))
            .filter(|p| !p.is_empty())
            .collect();
    }
    let mut path = Vec::new();
    let mut s = rest;
    loop {
        let ident: String = s.chars().take_while(|c| is_ident(*c)).collect();
        if ident.is_empty() || ident == "self" {
            break;
        }
        s = &s[ident.len()..];
        path.push(ident);
        match s.strip_prefix("::") {
            Some(r) if r.starts_with('{') => {
                // `a::{b, c}`: the group's first segments extend `a`.
                let subs = expand(r);
                if subs.is_empty() {
                    return vec![path];
                }
                return subs
                    .into_iter()
                    .map(|sub| path.iter().cloned().chain(sub).collect())
                    .collect();
            }
            Some(r) => s = r,
            None => break,
        }
    }
    vec![path]
}

/// Absolute module paths referenced by `text`, the source of module `module`.
fn references(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut here: Vec<String> = module.to_vec();
    // Join lines so `use crate::{\n a,\n b };` is one piece; comments stripped first.
    let mut code = String::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        code.push_str(line);
        code.push('\n');
    }
    let mut i = 0;
    let bytes = code.as_bytes();
    while i < code.len() {
        let rest = &code[i..];
        // An inline module: what follows is one level deeper.
        if rest.starts_with("mod ") && (i == 0 || !is_ident(bytes[i - 1] as char)) {
            let after = &rest[4..];
            let name: String = after.chars().take_while(|c| is_ident(*c)).collect();
            if !name.is_empty() && after[name.len()..].trim_start().starts_with('{') {
                here.push(name);
            }
        }
        let boundary = i == 0 || !(is_ident(bytes[i - 1] as char) || bytes[i - 1] == b'$');
        if boundary && rest.starts_with("crate::") {
            out.extend(expand(&rest["crate::".len()..]));
        } else if boundary && rest.starts_with("super::") {
            let mut base = here.clone();
            let mut r = rest;
            while let Some(x) = r.strip_prefix("super::") {
                base.pop();
                r = x;
            }
            for p in expand(r) {
                out.push(base.iter().cloned().chain(p).collect());
            }
            i += rest.len() - r.len();
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// Strongly connected components with more than one room, each sorted.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    // Tarjan's algorithm.
    struct S<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut S<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// One concrete cycle through a component, `a -> b -> a`, for the failure message.
fn describe(g: &Graph, comp: &[String]) -> String {
    let inside: BTreeSet<&str> = comp.iter().map(String::as_str).collect();
    let start = comp[0].as_str();
    // Breadth-first search back to `start` within the component.
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in g.get(v).into_iter().flatten().map(String::as_str) {
            if !inside.contains(w) {
                continue;
            }
            if w == start {
                let mut path = vec![start, v];
                let mut x = v;
                while let Some(p) = prev.get(x) {
                    path.push(p);
                    x = p;
                }
                path.reverse();
                return path.join(" -> ");
            }
            if !prev.contains_key(w) && w != start {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    comp.join(" <-> ")
}

/// The cycles of `g` not in `allowed`, described.
fn unexpected(g: &Graph, allowed: &[&[&str]]) -> Vec<String> {
    cycles(g)
        .into_iter()
        .filter(|c| {
            !allowed.iter().any(|a| {
                let mut a: Vec<&str> = a.to_vec();
                a.sort();
                a == c.iter().map(String::as_str).collect::<Vec<_>>()
            })
        })
        .map(|c| describe(g, &c))
        .collect()
}

fn crate_src(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn vhost_blk_has_no_import_cycle() {
    let g = Tree::from_dir(&crate_src("src")).graph();
    assert!(g.len() > 5, "too few rooms found: {g:?}");
    let bad = unexpected(&g, &[]);
    assert!(bad.is_empty(), "vhost-blk import cycles: {bad:?}");
}

#[test]
fn detector_catches_a_synthetic_cycle() {
    let t = Tree::from_memory(&[
        ("a", "use crate::b::Thing;\n"),
        ("b", "pub fn f() { crate::c::g() }\n"),
        ("c", "use crate::{a, d::E};\n"),
        ("d", "// use crate::a; is only a comment\n"),
    ]);
    let g = t.graph();
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
    assert_eq!(g["c"], BTreeSet::from(["a".to_string(), "d".to_string()]));
    let bad = unexpected(&g, &[]);
    assert_eq!(bad, ["a -> b -> c -> a"]);
    assert!(unexpected(&g, &[&["c", "a", "b"]]).is_empty());
}

#[test]
fn detector_resolves_super_and_folder_submodules() {
    let t = Tree::from_memory(&[
        ("x", "pub mod p; pub mod q;\n#[cfg(test)]\nmod t;\n"),
        (
            "x::p",
            "use super::q::Q;\nmod inner {\n use super::super::X;\n}\n",
        ),
        ("x::q", "use super::{p, Z};\n"),
        ("x::t", "use crate::y::Y;\n"),
        (
            "y",
            "use crate::x::p::P;\n#[cfg(test)]\nmod tests {\n use crate::z::Z;\n}\nuse crate::w;\n",
        ),
        ("z", "use crate::y;\n"),
        ("w", ""),
    ]);
    let g = t.graph();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // Siblings are rooms; a submodule using its folder root is no edge.
    assert_eq!(g["x::p"], set(&["x::q"]));
    assert_eq!(g["x::q"], set(&["x::p"]));
    // Across folders the top-level rooms are joined; test-only code is skipped.
    assert_eq!(g["y"], set(&["x", "w"]));
    assert!(g.get("x").is_none_or(|e| e.is_empty()), "{g:?}");
    assert_eq!(unexpected(&g, &[]), ["x::p -> x::q -> x::p"]);
}

/// The imports of `crate_dir`'s top-level rooms that do not go down ARCHITECTURE.md's list.
fn upward_imports(crate_dir: &str) -> Vec<String> {
    let layers = rooms::layers(&rooms::entries(&rooms::architecture(), crate_dir));
    assert!(
        layers.len() > 3,
        "{crate_dir}: too few rooms in ARCHITECTURE.md: {layers:?}"
    );
    let layer = |room: &str| {
        let top = room.split("::").next().unwrap_or(room);
        layers
            .iter()
            .position(|l| l == top)
            .unwrap_or_else(|| panic!("room {top} of {crate_dir} is not in ARCHITECTURE.md"))
    };
    let src = rooms::repo().join(crate_dir).join("src");
    let mut upward = Vec::new();
    for (from, to) in Tree::from_dir(&src).graph() {
        for t in to {
            if !from.contains("::") && layer(&t) >= layer(&from) {
                upward.push(format!("{from} -> {t}"));
            }
        }
    }
    upward
}

#[test]
fn vhost_blk_rooms_import_only_downwards() {
    let upward = upward_imports("vhost-blk");
    assert!(upward.is_empty(), "imports that do not go down: {upward:?}");
}
