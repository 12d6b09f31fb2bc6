/* keyset.c: the cluster's published audit key set. Several isostackd on one
 * store each sign heads with their own key, so one log holds heads of several
 * signers; what makes such a log trustworthy is a list of the public keys an
 * operator published, not whichever key a verifier happens to hold. The file
 * is one key a line ("ed25519:<base64> [NAME]", '#' comments, blank lines),
 * parsed strictly: a bad line is named by file and line, and a key or name
 * given twice is refused rather than silently merged. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/internal.h"

#define KEYSET_FILE_MAX (64u << 10) /* 64 keys with names and comments fit easily */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

static void add_entry(struct iso_audit_keyset *ks, const uint8_t pk[ISO_AUDIT_PK_LEN],
                      const char *name, size_t name_len, long line)
{
	struct iso_audit_keyset_entry *e = &ks->keys[ks->n++];

	memset(e, 0, sizeof(*e));
	memcpy(e->pk, pk, ISO_AUDIT_PK_LEN);
	iso_audit_key_id(pk, e->id);
	memcpy(e->name, name, name_len);
	e->name[name_len] = '\0';
	e->line = line;
}

/* One non-blank, non-comment line: the key, then optionally one space or tab
 * run and a name, then optional trailing blanks. */
static int parse_line(struct iso_audit_keyset *ks, const char *p, size_t len, const char *file,
                      long line, struct iso_error *err)
{
	size_t klen = 0, nstart, nlen = 0;
	uint8_t pk[ISO_AUDIT_PK_LEN];
	int r;

	while (klen < len && p[klen] != ' ' && p[klen] != '\t')
		klen++;
	nstart = klen;
	while (nstart < len && (p[nstart] == ' ' || p[nstart] == '\t'))
		nstart++;
	while (nstart + nlen < len && p[nstart + nlen] != ' ' && p[nstart + nlen] != '\t')
		nlen++;
	for (size_t i = nstart + nlen; i < len; i++)
		if (p[i] != ' ' && p[i] != '\t')
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: expected \"ed25519:<base64> [NAME]\": "
			                     "more than a key and a name",
			                     file, line);
	r = audit_pubkey_parse(p, klen, pk);
	if (r == -EINVAL)
		return iso_error_set(err, ISO_E_INVALID, file,
		                     "%s: line %ld: expected \"ed25519:<base64 of 32 bytes>\" "
		                     "(an isostack audit public key, as in STATE_DIR/audit.pub)",
		                     file, line);
	if (r < 0)
		return iso_error_set(err, ISO_E_INVALID, file,
		                     "%s: line %ld: not a valid Ed25519 public key", file, line);
	if (nlen >= ISO_AUDIT_KEYNAME_MAX)
		return iso_error_set(err, ISO_E_INVALID, file,
		                     "%s: line %ld: the name is longer than %d bytes", file, line,
		                     ISO_AUDIT_KEYNAME_MAX - 1);
	for (size_t i = 0; i < nlen; i++)
		if (!name_char(p[nstart + i]))
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: a key's name may hold only letters, "
			                     "digits, '.', '_' and '-'",
			                     file, line);
	for (size_t i = 0; i < ks->n; i++) {
		const struct iso_audit_keyset_entry *e = &ks->keys[i];
		if (memcmp(e->pk, pk, sizeof(pk)) == 0)
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: the key of line %ld again", file, line,
			                     e->line);
		if (nlen && strlen(e->name) == nlen && memcmp(e->name, p + nstart, nlen) == 0)
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: the name \"%s\" of line %ld again",
			                     file, line, e->name, e->line);
	}
	if (ks->n == ISO_AUDIT_KEYSET_MAX)
		return iso_error_set(err, ISO_E_INVALID, file, "%s: line %ld: more than %d keys",
		                     file, line, ISO_AUDIT_KEYSET_MAX);
	add_entry(ks, pk, p + nstart, nlen, line);
	/* Two keys whose ids collide would make a head's "key" ambiguous. */
	for (size_t i = 0; i + 1 < ks->n; i++)
		if (memcmp(ks->keys[i].id, ks->keys[ks->n - 1].id, ISO_AUDIT_KEY_ID_LEN) == 0)
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: its key id is that of line %ld's key",
			                     file, line, ks->keys[i].line);
	return 0;
}

static int parse_text(const char *text, size_t len, const char *file, struct iso_audit_keyset *ks,
                      struct iso_error *err)
{
	size_t pos = 0;
	long line = 0;

	while (pos < len) {
		const char *p = text + pos, *nl = memchr(p, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - p) : len - pos, blank = 0;
		int r;

		line++;
		pos += n + (nl ? 1 : 0);
		if (memchr(p, '\0', n))
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: holds a NUL byte", file, line);
		if (n && p[n - 1] == '\r')
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: ends in a carriage return (CRLF): use "
			                     "Unix line ends",
			                     file, line);
		while (blank < n && (p[blank] == ' ' || p[blank] == '\t'))
			blank++;
		if (blank == n || p[blank] == '#')
			continue;
		if (blank)
			return iso_error_set(err, ISO_E_INVALID, file,
			                     "%s: line %ld: starts with a blank; a key starts the "
			                     "line",
			                     file, line);
		r = parse_line(ks, p, n, file, line, err);
		if (r < 0)
			return r;
	}
	if (ks->n == 0)
		return iso_error_set(err, ISO_E_INVALID, file,
		                     "%s: holds no key: a key set lists at least one "
		                     "\"ed25519:<base64> [NAME]\" line",
		                     file);
	return 0;
}

