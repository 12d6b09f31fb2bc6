/* log.c: one line per event on stderr, `ts level event k=v...`, so that logs
 * grep and parse the same way everywhere. Callers never pass secrets. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "isostack/util.h"

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void iso_log(enum iso_log_level level, const char *event, const char *fmt, ...)
{
	char ts[32];
	char line[2048];
	va_list ap;
	int n;

	/* Debug lines cost a getenv only when asked for; no global switch. */
	if (level == ISO_LOG_DEBUG && !getenv("ISOSTACK_DEBUG"))
		return;
	iso_format_time(iso_now_ms(), ts, sizeof(ts));
	n = snprintf(line, sizeof(line), "%s level=%s event=%s ", ts, level_names[level], event);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	va_start(ap, fmt);
	/* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start is two lines up */
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One fputs per line keeps lines whole when threads log at once. */
	fprintf(stderr, "%s\n", line);
}
