/* log.c: one line per event on stderr, `ts level event k=v...`, so that logs
 * grep and parse the same way everywhere. Callers never pass secrets.
 *
 * Values often come from clients (a URL path, a request id, an error message
 * quoting a body), so this is the one place that escapes them: the format is
 * walked here conversion by conversion and each value goes through
 * iso_escape. A value the format puts in quotes (`msg="%s"`) gets `"`
 * escaped as well; a bare one (`path=%s`) holding a space, `"` or `=` is
 * quoted. No caller can forget, and no value can start a line or a field. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "isostack/util.h"

#define LINE_MAX_BYTES 2048
#define LINE_RESERVE   8 /* room for "..." and a closing quote */

static const char *const level_names[] = {"debug", "info", "warn", "error"};

struct line {
	char buf[LINE_MAX_BYTES];
	size_t n;
	bool full;
};

static void put(struct line *l, const char *s, size_t len)
{
	if (l->full)
		return;
	if (l->n + len > sizeof(l->buf) - LINE_RESERVE) {
		l->full = true;
		return;
	}
	memcpy(l->buf + l->n, s, len);
	l->n += len;
}

/* One value: escaped, and quoted when bare and not one token. */
static void put_value(struct line *l, const char *s, size_t len, bool in_quotes)
{
	char esc[LINE_MAX_BYTES];
	size_t room;
	int cut;

	if (l->full)
		return;
	room = sizeof(l->buf) - LINE_RESERVE - l->n;
	if (room > sizeof(esc))
		room = sizeof(esc);
	cut = iso_escape(esc, room, s, len, in_quotes ? ISO_ESCAPE_QUOTE : 0);
	if (!in_quotes && strpbrk(esc, " \"=")) {
		cut = iso_escape(esc, room > 2 ? room - 2 : 1, s, len, ISO_ESCAPE_QUOTE);
		put(l, "\"", 1);
		put(l, esc, strlen(esc));
		if (cut < 0)
			put(l, "...", 3);
		put(l, "\"", 1);
	} else {
		put(l, esc, strlen(esc));
	}
	if (cut < 0)
		l->full = true;
}

/* Closes a line cut short: "..." and, when a quoted value was open, its
 * quote (escapes are whole, so an unescaped `"` count tells). */
