/* error.c: the user-facing error record. One table maps each error class to
 * its errno, HTTP status and stable API code, so no caller invents its own. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "isostack/util.h"

static const struct {
	int errnum;
	int http;
	const char *name;
} error_table[] = {
    [ISO_OK] = {0, 200, "ok"},
    [ISO_E_INVALID] = {EINVAL, 400, "invalid_argument"},
    [ISO_E_UNAUTHORIZED] = {EACCES, 401, "unauthorized"},
    [ISO_E_FORBIDDEN] = {EPERM, 403, "forbidden"},
    [ISO_E_NOT_FOUND] = {ENOENT, 404, "not_found"},
    [ISO_E_CONFLICT] = {EEXIST, 409, "conflict"},
    [ISO_E_NO_CAPACITY] = {ENOSPC, 409, "insufficient_capacity"},
    [ISO_E_TOO_LARGE] = {E2BIG, 413, "payload_too_large"},
    [ISO_E_CAPACITY] = {EDOM, 422, "unsatisfiable"},
    [ISO_E_METHOD] = {ENOTSUP, 405, "method_not_allowed"},
    [ISO_E_INTERNAL] = {EIO, 500, "internal"},
    [ISO_E_UNAVAILABLE] = {EAGAIN, 503, "unavailable"},
    [ISO_E_LIMIT] = {EUSERS, 429, "limit_exceeded"},
};

static unsigned error_index(enum iso_errcode code)
{
	return (unsigned)code < ISO_ARRAY_SIZE(error_table) ? (unsigned)code : ISO_E_INTERNAL;
}

int iso_error_errno(enum iso_errcode code)
{
	return -error_table[error_index(code)].errnum;
}
const char *iso_errcode_name(enum iso_errcode code)
{
	return error_table[error_index(code)].name;
}
int iso_errcode_http_status(enum iso_errcode code)
{
	return error_table[error_index(code)].http;
}

int iso_error_set(struct iso_error *err, enum iso_errcode code, const char *field, const char *fmt,
                  ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		iso_strlcpy(err->field, field ? field : "", sizeof(err->field));
		va_start(ap, fmt);
		/* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): a known false report */
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return iso_error_errno(code);
}

int iso_errcode_parse(const char *name, enum iso_errcode *out)
{
	for (unsigned c = ISO_E_INVALID; c < ISO_ARRAY_SIZE(error_table); c++)
		if (strcmp(name, error_table[c].name) == 0) {
			*out = (enum iso_errcode)c;
			return 0;
		}
	return -EINVAL;
}
