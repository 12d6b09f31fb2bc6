/* file.c: writing a file whole or not at all. Every file other programs read
 * from us (OpenSM's partitions.conf, opafm.xml, the audit keys, exports) must
 * never be seen half-written: a truncated partitions.conf flattens the fabric
 * (docs/reference-fabric.md). Temp file in the same directory, fsync,
 * rename (or link, which never replaces), fsync of the directory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isostack/util.h"

void iso_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

static int fsync_dir(const char *dir, struct iso_error *err)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cannot sync directory %s: %s", dir,
		                     strerror(errno));
	return 0;
}

int iso_file_write_atomic(const char *path, const char *data, size_t len, unsigned mode,
                          bool exclusive, struct iso_error *err)
{
	char dir[PATH_MAX], tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	uint32_t rnd = randombytes_random();
	int fd;

	if (!slash)
		iso_strlcpy(dir, ".", sizeof(dir));
	else if (slash == path)
		iso_strlcpy(dir, "/", sizeof(dir));
	else if ((size_t)(slash - path) >= sizeof(dir))
		return iso_error_set(err, ISO_E_INVALID, NULL, "path too long: %s", path);
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (!*base ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.%08x.tmp", dir, base, rnd) >= (int)sizeof(tmp))
		return iso_error_set(err, ISO_E_INVALID, NULL, "bad path: %s", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
	if (fd < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cannot create %s: %s", tmp,
		                     strerror(errno));
	/* The mode asked for, whatever the umask. */
	if (fchmod(fd, (mode_t)mode) < 0 || write_all(fd, data, len) < 0 || fsync(fd) < 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cannot write %s: %s", tmp,
		                     strerror(e));
	}
	if (close(fd) < 0) {
		int e = errno;
		unlink(tmp);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cannot write %s: %s", tmp,
		                     strerror(e));
	}
	if (exclusive ? link(tmp, path) < 0 : rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		if (e == EEXIST)
			return -EEXIST;
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "cannot create %s: %s", path,
		                     strerror(e));
	}
	if (exclusive)
		unlink(tmp);
	return fsync_dir(dir, err);
}
