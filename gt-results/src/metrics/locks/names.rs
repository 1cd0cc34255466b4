//! Locks named by their address, not by the function that took them: the guest agent sends the
//! disk's request_queue address (`## queue`), the kernel's lock offsets (`## offset NAME N`,
//! from gt-images/probe/lock-offsets.c), the kernel image's range (`## kernel _text|_end ADDR`)
//! and, for each contended address inside the image, the nearest data symbol at or below it
//! (`## sym ADDR SYMADDR NAME`).
//!
//! Contract:
//! 1. An address inside `[queue, queue + request_queue.size)` is `request_queue.<field>` when an
//!    offset names it, else `request_queue+0x<off>`; without the size, only named offsets match.
//! 2. An address inside the kernel image with a symbol is `<symbol>` (`<symbol>+0x<off>` when
//!    not at its start): a static lock.
//! 3. Anything else is [`UNNAMED`]: a lock in memory the agent cannot attribute (a slab
//!    object, a per-hctx lock). Its address identifies it within a boot, not across boots.
//! 4. All arithmetic is on u64 with checks; a malformed line is counted as bad, never fatal.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The name of every lock rule 3 leaves without one.
pub const UNNAMED: &str = "(unnamed)";

/// The lock seed 000 is about, named by its address.
pub const QUEUE_LOCK: &str = "request_queue.queue_lock";

/// What the agent sent for naming.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockNaming {
    pub queue: Option<u64>,
    pub offsets: BTreeMap<String, u64>,
    pub text: Option<u64>,
    pub end: Option<u64>,
    /// address -> (symbol address, symbol)
    pub syms: BTreeMap<u64, (u64, String)>,
}

/// `0xffff...` or `ffff...` -> u64.
pub fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

impl LockNaming {
    /// One `## KIND ...` header of the naming lines (`kind` without `## `); false when it is
    /// not one of them or is malformed.
    pub fn header(&mut self, kind: &str, mut w: std::str::SplitWhitespace) -> Option<bool> {
        match kind {
            "queue" => {
                self.queue = w.next().and_then(hex);
            }
            "offset" => {
                let (n, v) = (w.next()?, w.next()?.parse().ok()?);
                self.offsets.insert(n.to_string(), v);
            }
            "kernel" => {
                let (n, a) = (w.next()?, hex(w.next()?)?);
                match n {
                    "_text" => self.text = Some(a),
                    "_end" => self.end = Some(a),
                    _ => return Some(false),
                }
            }
            "sym" => {
                let (a, s, name) = (hex(w.next()?)?, hex(w.next()?)?, w.next()?);
                self.syms.insert(a, (s, name.to_string()));
            }
            _ => return None,
        }
        Some(true)
    }

    /// Rules 1-3.
    pub fn name(&self, addr: u64) -> String {
        if let Some(n) = self.in_queue(addr) {
            return n;
        }
        let in_image =
            matches!((self.text, self.end), (Some(t), Some(e)) if (t..e).contains(&addr));
        match self.syms.get(&addr) {
            Some((s, name)) if in_image && *s <= addr => match addr - s {
                0 => name.clone(),
                off => format!("{name}+{off:#x}"),
            },
            _ => UNNAMED.to_string(),
        }
    }

    fn in_queue(&self, addr: u64) -> Option<String> {
        let off = addr.checked_sub(self.queue?)?;
        let field = self
            .offsets
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("request_queue.")?, *v)))
            .find(|(k, v)| *v == off && *k != "size");
        if let Some((k, _)) = field {
            return Some(format!("request_queue.{k}"));
        }
        let size = *self.offsets.get("request_queue.size")?;
        (off < size).then(|| format!("request_queue+{off:#x}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naming(lines: &str) -> LockNaming {
        let mut n = LockNaming::default();
        for l in lines.lines() {
            let mut w = l.split_whitespace();
            let kind = w.next().unwrap();
            assert_eq!(n.header(kind, w), Some(true), "{l}");
        }
        n
    }

    const LINES: &str = "queue 0xffff888004a3c000
offset request.q 0
offset request_queue.size 1032
offset request_queue.queue_lock 128
offset request_queue.requeue_lock 536
kernel _text ffffffff81000000
kernel _end ffffffff83000000
sym ffffffff82400010 ffffffff82400000 pool_lock
sym ffffffff82500000 ffffffff82500000 kmem_lock";

    #[test]
    fn a_lock_is_named_by_its_address() {
        let n = naming(LINES);
        assert_eq!(n.name(0xffff888004a3c000 + 128), QUEUE_LOCK);
        assert_eq!(
            n.name(0xffff888004a3c000 + 536),
            "request_queue.requeue_lock"
        );
        assert_eq!(n.name(0xffff888004a3c000 + 8), "request_queue+0x8");
        assert_eq!(n.name(0xffff888004a3c000 + 1032), UNNAMED);
        assert_eq!(n.name(0xffffffff82400010), "pool_lock+0x10");
        assert_eq!(n.name(0xffffffff82500000), "kmem_lock");
        assert_eq!(n.name(0xffff888000001000), UNNAMED);
    }

    #[test]
    fn without_the_queue_or_the_size_less_is_named() {
        let n = naming("queue none\nkernel _text ffffffff81000000");
        assert_eq!(n.queue, None);
        assert_eq!(n.name(0xffffffff82400010), UNNAMED);
        let n = naming("queue ffff888004a3c000\noffset request_queue.queue_lock 128");
        assert_eq!(n.name(0xffff888004a3c000 + 128), QUEUE_LOCK);
        assert_eq!(n.name(0xffff888004a3c000 + 8), UNNAMED);
    }

    #[test]
    fn malformed_lines_are_refused_not_fatal() {
        let mut n = LockNaming::default();
        for l in [
            "offset x",
            "offset x y",
            "kernel _text zz",
            "kernel _mid ff",
            "sym 1 2",
            "sym",
        ] {
            let mut w = l.split_whitespace();
            let kind = w.next().unwrap();
            assert_ne!(n.header(kind, w), Some(true), "{l}");
        }
        assert_eq!(n.header("pids", "1 2".split_whitespace()), None);
        assert_eq!(n.name(u64::MAX), UNNAMED);
    }
}
