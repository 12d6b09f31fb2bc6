/* fail_fsync.c: an LD_PRELOAD shim for tests only (tests/api/test_group_commit.py).
 * Once the file named by ISO_FAIL_FSYNC_TRIGGER exists, fsync and fdatasync
 * of a file whose name ends in "-wal" (SQLite's write-ahead log) fail with
 * EIO; before that, and for every other file, they are the real calls.
 * Why: a failed flush is the one path of group commit (docs/store.md,
 * "Group commit") that no disk here produces on demand, and the daemon's
 * answer to it (every waiting reply a 500, nothing committed after it, the
 * daemon stops) must be tested on the real binary, through its real loop. */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static bool failing(int fd)
{
	const char *trigger = getenv("ISO_FAIL_FSYNC_TRIGGER");
	char link[64], path[4096];
	ssize_t n;

	if (!trigger || access(trigger, F_OK) != 0)
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 4)
		return false;
	path[n] = '\0';
	return strcmp(path + n - 4, "-wal") == 0;
}

EXPORT int fsync(int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");

	if (failing(fd)) {
		errno = EIO;
		return -1;
	}
	return real(fd);
}

EXPORT int fdatasync(int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");

	if (failing(fd)) {
		errno = EIO;
		return -1;
	}
	return real(fd);
}
