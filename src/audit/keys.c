/* keys.c: the audit signing key pair on disk. DIR/audit.key holds the 64-byte
 * Ed25519 secret key (libsodium's seed || public key) in base64, mode 0600,
 * and is refused when group or others may touch it; DIR/audit.pub holds
 * "ed25519:<base64 of the 32-byte public key>\n", mode 0644, for publishing.
 * Both are written whole or not at all: temp file, fsync, then link (the key,
 * which must never replace an existing one) or rename (the public key), then
 * an fsync of the directory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/internal.h"

#define KEY_FILE "audit.key"
#define PUB_FILE "audit.pub"
#define KEY_B64_LEN                                                                                \
	(sodium_base64_ENCODED_LEN(ISO_AUDIT_SK_LEN, sodium_base64_VARIANT_ORIGINAL) - 1)
#define PUB_B64_LEN                                                                                \
	(sodium_base64_ENCODED_LEN(ISO_AUDIT_PK_LEN, sodium_base64_VARIANT_ORIGINAL) - 1)
#define PUB_PREFIX "ed25519:"

static int join(char *out, size_t size, const char *dir, const char *name, struct iso_error *err)
{
	int n = snprintf(out, size, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= size)
		return iso_error_set(err, ISO_E_INVALID, "state_dir",
		                     "audit: the path %s/%s is too long", dir, name);
	return 0;
}

/* Writes DIR/NAME whole (iso_file_write_atomic). `exclusive`: fails with
 * -EEXIST rather than replace an existing file. */
static int write_file(const char *dir, const char *name, const char *data, size_t len, mode_t mode,
                      bool exclusive, struct iso_error *err)
{
	char path[PATH_MAX];
	int r = join(path, sizeof(path), dir, name, err);

	if (r < 0)
		return r;
	r = iso_file_write_atomic(path, data, len, mode, exclusive, err);
	if (r < 0 && r != -EEXIST && err) {
		char msg[ISO_ERR_MSG_MAX];
		iso_strlcpy(msg, err->message, sizeof(msg));
		iso_error_set(err, err->code, NULL, "audit: %.400s", msg);
	}
	return r;
}

/* Reads a small text file whole; *len excludes the terminating NUL. */
static int read_small(int fd, const char *path, char *buf, size_t size, size_t *len,
                      struct iso_error *err)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = read(fd, buf + n, size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: cannot read %s: %s",
			                     path, strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == size - 1)
			return iso_error_set(err, ISO_E_INVALID, path,
			                     "%s: line 1: too long for a key file", path);
	}
	buf[n] = '\0';
	*len = n;
	return 0;
}

/* One line of exactly `want` characters, with or without its newline. */
static bool one_line(const char *buf, size_t len, size_t want)
{
	return len == want || (len == want + 1 && buf[want] == '\n');
}

static bool unbase64(const char *s, size_t len, uint8_t *out, size_t n)
{
	size_t got = 0;
	const char *end = NULL;
	char again[128];

	if (sodium_base642bin(out, n, s, len, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) !=
	        0 ||
	    got != n || end != s + len)
		return false;
	/* One spelling only: re-encoding must give the same text back. */
	if (sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL) > sizeof(again))
		return false;
	sodium_bin2base64(again, sizeof(again), out, n, sodium_base64_VARIANT_ORIGINAL);
	return strlen(again) == len && memcmp(again, s, len) == 0;
}

static int read_key(const char *dir, struct iso_audit_key *k, struct iso_error *err)
{
	char path[PATH_MAX], buf[256];
	uint8_t sk[ISO_AUDIT_SK_LEN], pk2[ISO_AUDIT_PK_LEN], sk2[ISO_AUDIT_SK_LEN];
	struct stat st;
	size_t len = 0;
	int r;

	if ((r = join(path, sizeof(path), dir, KEY_FILE, err)) < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "audit: %s does not exist",
			                     path);
		if (errno == ELOOP)
			return iso_error_set(err, ISO_E_FORBIDDEN, NULL,
			                     "audit: %s is a symbolic link; the signing key must "
			                     "be a plain file",
			                     path);
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: cannot open %s: %s", path,
		                     strerror(errno));
	}
	if (fstat(fd, &st) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: cannot stat %s: %s", path,
		                     strerror(errno));
	if (!S_ISREG(st.st_mode))
		return iso_error_set(err, ISO_E_FORBIDDEN, NULL, "audit: %s is not a regular file",
		                     path);
	if (st.st_mode & 077)
		return iso_error_set(
		    err, ISO_E_FORBIDDEN, NULL,
		    "audit: %s is open to group or others (mode %04o); the signing "
		    "key must be private: run `chmod 600 %s`",
		    path, (unsigned)(st.st_mode & 07777), path);
	if (st.st_uid != geteuid())
		return iso_error_set(err, ISO_E_FORBIDDEN, NULL,
		                     "audit: %s belongs to uid %u, not to uid %u that uses it: run "
		                     "`chown %u %s`",
		                     path, (unsigned)st.st_uid, (unsigned)geteuid(),
		                     (unsigned)geteuid(), path);
	r = read_small(fd, path, buf, sizeof(buf), &len, err);
	if (r == 0 &&
	    (!one_line(buf, len, KEY_B64_LEN) || !unbase64(buf, KEY_B64_LEN, sk, sizeof(sk))))
		r = iso_error_set(
		    err, ISO_E_INVALID, path,
		    "audit: %s: line 1: expected the base64 of a 64-byte Ed25519 secret "
		    "key",
		    path);
	if (r == 0) {
		/* The secret key is seed || public key: both halves must agree. */
		crypto_sign_seed_keypair(pk2, sk2, sk);
		if (sodium_memcmp(sk2, sk, sizeof(sk)) != 0)
			r = iso_error_set(
			    err, ISO_E_INVALID, path,
			    "audit: %s is corrupt: its public half does not match its "
			    "seed",
			    path);
	}
	if (r == 0) {
		memcpy(k->sk, sk, sizeof(sk));
		memcpy(k->pk, sk + 32, sizeof(k->pk));
	}
	sodium_memzero(buf, sizeof(buf));
	sodium_memzero(sk, sizeof(sk));
	sodium_memzero(sk2, sizeof(sk2));
	return r;
}