static void finish(struct line *l)
{
	bool open = false;

	if (l->full) {
		for (size_t i = 0; i < l->n; i++) {
			if (l->buf[i] == '\\')
				i++;
			else if (l->buf[i] == '"')
				open = !open;
		}
		memcpy(l->buf + l->n, "...", 3);
		l->n += 3;
		if (open)
			l->buf[l->n++] = '"';
	}
	l->buf[l->n] = '\0';
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
/* Formats the number conversion `spec` (no `*` left in it) with the next
 * argument, read as the type its length modifier and conversion say. */
static int format_number(char *out, size_t size, const char *spec, const char *mod, char conv,
                         va_list *ap)
{
	bool is_signed = conv == 'd' || conv == 'i';

	if (strchr("fFeEgGaA", conv))
		return strcmp(mod, "L") == 0 ? snprintf(out, size, spec, va_arg(*ap, long double))
		                             : snprintf(out, size, spec, va_arg(*ap, double));
	if (conv == 'p')
		return snprintf(out, size, spec, va_arg(*ap, void *));
	if (strcmp(mod, "ll") == 0)
		return is_signed ? snprintf(out, size, spec, va_arg(*ap, long long))
		                 : snprintf(out, size, spec, va_arg(*ap, unsigned long long));
	if (strcmp(mod, "l") == 0)
		return is_signed ? snprintf(out, size, spec, va_arg(*ap, long))
		                 : snprintf(out, size, spec, va_arg(*ap, unsigned long));
	if (strcmp(mod, "z") == 0)
		return is_signed ? snprintf(out, size, spec, va_arg(*ap, ssize_t))
		                 : snprintf(out, size, spec, va_arg(*ap, size_t));
	if (strcmp(mod, "j") == 0)
		return is_signed ? snprintf(out, size, spec, va_arg(*ap, intmax_t))
		                 : snprintf(out, size, spec, va_arg(*ap, uintmax_t));
	if (strcmp(mod, "t") == 0)
		return snprintf(out, size, spec, va_arg(*ap, ptrdiff_t));
	/* hh, h and none: promoted to int */
	return is_signed ? snprintf(out, size, spec, va_arg(*ap, int))
	                 : snprintf(out, size, spec, va_arg(*ap, unsigned int));
}
#pragma GCC diagnostic pop

/* Reads a width or precision: digits, or `*` taking an int argument. */
static int read_count(const char **f, va_list *ap, bool *given)
{
	int v = 0;

	*given = false;
	if (**f == '*') {
		(*f)++;
		*given = true;
		return va_arg(*ap, int);
	}
	while (**f >= '0' && **f <= '9') {
		*given = true;
		v = v * 10 + (*(*f)++ - '0');
		if (v > 100000)
			v = 100000;
	}
	return v;
}

/* Walks fmt: literal text as it is, each conversion through put_value. */
static void format_fields(struct line *l, const char *fmt, va_list *ap, int saved_errno)
{
	const char *f = fmt;

	while (*f && !l->full) {
		const char *pct = strchr(f, '%');
		if (!pct) {
			put(l, f, strlen(f));
			return;
		}
		put(l, f, (size_t)(pct - f));
		bool in_quotes = pct > fmt && pct[-1] == '"';
		f = pct + 1;
		if (*f == '%') {
			put(l, "%", 1);
			f++;
			continue;
		}
		char spec[64], mod[3] = "", out[512];
		size_t sn = 0;
		bool has_w, has_p;
		spec[sn++] = '%';
		while (*f && strchr("-+ #0'", *f) && sn < 8)
			spec[sn++] = *f++;
		int width = read_count(&f, ap, &has_w);
		int prec = -1;
		if (*f == '.') {
			f++;
			prec = read_count(&f, ap, &has_p);
			if (!has_p)
				prec = 0; /* "." alone */
			else if (prec < 0)
				prec = -1; /* a negative `*`: as if none were given */
		}
		for (size_t m = 0; m < 2 && *f && strchr("hlzjtL", *f); m++)
			mod[m] = *f++;
		char conv = *f ? *f++ : '\0';
		if (has_w)
			sn += (size_t)snprintf(spec + sn, sizeof(spec) - sn, "%d", width);
		if (prec >= 0)
			sn += (size_t)snprintf(spec + sn, sizeof(spec) - sn, ".%d", prec);
		snprintf(spec + sn, sizeof(spec) - sn, "%s%c", mod, conv);
		in_quotes = in_quotes && *f == '"';

		if (conv == 's' || conv == 'm') {
			const char *s =
			    conv == 'm' ? strerror(saved_errno) : va_arg(*ap, const char *);
			if (!s)
				s = "(null)";
			size_t len = prec >= 0 ? strnlen(s, (size_t)prec) : strlen(s);
			put_value(l, s, len, in_quotes);
		} else if (conv == 'c') {
			char ch = (char)va_arg(*ap, int);
			put_value(l, &ch, 1, in_quotes);
		} else if (conv && strchr("diouxXfFeEgGaAp", conv)) {
			int n = format_number(out, sizeof(out), spec, mod, conv, ap);
			if (n > 0)
				put_value(l, out,
				          (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1,
				          in_quotes);
		} else {
			/* %n or an unknown conversion: the compiler's format check
			 * refuses both, and the arguments cannot be read past it. */
			put(l, "(bad format)", 12);
			return;
		}
	}
}

void iso_log(enum iso_log_level level, const char *event, const char *fmt, ...)
{
	int saved_errno = errno;
	struct line l = {.n = 0};
	char ts[32];
	va_list ap;

	/* Debug lines cost a getenv only when asked for; no global switch. */
	if (level == ISO_LOG_DEBUG && !getenv("ISOSTACK_DEBUG"))
		return;
	iso_format_time(iso_now_ms(), ts, sizeof(ts));
	put(&l, ts, strlen(ts));
	put(&l, " level=", 7);
	put(&l, level_names[level], strlen(level_names[level]));
	put(&l, " event=", 7);
	put_value(&l, event, strlen(event), false);
	put(&l, " ", 1);
	va_start(ap, fmt);
	format_fields(&l, fmt, &ap, saved_errno);
	va_end(ap);
	finish(&l);
	/* One write per line keeps lines whole when threads log at once. */
	l.buf[l.n] = '\n';
	fwrite(l.buf, 1, l.n + 1, stderr);
	errno = saved_errno;
}
