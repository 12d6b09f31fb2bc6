/* util.h: the few helpers every module shares: cleanup attributes so that every
 * error path frees what it took, the user-facing error record, and logging.
 * Kept tiny on purpose; anything bigger belongs in its own module. */
#ifndef ISOSTACK_UTIL_H
#define ISOSTACK_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* isostack-core and isostack-client are compiled with -fvisibility=hidden, so that a
 * plugin loaded into a foreign process (the Slurm SPANK plugin in slurmstepd) exports
 * none of their internal helpers. A public header wraps its declarations in
 * ISO_PUBLIC_BEGIN/END: its iso_-prefixed API keeps default visibility (checked by the
 * client_exports test of tests/lint). */
#define ISO_PUBLIC_BEGIN _Pragma("GCC visibility push(default)")
#define ISO_PUBLIC_END   _Pragma("GCC visibility pop")

ISO_PUBLIC_BEGIN

#define _cleanup_(f)      __attribute__((cleanup(f)))
#define _cleanup_free_    _cleanup_(iso_freep)
#define _printf_(a, b)    __attribute__((format(printf, a, b)))
#define _unused_          __attribute__((unused))
#define ISO_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void iso_freep(void *p)
{
	free(*(void **)p);
}
static inline void iso_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(iso_fclosep)
void iso_closep(int *fd); /* closes fds >= 0 */
#define _cleanup_close_ _cleanup_(iso_closep)

/* Returns the pointer and leaves NULL behind: hands ownership out of a
 * _cleanup_ variable. */
#define ISO_TAKE(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _taken_ = (p);                                                       \
		(p) = NULL;                                                                        \
		_taken_;                                                                           \
	})

/* Error classes users see. Each maps to one HTTP status and one stable code
 * string in the API; functions return the matching negative errno. */
enum iso_errcode {
	ISO_OK = 0,
	ISO_E_INVALID,      /* bad input: 400 invalid_argument */
	ISO_E_UNAUTHORIZED, /* no/bad credentials: 401 unauthorized */
	ISO_E_FORBIDDEN,    /* authenticated, not allowed: 403 forbidden */
	ISO_E_NOT_FOUND,    /* 404 not_found (also: another tenant's object) */
	ISO_E_CONFLICT,     /* state forbids it: 409 conflict */
	ISO_E_NO_CAPACITY,  /* does not fit now: 409 insufficient_capacity */
	ISO_E_TOO_LARGE,    /* 413 payload_too_large */
	ISO_E_CAPACITY,     /* can never fit: 422 unsatisfiable */
	ISO_E_METHOD,       /* 405 method_not_allowed */
	ISO_E_INTERNAL,     /* 500 internal */
	ISO_E_UNAVAILABLE,  /* 503 unavailable */
	ISO_E_LIMIT,        /* a per-tenant or per-client limit: 429 limit_exceeded */
};

#define ISO_ERR_FIELD_MAX 96
#define ISO_ERR_MSG_MAX   512

struct iso_error {
	enum iso_errcode code;
	char field[ISO_ERR_FIELD_MAX]; /* dotted path of the culprit ("gpus.count"), or "" */
	char message[ISO_ERR_MSG_MAX];
};

/* Fills *err (when not NULL) and returns the negative errno of the class, so
 * callers can write `return iso_error_set(err, ...);`. */
int iso_error_set(struct iso_error *err, enum iso_errcode code, const char *field, const char *fmt,
                  ...) _printf_(4, 5);
int iso_error_errno(enum iso_errcode code);
const char *iso_errcode_name(enum iso_errcode code); /* "invalid_argument", ... */
int iso_errcode_http_status(enum iso_errcode code);
/* The inverse of iso_errcode_name, for clients reading API errors. */
int iso_errcode_parse(const char *name, enum iso_errcode *out);

/* Logging: one line per event, key=value fields, to stderr. Never pass secrets.
 * Every value a conversion prints is escaped here (iso_escape), and a bare
 * `k=%s` value holding a space or a quote is quoted, so no value can start a
 * line or a field of its own (docs/audit.md, "The daemon's log"). */