static int write_pub(const char *dir, const uint8_t pk[ISO_AUDIT_PK_LEN], struct iso_error *err)
{
	char key[sizeof(PUB_PREFIX) + PUB_B64_LEN], line[sizeof(key) + 1];
	int n;

	iso_audit_pubkey_format(pk, key, sizeof(key));
	n = snprintf(line, sizeof(line), "%s\n", key);
	return write_file(dir, PUB_FILE, line, (size_t)n, 0644, false, err);
}

static int create_key(const char *dir, struct iso_audit_key *k, struct iso_error *err)
{
	char b64[KEY_B64_LEN + 2];
	int r;

	crypto_sign_keypair(k->pk, k->sk);
	sodium_bin2base64(b64, sizeof(b64), k->sk, sizeof(k->sk), sodium_base64_VARIANT_ORIGINAL);
	b64[KEY_B64_LEN] = '\n';
	r = write_file(dir, KEY_FILE, b64, KEY_B64_LEN + 1, 0600, true, err);
	sodium_memzero(b64, sizeof(b64));
	if (r < 0)
		sodium_memzero(k, sizeof(*k));
	return r;
}

int iso_audit_key_load_or_create(const char *dir, struct iso_audit_key *k, bool *created,
                                 struct iso_error *err)
{
	char pub_path[PATH_MAX];
	uint8_t pk[ISO_AUDIT_PK_LEN];
	struct iso_error pub_err = {0};
	int r;

	*created = false;
	if (!audit_sodium_ready())
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: libsodium cannot start");
	if ((r = join(pub_path, sizeof(pub_path), dir, PUB_FILE, err)) < 0)
		return r;
	r = read_key(dir, k, err);
	if (r == -ENOENT) {
		r = create_key(dir, k, err);
		if (r == -EEXIST) /* another process made one first: use it */
			r = read_key(dir, k, err);
		else if (r == 0)
			*created = true;
		if (r < 0)
			return r;
		if (*created) {
			r = write_pub(dir, k->pk, err);
			if (r < 0)
				sodium_memzero(k, sizeof(*k));
			return r;
		}
	}
	if (r < 0)
		return r;
	r = iso_audit_pubkey_read(pub_path, pk, &pub_err);
	if (r == -ENOENT)
		r = write_pub(dir, k->pk, err);
	else if (r < 0)
		r = iso_error_set(err, ISO_E_INVALID, pub_path,
		                  "%s; it must hold the public half of %s/" KEY_FILE
		                  ": remove it and it is written again",
		                  pub_err.message, dir);
	else if (sodium_memcmp(pk, k->pk, sizeof(pk)) != 0)
		r = iso_error_set(
		    err, ISO_E_INVALID, pub_path,
		    "audit: %s is not the public half of %s/" KEY_FILE
		    " (was one of them replaced?): restore the matching pair, or remove "
		    "%s and it is written again",
		    pub_path, dir, pub_path);
	if (r < 0)
		sodium_memzero(k, sizeof(*k));
	return r;
}

int iso_audit_pubkey_read(const char *path, uint8_t pk[ISO_AUDIT_PK_LEN], struct iso_error *err)
{
	char buf[256];
	size_t len = 0, plen = strlen(PUB_PREFIX);
	uint8_t key[ISO_AUDIT_PK_LEN];
	int r;

	if (!audit_sodium_ready())
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: libsodium cannot start");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return iso_error_set(err, ISO_E_NOT_FOUND, path, "%s: no such file", path);
		return iso_error_set(err, ISO_E_INVALID, path, "%s: cannot open: %s", path,
		                     strerror(errno));
	}
	r = read_small(fd, path, buf, sizeof(buf), &len, err);
	if (r < 0)
		return r;
	if (len == plen + PUB_B64_LEN + 1 && buf[len - 1] == '\n')
		len--;
	r = audit_pubkey_parse(buf, len, key);
	if (r == -EINVAL)
		return iso_error_set(err, ISO_E_INVALID, path,
		                     "%s: line 1: expected \"ed25519:<base64 of 32 bytes>\" (an "
		                     "isostack audit public key)",
		                     path);
	if (r < 0)
		return iso_error_set(err, ISO_E_INVALID, path,
		                     "%s: line 1: not a valid Ed25519 public key", path);
	memcpy(pk, key, sizeof(key));
	return 0;
}

int audit_pubkey_parse(const char *s, size_t len, uint8_t pk[ISO_AUDIT_PK_LEN])
{
	size_t plen = strlen(PUB_PREFIX);
	uint8_t key[ISO_AUDIT_PK_LEN];

	if (len != plen + PUB_B64_LEN || memcmp(s, PUB_PREFIX, plen) != 0 ||
	    !unbase64(s + plen, PUB_B64_LEN, key, sizeof(key)))
		return -EINVAL;
	if (!crypto_core_ed25519_is_valid_point(key))
		return -EDOM;
	memcpy(pk, key, sizeof(key));
	return 0;
}