int iso_audit_keyset_parse(const char *text, size_t len, const char *name,
                           struct iso_audit_keyset *ks, struct iso_error *err)
{
	int r;

	memset(ks, 0, sizeof(*ks));
	if (!audit_sodium_ready())
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "audit: libsodium cannot start");
	r = parse_text(text, len, name ? name : "key set", ks, err);
	if (r < 0)
		memset(ks, 0, sizeof(*ks)); /* a refused set holds no key */
	return r;
}

int iso_audit_keyset_read(const char *path, struct iso_audit_keyset *ks, struct iso_error *err)
{
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t len = 0;

	memset(ks, 0, sizeof(*ks));
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return iso_error_set(err, errno == ENOENT ? ISO_E_NOT_FOUND : ISO_E_INVALID, path,
		                     "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return iso_error_set(err, ISO_E_INVALID, path, "%s: not a regular file", path);
	if ((size_t)st.st_size > KEYSET_FILE_MAX)
		return iso_error_set(err, ISO_E_INVALID, path,
		                     "%s: larger than %u KiB: not a key set", path,
		                     KEYSET_FILE_MAX >> 10);
	buf = malloc(KEYSET_FILE_MAX + 1);
	if (!buf)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "%s: out of memory", path);
	for (;;) {
		ssize_t r = read(fd, buf + len, KEYSET_FILE_MAX + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return iso_error_set(err, ISO_E_INTERNAL, path, "%s: cannot read: %s", path,
			                     strerror(errno));
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > KEYSET_FILE_MAX)
			return iso_error_set(err, ISO_E_INVALID, path,
			                     "%s: larger than %u KiB: not a key set", path,
			                     KEYSET_FILE_MAX >> 10);
	}
	return iso_audit_keyset_parse(buf, len, path, ks, err);
}

void iso_audit_keyset_one(struct iso_audit_keyset *ks, const uint8_t pk[ISO_AUDIT_PK_LEN])
{
	memset(ks, 0, sizeof(*ks));
	add_entry(ks, pk, "", 0, 0);
}

const struct iso_audit_keyset_entry *iso_audit_keyset_find(const struct iso_audit_keyset *ks,
                                                           const uint8_t pk[ISO_AUDIT_PK_LEN])
{
	for (size_t i = 0; i < ks->n; i++)
		if (memcmp(ks->keys[i].pk, pk, ISO_AUDIT_PK_LEN) == 0)
			return &ks->keys[i];
	return NULL;
}

const struct iso_audit_keyset_entry *iso_audit_keyset_signer(const struct iso_audit_keyset *ks,
                                                             const struct iso_audit_head *h)
{
	bool named = iso_audit_key_id_known(h->key_id);

	for (size_t i = 0; i < ks->n; i++) {
		const struct iso_audit_keyset_entry *e = &ks->keys[i];
		if (named && memcmp(e->id, h->key_id, ISO_AUDIT_KEY_ID_LEN) != 0)
			continue;
		if (iso_audit_head_verify(h, e->pk))
			return e;
		if (named)
			return NULL;
	}
	return NULL;
}

int iso_audit_keyset_load(const char *state_dir, const char *keys_file,
                          const uint8_t own_pk[ISO_AUDIT_PK_LEN], struct iso_audit_keyset *ks,
                          char *used, size_t used_size, struct iso_error *err)
{
	char path[PATH_MAX], id[2 * ISO_AUDIT_KEY_ID_LEN + 1];
	uint8_t own[ISO_AUDIT_KEY_ID_LEN];
	struct iso_error kerr = {0};
	int r;

	if (used_size)
		used[0] = '\0';
	if (keys_file) {
		if (iso_strlcpy(path, keys_file, sizeof(path)) < 0)
			return iso_error_set(err, ISO_E_INVALID, "audit_keys",
			                     "--audit-keys: the path is too long");
	} else if (snprintf(path, sizeof(path), "%s/audit-keys", state_dir) >= (int)sizeof(path)) {
		return iso_error_set(err, ISO_E_INVALID, "state_dir",
		                     "audit: the path %s/audit-keys is too long", state_dir);
	}
	r = iso_audit_keyset_read(path, ks, &kerr);
	if (r == -ENOENT && !keys_file) {
		iso_audit_keyset_one(ks, own_pk);
		return 0;
	}
	if (r < 0)
		return iso_error_set(err, kerr.code, "audit_keys", "--audit-keys: %s",
		                     kerr.message);
	if (used_size)
		iso_strlcpy(used, path, used_size);
	if (!iso_audit_keyset_find(ks, own_pk)) {
		iso_audit_key_id(own_pk, own);
		iso_audit_key_id_format(own, id);
		return iso_error_set(err, ISO_E_INVALID, "audit_keys",
		                     "--audit-keys: this daemon's audit key (%s/audit.pub, key id "
		                     "%s) is not in the published key set %s, so no verifier would "
		                     "accept the heads it signs: add the line of %s/audit.pub to "
		                     "%s on every node, or give --audit-keys the set that holds it",
		                     state_dir, id, path, state_dir, path);
	}
	return 0;
}
