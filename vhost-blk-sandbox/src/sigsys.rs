//! The SIGSYS handler: a refused call is named on stderr, then the process dies by SIGSYS
//! (the parent's rule 3).
//!
//! The handler runs in the thread that made the call, inside the seccomp filters, so it uses
//! only calls every list allows (`write`, `prctl(PR_GET_NAME)`, `getpid`, `gettid`, `tgkill`
//! with SIGSYS, `exit_group`), allocates nothing and takes no lock.

use std::io;

use super::names::NAMES;

/// The SIGSYS part of `siginfo_t` (Linux `_sigsys`, 64-bit layout): the trapped call's number
/// is `syscall`. `libc` has no accessor for it.
#[repr(C)]
#[allow(dead_code)] // Fields before `syscall` are there for its offset only.
struct SigsysInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    _pad: libc::c_int,
    call_addr: *mut libc::c_void,
    syscall: libc::c_int,
    arch: libc::c_uint,
}

/// A fixed buffer the handler writes its line into (no allocation in a signal handler).
struct Line {
    buf: [u8; 192],
    len: usize,
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
    }

    fn push_num(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            if let Some(d) = digits.get_mut(i) {
                *d = b'0' + (n % 10) as u8;
            }
            n /= 10;
            if n == 0 || i == 0 {
                break;
            }
        }
        self.push(digits.get(i..).unwrap_or_default());
    }

    fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let nr = if info.is_null() {
        -1
    } else {
        // SAFETY: the kernel passes a valid siginfo_t for a SA_SIGINFO handler; for SIGSYS
        // from seccomp its union holds `_sigsys`, which `SigsysInfo` mirrors field for field.
        unsafe { (*info.cast::<SigsysInfo>()).syscall }
    };
    let mut line = Line {
        buf: [0; 192],
        len: 0,
    };
    line.push(b"vhost-blk: sandbox: refused system call ");
    let name = usize::try_from(nr).ok().and_then(|i| NAMES.get(i)).copied();
    line.push(name.filter(|n| !n.is_empty()).unwrap_or("?").as_bytes());
    line.push(b" (");
    line.push_num(nr.max(0) as u32);
    line.push(b") in thread ");
    let mut comm = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) into `comm`, which is 16.
    unsafe { libc::prctl(libc::PR_GET_NAME, comm.as_mut_ptr()) };
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    line.push(comm.get(..end).unwrap_or_default());
    line.push(b"; killing the process (SIGSYS)\n");
    let bytes = line.as_bytes();
    // SAFETY: writes `bytes`, a live buffer of its length, to stderr; a short or failed
    // write loses part of the line and nothing else.
    unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
    // SA_RESETHAND made SIGSYS's action the default again and SA_NODEFER left it unblocked:
    // raising it ends the process with SIGSYS. SAFETY: plain-integer calls on this thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGSYS);
        libc::_exit(128 + libc::SIGSYS);
    }
}

/// Installs [`on_sigsys`] for SIGSYS.
pub(super) fn install() -> io::Result<()> {
    // SAFETY: a zeroed sigaction is valid (empty mask, no flags); the handler's address and
    // flags are set before use, and the handler is async-signal-safe (module docs).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_sigsys as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER;
    // SAFETY: `sa` is initialised above; the old action is not asked for (null).
    if unsafe { libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_holds_numbers_and_stops_at_its_end() {
        let mut l = Line {
            buf: [0; 192],
            len: 0,
        };
        l.push_num(0);
        l.push(b" ");
        l.push_num(4_294_967_295);
        assert_eq!(l.as_bytes(), b"0 4294967295");
        l.push(&[b'x'; 300]);
        assert_eq!(l.as_bytes().len(), 192);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn names_are_the_kernels() {
        assert_eq!(NAMES.get(59), Some(&"execve"));
        assert_eq!(NAMES.get(41), Some(&"socket"));
        assert_eq!(NAMES.get(257), Some(&"openat"));
        assert_eq!(NAMES.get(435), Some(&"clone3"));
    }
}
