/* header.c: the term and generation a partitions.conf written by the SM
 * host's agent carries, and the rule by which the agent refuses a document
 * from a stale leader (include/isostack/smfile.h). The header is the first
 * line of the file itself, so a restarted agent that lost its state dir
 * still cannot be made to write a lower term over a higher one. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "isostack/smfile.h"

#define PREFIX "# isostack term "
#define MIDDLE " generation "
#define SUFFIX ": do not edit; written by isostack-agent"

int iso_sm_header_format(char *buf, size_t size, const struct iso_sm_mark *m)
{
	int n = snprintf(buf, size, PREFIX "%" PRIu64 MIDDLE "%" PRIu64 SUFFIX "\n", m->term,
	                 m->generation);

	return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

/* A decimal number at *p, at most `max`, without sign or leading zero. */
static bool number(const char **p, const char *end, uint64_t max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s == end || *s < '0' || *s > '9' ||
	    (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9'))
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*out = v;
	return true;
}

static bool literal(const char **p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0)
		return false;
	*p += n;
	return true;
}

int iso_sm_header_parse(const char *name, const char *text, size_t len, struct iso_sm_mark *m,
                        bool *has, size_t *body_off, struct iso_error *err)
{
	const char *nl = memchr(text, '\n', len), *end = nl ? nl : text + len, *p = text;
	struct iso_sm_mark v = {0};

	*m = (struct iso_sm_mark){0};
	*has = false;
	*body_off = 0;
	if ((size_t)(end - text) < strlen("# isostack term") ||
	    memcmp(text, "# isostack term", strlen("# isostack term")) != 0)
		return 0;
	if (!literal(&p, end, PREFIX) || !number(&p, end, ISO_SM_TERM_MAX, &v.term))
		return iso_error_set(err, ISO_E_INVALID, "header",
		                     "%s:1: header: expected \"" PREFIX
		                     "T\" with T a decimal term 0..%llu",
		                     name, (unsigned long long)ISO_SM_TERM_MAX);
	if (!literal(&p, end, MIDDLE) || !number(&p, end, ISO_SM_GEN_MAX, &v.generation))
		return iso_error_set(err, ISO_E_INVALID, "header",
		                     "%s:1: header: expected \"" MIDDLE
		                     "G\" after the term, G a decimal generation",
		                     name);
	if (!literal(&p, end, SUFFIX) || p != end)
		return iso_error_set(err, ISO_E_INVALID, "header",
		                     "%s:1: header: expected \"" SUFFIX
		                     "\" and the end of the line after the generation",
		                     name);
	if (!nl)
		return iso_error_set(err, ISO_E_INVALID, "header",
		                     "%s:1: header: the line does not end (no newline)", name);
	*m = v;
	*has = true;
	*body_off = (size_t)(nl + 1 - text);
	return 0;
}

int iso_sm_accept(const struct iso_sm_mark *highest, const struct iso_sm_mark *doc,
                  struct iso_error *err)
{
	if (doc->term < highest->term)
		return iso_error_set(err, ISO_E_CONFLICT, "term",
		                     "term %" PRIu64 " is below term %" PRIu64
		                     " (generation %" PRIu64
		                     ") already written: a stale leader's document, refused",
		                     doc->term, highest->term, highest->generation);
	if (doc->term == highest->term && doc->generation < highest->generation)
		return iso_error_set(err, ISO_E_CONFLICT, "generation",
		                     "generation %" PRIu64 " of term %" PRIu64
		                     " is below generation %" PRIu64
		                     " already written under that term: refused",
		                     doc->generation, doc->term, highest->generation);
	return doc->term == highest->term && doc->generation == highest->generation ? 1 : 0;
}

struct iso_sm_mark iso_sm_mark_max(struct iso_sm_mark a, struct iso_sm_mark b)
{
	if (a.term != b.term)
		return a.term > b.term ? a : b;
	return a.generation >= b.generation ? a : b;
}

int iso_sm_text_check(const char *field, const char *text, size_t len, struct iso_error *err)
{
	int line = 1;
	bool bol = true;

	if (len == 0 || len > ISO_SM_TEXT_MAX)
		return iso_error_set(err, ISO_E_INVALID, field, "%s: %zu bytes (1..%u)", field, len,
		                     ISO_SM_TEXT_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)text[i];

		if (bol && len - i >= strlen("# isostack term") &&
		    memcmp(text + i, "# isostack term", strlen("# isostack term")) == 0)
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: line %d starts \"# isostack term\": only the "
			                     "agent writes the header",
			                     field, line);
		if (ch == '\n') {
			line++;
			bol = true;
			continue;
		}
		bol = false;
		if (ch != '\t' && (ch < 0x20 || ch > 0x7e))
			return iso_error_set(err, ISO_E_INVALID, field,
			                     "%s: line %d holds byte 0x%02x (printable ASCII, tabs "
			                     "and newlines only)",
			                     field, line, ch);
	}
	if (text[len - 1] != '\n')
		return iso_error_set(err, ISO_E_INVALID, field,
		                     "%s: line %d does not end in a newline", field, line);
	return 0;
}
