/*
 * An LD_PRELOAD fault injector for the backend (vhost-blk/tests/write_errors.rs): makes the
 * next N fdatasync calls, or the next N pwritev calls, fail with EIO, as Linux does when
 * write-back of the image's pages failed (reported once per open file, the pages marked
 * clean). Device-mapper (dm-error, dm-flakey) is not available in this container, and a full
 * tmpfs gives ENOSPC but never EIO: this is the EIO half.
 *
 * Control: VB_FAULT_CTL names a file of two little-endian int32 counters, mapped shared when
 * the library loads: [0] fdatasync failures to inject, [1] pwritev failures. The test arms
 * them with pwrite; the backend consumes them with atomic decrements, so the hot path makes no
 * system call of its own (a seccomp allow-list sees only the calls it wraps).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int *ctl;

__attribute__((constructor)) static void vb_fault_init(void)
{
	const char *path = getenv("VB_FAULT_CTL");
	if (!path)
		return;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	void *p = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		ctl = p;
}

/* Takes one armed failure of counter i, if any. */
static int take(int i)
{
	if (!ctl)
		return 0;
	int n = __atomic_load_n(&ctl[i], __ATOMIC_SEQ_CST);
	while (n > 0) {
		if (__atomic_compare_exchange_n(&ctl[i], &n, n - 1, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			return 1;
	}
	return 0;
}

int fdatasync(int fd)
{
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	int r = real(fd);
	if (take(0)) {
		errno = EIO;
		return -1;
	}
	return r;
}

static ssize_t vb_pwritev(const char *name, int fd, const struct iovec *iov, int cnt, off_t off)
{
	static ssize_t (*real)(int, const struct iovec *, int, off_t);
	if (!real)
		real = (ssize_t(*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, name);
	if (take(1)) {
		errno = EIO;
		return -1;
	}
	return real(fd, iov, cnt, off);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return vb_pwritev("pwritev", fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return vb_pwritev("pwritev64", fd, iov, cnt, off);
}