enum iso_log_level { ISO_LOG_DEBUG, ISO_LOG_INFO, ISO_LOG_WARN, ISO_LOG_ERR };
void iso_log(enum iso_log_level level, const char *event, const char *fmt, ...) _printf_(3, 4);

/* Copies len bytes of src to dst (size bytes, always terminated) with every
 * control character (C0, DEL, C1), line separator and bidi override escaped
 * (\n \r \t \xNN \uNNNN), every byte that is not well-formed UTF-8 as \xNN,
 * `\` as `\\`, and with ISO_ESCAPE_QUOTE `"` as `\"`. Cut only between whole
 * characters or escapes; returns -1 when cut, else 0. */
#define ISO_ESCAPE_QUOTE 1u
int iso_escape(char *dst, size_t size, const char *src, size_t len, unsigned flags);
/* Well-formed UTF-8 with none of the characters iso_escape escapes (other
 * than `\` and `"`): the test for free text a client may store. */
bool iso_text_valid(const char *s);
/* How many leading bytes of s[0..len) are well-formed UTF-8 (len when all are;
 * controls allowed): where a file that must be UTF-8 text goes wrong. */
size_t iso_utf8_prefix(const char *s, size_t len);

/* Bounded string copy that always terminates; returns -1 when truncated. */
int iso_strlcpy(char *dst, const char *src, size_t size);

/* Wall clock in milliseconds since the epoch and monotonic nanoseconds. */
int64_t iso_now_ms(void);
uint64_t iso_mono_ns(void);

/* RFC 3339 UTC with milliseconds: "2026-11-22T10:00:00.000Z". buf >= 32. */
void iso_format_time(int64_t ms, char *buf, size_t size);

/* Object names (tenants, nodes, pools, racks): [a-z0-9][a-z0-9._-]{0,62}. */
#define ISO_NAME_MAX 64
bool iso_name_valid(const char *name);

/* Idempotency keys (POST /v1/allocations' Idempotency-Key header, the
 * desired document's members' "key"): 1-128 characters of [A-Za-z0-9._:-].
 * ISO_IDEM_KEY_MAX includes the NUL. */
#define ISO_IDEM_KEY_MAX 129
bool iso_idem_key_valid(const char *key);

/* Parses a 64-bit GUID written as 0x-prefixed hex (OpenSM accepts base 0;
 * we accept only the unambiguous hex form). */
int iso_parse_guid(const char *s, uint64_t *out);

/* The GUID an mlx5 VF gets from an Ethernet-style MAC, as networking-mlnx's
 * eswitchd and mech_mlnx.py derive it (docs/openstack.md): the MAC's first 3
 * bytes, 00:00, its last 3 bytes ("fa:16:3e:12:34:56" -> 0xfa163e0000123456).
 * The MAC is six two-digit hex bytes separated by ':' (either case), nothing
 * else. -EINVAL otherwise. */
int iso_guid_from_mac(const char *mac, uint64_t *out);
/* The GUID in an InfiniBand DHCP client-id: twenty two-digit hex bytes
 * separated by ':', the first twelve "ff:00:00:00:00:00:02:00:00:02:c9:00"
 * (the form mech_mlnx.py's _gen_client_id writes), the last eight the GUID.
 * -EINVAL otherwise. */
int iso_guid_from_client_id(const char *client_id, uint64_t *out);

/* Parses an IPv4 address in the strict dotted-quad form (four decimal
 * octets 0..255, no leading zeros, no spaces): "192.0.2.12". *out is in
 * host order. -EINVAL otherwise. The form is canonical, so two texts that
 * parse are the same address exactly when they are equal strings. */
#define ISO_IPV4_MAX 16 /* "255.255.255.255" and its NUL */
int iso_parse_ipv4(const char *s, uint32_t *out);

/* Writes `path` whole or not at all (temp file in the same directory, fsync,
 * rename, fsync of the directory), with exactly `mode`. `exclusive`: never
 * replaces an existing file (-EEXIST, err untouched). */
int iso_file_write_atomic(const char *path, const char *data, size_t len, unsigned mode,
                          bool exclusive, struct iso_error *err);

ISO_PUBLIC_END

#endif
