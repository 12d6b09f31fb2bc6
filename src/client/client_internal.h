/* client_internal.h: helpers shared by the files of src/client only (URL and
 * path checks); not part of the public client API. */
#ifndef ISOSTACK_CLIENT_INTERNAL_H
#define ISOSTACK_CLIENT_INTERNAL_H

#include "isostack/util.h"

/* Checks a base URL (http/https, a host, no credentials, no query or
 * fragment, no whitespace) and returns in *out a malloc'd copy without
 * trailing '/'. Errors name field "url". */
int iso_client_base_url(const char *url, char **out, struct iso_error *err);

/* A request path: starts with '/', printable ASCII without spaces, no '#'.
 * Errors name field "path". */
int iso_client_check_path(const char *path, struct iso_error *err);

#endif
