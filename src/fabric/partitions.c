/* partitions.c: OpenSM's partitions.conf, written and read back. A file that
 * OpenSM cannot parse does not fail loudly: OpenSM logs "retrying with
 * default config" and makes every port a full member of 0x7fff, which
 * flattens every tenant's isolation at once. So the renderer writes one
 * canonical form, and the parser mirrors OpenSM's grammar
 * (opensm/osm_prtn_config.c: keywords by prefix, strtoul/strtoull base 0,
 * rules spanning lines) but refuses everything OpenSM would refuse, warn
 * about, or read differently from what its author meant. The driver never
 * writes a file this parser rejects. Grammar: docs/reference-fabric.md. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "isostack/fabric.h"

/* OpenSM reads lines with fgets(line, 4095): a longer line is split in two
 * and the second half parsed as a new rule. */
#define OSM_LINE_MAX    4094
#define RENDER_PER_LINE 8
#define PART_NAME_MAX   63

/* ---- rendering ---- */

static bool render_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PART_NAME_MAX || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!isalnum(c) && c != '_' && c != '-' && c != '.')
			return false;
	}
	return true;
}

static void render_members(FILE *f, const struct iso_partition *p, int already)
{
	int on_line = already;

	for (int m = 0; m < p->n_members; m++) {
		if (on_line == RENDER_PER_LINE) {
			/* A rule continues after a trailing comma; OpenSM refuses a
			 * line that starts with ';', so the last member always
			 * carries the ';'. */
			fputs(",\n\t", f);
			on_line = 0;
		} else if (on_line > 0) {
			fputs(", ", f);
		}
		fprintf(f, "0x%016" PRIx64 "=%s", p->members[m].guid,
		        p->members[m].membership == ISO_MEMBER_FULL ? "full" : "limited");
		on_line++;
	}
}

static int cmp_guid(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_name_idx(const void *a, const void *b, void *ctx)
{
	const struct iso_partition *parts = ctx;

	return strcmp(parts[*(const int *)a].name, parts[*(const int *)b].name);
}

/* A GUID listed twice in one partition: OpenSM keeps the last membership, so
 * the parser refuses it, and the renderer must not write it. Members are
 * meant to be sorted, which makes this one pass; unsorted ones are sorted
 * in a copy. 0 when unique, 1 with *dup set, or -ENOMEM. */
static int find_dup_member(const struct iso_partition *p, uint64_t *dup)
{
	_cleanup_free_ uint64_t *g = NULL;
	bool sorted = true;

	for (int m = 1; m < p->n_members && sorted; m++)
		sorted = p->members[m - 1].guid < p->members[m].guid;
	if (sorted)
		return 0;
	g = malloc(sizeof(*g) * (size_t)p->n_members);
	if (!g)
		return -ENOMEM;
	for (int m = 0; m < p->n_members; m++)
		g[m] = p->members[m].guid;
	qsort(g, (size_t)p->n_members, sizeof(*g), cmp_guid);
	for (int m = 1; m < p->n_members; m++)
		if (g[m - 1] == g[m]) {
			*dup = g[m];
			return 1;
		}
	return 0;
}

/* Refuses, before a byte is written, every intent whose rendering our parser
 * (and so OpenSM's grammar) would refuse or read differently: the renderer
 * and the parser agree (tests/fuzz/fuzz_partitions.c checks it). */
static int render_check(const struct iso_fabric_intent *in, struct iso_error *err)
{
	_cleanup_free_ uint8_t *seen = calloc(ISO_PKEY_DEFAULT + 1, 1);
	_cleanup_free_ int *order = malloc(sizeof(int) * (size_t)(in->n_parts + 1));
	bool have_default = false;

	if (!seen || !order)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	for (int i = 0; i < in->n_parts; i++) {
		const struct iso_partition *p = &in->parts[i];
		uint64_t dup;
		int r;

		order[i] = i;
		if (!render_name_ok(p->name))
			return iso_error_set(err, ISO_E_INVALID, "partitions",
			                     "partition %d: name '%s' is not 1-%d of "
			                     "[A-Za-z0-9_.-] starting with a non-digit",
			                     i, p->name, PART_NAME_MAX);
		if (p->kind == ISO_PART_DEFAULT) {
			if (have_default || p->pkey != ISO_PKEY_DEFAULT ||
			    strcmp(p->name, "Default") != 0)
				return iso_error_set(err, ISO_E_INVALID, "partitions",
				                     "partition '%s': the Default partition is "
				                     "named Default, is 0x7fff and appears once",
				                     p->name);
			have_default = true;
		} else if (p->pkey == 0 || p->pkey >= ISO_PKEY_DEFAULT) {
			return iso_error_set(err, ISO_E_INVALID, "partitions",
			                     "partition '%s': P_Key 0x%04x is not in "
			                     "0x0001..0x7ffe",
			                     p->name, p->pkey);
		}
		if (seen[p->pkey])
			return iso_error_set(err, ISO_E_INVALID, "partitions",
			                     "partition '%s': P_Key 0x%04x is used twice", p->name,
			                     p->pkey);
		seen[p->pkey] = 1;
		for (int m = 0; m < p->n_members; m++)
			if (p->members[m].guid == 0)
				return iso_error_set(err, ISO_E_INVALID, "partitions",
				                     "partition '%s': member %d has GUID 0",
				                     p->name, m);
		r = find_dup_member(p, &dup);
		if (r < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
		if (r > 0)
			return iso_error_set(
			    err, ISO_E_INVALID, "partitions",
			    "partition '%s': GUID 0x%016" PRIx64 " is listed twice", p->name, dup);
	}
	qsort_r(order, (size_t)in->n_parts, sizeof(*order), cmp_name_idx, (void *)in->parts);
	for (int i = 1; i < in->n_parts; i++)
		if (strcmp(in->parts[order[i]].name, in->parts[order[i - 1]].name) == 0)
			return iso_error_set(err, ISO_E_INVALID, "partitions",
			                     "two partitions are named '%s'",
			                     in->parts[order[i]].name);
	if (!have_default)
		return iso_error_set(err, ISO_E_INVALID, "partitions",
		                     "the intent has no Default partition (0x7fff): without "
		                     "it OpenSM would not give every port 0x7fff for SA "
		                     "traffic");
	return 0;
}

int iso_partitions_render(const struct iso_fabric_intent *in, char **out, struct iso_error *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	r = render_check(in, err);
	if (r < 0)
		return r;
	f = open_memstream(&buf, &len);
	if (!f)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	fprintf(f, "# isostack generation %" PRIu64 ": do not edit; written by isostackd\n",
	        in->generation);
	for (int i = 0; i < in->n_parts; i++) {
		const struct iso_partition *p = &in->parts[i];

		fprintf(f, "%s=0x%04x%s%s : ", p->name, p->pkey, p->ipoib ? ", ipoib" : "",
		        p->indx0 ? ", indx0" : "");
		if (p->kind == ISO_PART_DEFAULT) {
			/* SA traffic needs every port in 0x7fff; only the SM full. */
			fputs("ALL=limited, SELF=full", f);
			render_members(f, p, 2);
		} else if (p->n_members == 0) {
			/* OpenSM drops an empty partition; NONE says so in words. */
			fputs("NONE", f);
		} else {
			render_members(f, p, 0);
		}
		fputs(" ;\n", f);
	}
	if (fclose(f) != 0 || !buf)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	*out = ISO_TAKE(buf);
	return 0;
}

/* ---- parsing ---- */

struct pctx {
	const char *name;
	struct iso_error *err;
	int line;
	struct iso_partitions_file *out;
	int cap;
	/* the open rule */
	int cur;       /* index in out->parts.parts, -1 when none */
	int cur_line;  /* where it started */
	int defmember; /* ISO_MEMBER_* */
	int cap_members;
	int *lines; /* per part: the line of its header */
};

static int pfail(struct pctx *c, const char *fmt, ...) _printf_(2, 3);
static int pfail(struct pctx *c, const char *fmt, ...)
{
	char msg[ISO_ERR_MSG_MAX] = "";
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
		msg[0] = '\0';
	va_end(ap);
	return iso_error_set(c->err, ISO_E_INVALID, "", "%s:%d: %s", c->name, c->line, msg);
}

/* OpenSM matches keywords by prefix: strncmp(word, KEYWORD, strlen(word)). */
static bool prefix_of(const char *word, const char *keyword)
{
	return word[0] && strncmp(word, keyword, strlen(word)) == 0;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	return s;
}

/* Splits "name=value" at the first '='; *val is NULL without one. */
static void split_eq(char *tok, char **name, char **val)
{
	char *q = strchr(tok, '=');

	*val = NULL;
	if (q) {
		*q = '\0';
		*val = trim(q + 1);
	}
	*name = trim(tok);
}

/* An unsigned number as strtoul base 0 reads it, refusing what strtoul would
 * silently accept: signs, leading blanks, trailing text, overflow. Octal
 * (a leading 0) is refused: nobody writing "0100" means 64. */
static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	if (s[0] == '0' && s[1] && s[1] != 'x' && s[1] != 'X')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static struct iso_partition *cur_part(struct pctx *c)
{
	return &c->out->parts.parts[c->cur];
}

/* A multicast-group or IPoIB broadcast-group flag (parse_group_flag).
 * Returns 1 when `flag` is one, 0 when not, negative on a bad value. */
static int group_flag(struct pctx *c, const char *flag, const char *val)
{
	static const struct {
		const char *kw;
		uint64_t min, max;
	} kws[] = {
	    /* OpenSM's order, which decides what a short prefix means. */
	    {"mtu", 1, 5},
	    {"rate", 2, 23},
	    {"scope", 1, 15},
	    {"Q_Key", 1, UINT32_MAX},
	    {"TClass", 1, 255},
	    {"sl", 0, 15},
	    {"FlowLabel", 0, 0xfffff},
	};
	uint64_t v;

	for (size_t i = 0; i < ISO_ARRAY_SIZE(kws); i++) {
		if (!prefix_of(flag, kws[i].kw))
			continue;
		if (!val || !val[0])
			return pfail(c, "flag '%s' needs a value", kws[i].kw);
		if (parse_uint(val, kws[i].max, &v) < 0 || v < kws[i].min)
			return pfail(c, "flag '%s': '%s' is not a number in %" PRIu64 "..%" PRIu64,
			             kws[i].kw, val, kws[i].min, kws[i].max);
		return 1;
	}
	return 0;
}

static int grow_parts(struct pctx *c)
{
	struct iso_fabric_intent *in = &c->out->parts;
	int cap = c->cap ? c->cap * 2 : 8;
	struct iso_partition *np;
	int8_t *a, *b, *s;
	int *ln;

	np = realloc(in->parts, (size_t)cap * sizeof(*np));
	if (!np)
		return -ENOMEM;
	in->parts = np;
	a = realloc(c->out->all, (size_t)cap);
	if (!a)
		return -ENOMEM;
	c->out->all = a;
	b = realloc(c->out->all_cas, (size_t)cap);
	if (!b)
		return -ENOMEM;
	c->out->all_cas = b;
	s = realloc(c->out->self, (size_t)cap);
	if (!s)
		return -ENOMEM;
	c->out->self = s;
	ln = realloc(c->lines, (size_t)cap * sizeof(*ln));
	if (!ln)
		return -ENOMEM;
	c->lines = ln;
	c->cap = cap;
	return 0;
}

static int parse_header(struct pctx *c, char *hdr)
{
	struct iso_fabric_intent *in = &c->out->parts;
	char *tok, *save = NULL, *name, *id;
	struct iso_partition *p;
	uint64_t pkey;
	int r;

	tok = strtok_r(hdr, ",", &save);
	if (!tok)
		tok = hdr + strlen(hdr);
	split_eq(tok, &name, &id);
	if (!id && isdigit((unsigned char)name[0])) {
		/* OpenSM: a header that starts with a digit is the P_Key. */
		id = name;
		name = "";
	}
	if (!id || !id[0])
		return pfail(c,
		             "partition '%s' has no P_Key (write NAME=0xKEY; OpenSM would "
		             "pick one itself)",
		             name);
	if (parse_uint(id, 0xffff, &pkey) < 0)
		return pfail(c, "partition '%s': bad P_Key '%s' (expected 0x0001..0x7fff)", name,
		             id);
	pkey &= ISO_PKEY_BASE_MASK;
	if (pkey == 0)
		return pfail(c, "partition '%s': P_Key 0 is not a partition", name);
	if (strlen(name) > PART_NAME_MAX)
		return pfail(c, "partition name '%.20s...' is longer than %d bytes", name,
		             PART_NAME_MAX);
	for (const char *s = name; *s; s++)
		if (isspace((unsigned char)*s) || *s == ':')
			return pfail(c, "partition name '%s' contains a blank", name);
	if (pkey == ISO_PKEY_DEFAULT && strcmp(name, "Default") != 0)
		return pfail(c, "P_Key 0x7fff belongs to the partition named Default, not '%s'",
		             name);
	if (strcmp(name, "Default") == 0 && pkey != ISO_PKEY_DEFAULT)
		return pfail(c, "the Default partition is 0x7fff, not 0x%04" PRIx64, pkey);
	for (int i = 0; i < in->n_parts; i++) {
		if (in->parts[i].pkey == pkey)
			return pfail(c, "P_Key 0x%04" PRIx64 " is already partition '%s' (line %d)",
			             pkey, in->parts[i].name, c->lines[i]);
		if (name[0] && strcmp(in->parts[i].name, name) == 0)
			return pfail(c, "partition name '%s' is already used (line %d)", name,
			             c->lines[i]);
	}

	if (in->n_parts == c->cap && grow_parts(c) < 0)
		return iso_error_set(c->err, ISO_E_INTERNAL, "", "out of memory");
	c->cur = in->n_parts++;
	p = cur_part(c);
	memset(p, 0, sizeof(*p));
	c->out->all[c->cur] = c->out->all_cas[c->cur] = c->out->self[c->cur] = -1;
	c->lines[c->cur] = c->line;
	c->cur_line = c->line;
	c->defmember = ISO_MEMBER_LIMITED;
	c->cap_members = 0;
	p->pkey = (uint16_t)pkey;
	if (name[0])
		iso_strlcpy(p->name, name, sizeof(p->name));
	else
		snprintf(p->name, sizeof(p->name), "%04" PRIx64, pkey);
	if (pkey == ISO_PKEY_DEFAULT) {
		p->kind = ISO_PART_DEFAULT;
	} else if (strncmp(p->name, "svc_", 4) == 0) {
		p->kind = ISO_PART_SERVICE;
	} else {
		p->kind = ISO_PART_TENANT;
		iso_strlcpy(p->tenant, strncmp(p->name, "t_", 2) == 0 ? p->name + 2 : p->name,
		            sizeof(p->tenant));
	}

	while ((tok = strtok_r(NULL, ",", &save))) {
		char *flag, *val;

		split_eq(tok, &flag, &val);
		if (!flag[0])
			return pfail(c, "partition '%s': empty flag", p->name);
		r = group_flag(c, flag, val);
		if (r < 0)
			return r;
		if (r > 0)
			continue;
		if (prefix_of(flag, "ipoib") || prefix_of(flag, "indx0")) {
			if (val)
				return pfail(c, "flag '%s' takes no value", flag);
			if (prefix_of(flag, "ipoib"))
				p->ipoib = true;
			else
				p->indx0 = true;
		} else if (prefix_of(flag, "defmember")) {
			if (!val || !val[0])
				return pfail(c, "flag 'defmember' needs full or limited");
			if (prefix_of(val, "full"))
				c->defmember = ISO_MEMBER_FULL;
			else if (prefix_of(val, "limited"))
				c->defmember = ISO_MEMBER_LIMITED;
			else if (prefix_of(val, "both"))
				return pfail(c, "defmember=both needs allow_both_pkeys, which "
				                "isostack does not use");
			else
				return pfail(c, "defmember '%s': expected full or limited", val);
		} else {
			return pfail(c, "partition '%s': unknown flag '%s' (OpenSM ignores it)",
			             p->name, flag);
		}
	}
	return 0;
}

static int add_member(struct pctx *c, uint64_t guid, int m)
{
	struct iso_partition *p = cur_part(c);

	for (int i = 0; i < p->n_members; i++)
		if (p->members[i].guid == guid)
			return pfail(c,
			             "partition '%s': GUID 0x%016" PRIx64
			             " is listed twice (OpenSM keeps the last)",
			             p->name, guid);
	if (p->n_members == c->cap_members) {
		int cap = c->cap_members ? c->cap_members * 2 : 16;
		struct iso_fabric_member *nm = realloc(p->members, (size_t)cap * sizeof(*nm));
		if (!nm)
			return iso_error_set(c->err, ISO_E_INTERNAL, "", "out of memory");
		p->members = nm;
		c->cap_members = cap;
	}
	p->members[p->n_members].guid = guid;
	p->members[p->n_members].membership = (enum iso_pkey_membership)m;
	p->n_members++;
	return 0;
}

static int parse_port(struct pctx *c, char *tok)
{
	struct iso_partition *p = cur_part(c);
	char *name, *flag;
	int m = c->defmember;
	uint64_t guid;

	split_eq(tok, &name, &flag);
	if (!name[0]) {
		if (flag)
			return pfail(c, "partition '%s': '=%s' without a port", p->name, flag);
		return 0; /* ", ," and a trailing comma: OpenSM skips them */
	}
	if (prefix_of(name, "NONE"))
		return 0;
	if (flag) {
		if (prefix_of(flag, "full"))
			m = ISO_MEMBER_FULL;
		else if (prefix_of(flag, "limited"))
			m = ISO_MEMBER_LIMITED;
		else if (prefix_of(flag, "both"))
			return pfail(
			    c, "%s=both needs allow_both_pkeys, which isostack does not use", name);
		else
			return pfail(c,
			             "partition '%s': membership '%s' of %s is not full or "
			             "limited",
			             p->name, flag, name);
	}
	/* OpenSM's order: ALL before ALL_CAS, so "AL" means ALL. */
	if (prefix_of(name, "ALL")) {
		c->out->all[c->cur] = (int8_t)m;
		return 0;
	}
	if (prefix_of(name, "ALL_CAS")) {
		c->out->all_cas[c->cur] = (int8_t)m;
		return 0;
	}
	if (prefix_of(name, "ALL_SWITCHES") || prefix_of(name, "ALL_ROUTERS"))
		return 0;
	if (prefix_of(name, "SELF")) {
		c->out->self[c->cur] = (int8_t)m;
		return 0;
	}
	if (parse_uint(name, UINT64_MAX, &guid) < 0 || guid == 0)
		return pfail(c,
		             "partition '%s': bad port GUID '%s' (expected 0x followed by "
		             "up to 16 hex digits, or ALL, ALL_CAS, ALL_SWITCHES, "
		             "ALL_ROUTERS, SELF, NONE)",
		             p->name, name);
	return add_member(c, guid, m);
}

/* mgid=GID[,group flags]: consumes the rest of the segment, as OpenSM does. */
static int parse_mgid(struct pctx *c, char *val, char **save)
{
	unsigned char gid[16];
	char *tok;
	int r;

	if (!val || inet_pton(AF_INET6, val, gid) != 1 || gid[0] != 0xff)
		return pfail(c, "mgid '%s' is not a multicast GID (ff..::..)", val ? val : "");
	while ((tok = strtok_r(NULL, ",", save))) {
		char *flag, *fval;

		split_eq(tok, &flag, &fval);
		if (!flag[0])
			return pfail(c, "mgid %s: empty flag", val);
		r = group_flag(c, flag, fval);
		if (r < 0)
			return r;
		if (r == 0)
			return pfail(c, "mgid %s: unknown flag '%s'", val, flag);
	}
	return 0;
}

static int parse_body(struct pctx *c, char *body)
{
	char *tok, *save = NULL;
	int r;

	for (tok = strtok_r(body, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *t = trim(tok);
		size_t n = strcspn(t, "= \t");

		/* OpenSM compares the whole name with "mgid", not a prefix. */
		if (n == 4 && strncmp(t, "mgid", 4) == 0) {
			char *name, *val;

			split_eq(t, &name, &val);
			if (strcmp(name, "mgid") == 0)
				return parse_mgid(c, val, &save);
		}
		r = parse_port(c, t);
		if (r < 0)
			return r;
	}
	return 0;
}

static int close_rule(struct pctx *c)
{
	c->cur = -1;
	return 0;
}

/* One line, '#' comment already cut. */
static int parse_line(struct pctx *c, char *s)
{
	int r;

	for (const char *q = s; *q; q++)
		if ((unsigned char)*q < 0x20 && *q != '\t')
			return pfail(c, "control character 0x%02x", (unsigned char)*q);
		else if ((unsigned char)*q >= 0x7f)
			return pfail(c, "byte 0x%02x is not ASCII", (unsigned char)*q);

	s = trim(s);
	if (c->cur >= 0 && s[0] == ';')
		/* Measured on OpenSM 3.3.23: a ';' that starts a line inside a
		 * rule is "no partition definition found" and flattens. */
		return pfail(c,
		             "';' starts a line inside the rule of '%s' (line %d): OpenSM "
		             "refuses it; end the last member's line with ';'",
		             cur_part(c)->name, c->cur_line);
	while (*s) {
		char *semi = strchr(s, ';'), *next = NULL;

		if (semi) {
			*semi = '\0';
			next = semi + 1;
		}
		if (c->cur < 0) {
			char *colon = strchr(s, ':');

			if (!colon)
				return pfail(c, "no partition definition found (expected "
				                "NAME=PKEY[,flags] : members ;)");
			*colon = '\0';
			r = parse_header(c, s);
			if (r < 0)
				return r;
			s = colon + 1;
		}
		r = parse_body(c, s);
		if (r < 0)
			return r;
		if (!next)
			break;
		close_rule(c);
		s = trim(next);
	}
	return 0;
}

static int cmp_member(const void *a, const void *b)
{
	const struct iso_fabric_member *x = a, *y = b;

	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

int iso_partitions_parse(const char *name, const char *text, size_t len,
                         struct iso_partitions_file *out, struct iso_error *err)
{
	struct iso_partitions_file f = {0};
	struct pctx c = {.name = name, .err = err, .out = &f, .cur = -1};
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ int *lines = NULL;
	char *line, *save = NULL;
	bool have_default = false;
	int r = 0;

	const char *nul = memchr(text, '\0', len);
	if (nul) {
		for (const char *q = text; q < nul; q++)
			c.line += *q == '\n';
		c.line++;
		return pfail(&c, "NUL byte");
	}
	buf = malloc(len + 1);
	if (!buf)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	memcpy(buf, text, len);
	buf[len] = '\0';

	/* strsep rather than strtok: empty lines still count. */
	save = buf;
	while ((line = strsep(&save, "\n"))) {
		char *hash;

		c.line++;
		if (strlen(line) + (save ? 1 : 0) > OSM_LINE_MAX) {
			r = pfail(&c,
			          "line is %zu bytes; OpenSM reads at most %d and would parse the "
			          "rest as a new rule",
			          strlen(line) + 1, OSM_LINE_MAX);
			break;
		}
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		r = parse_line(&c, line);
		if (r < 0)
			break;
		if (!save)
			break;
	}
	lines = c.lines;
	if (r == 0 && c.cur >= 0) {
		c.line = c.cur_line;
		r = pfail(&c, "the rule of '%s' is not closed with ';'", cur_part(&c)->name);
	}
	for (int i = 0; r == 0 && i < f.parts.n_parts; i++)
		if (f.parts.parts[i].pkey == ISO_PKEY_DEFAULT)
			have_default = true;
	if (r == 0 && !have_default) {
		c.line = 1;
		r = pfail(&c, "no Default=0x7fff rule: OpenSM would then make every port a "
		              "limited member of 0x7fff (write Default=0x7fff, ipoib : "
		              "ALL=limited, SELF=full ;)");
	}
	if (r < 0) {
		iso_partitions_file_clear(&f);
		return r;
	}
	for (int i = 0; i < f.parts.n_parts; i++) {
		struct iso_partition *p = &f.parts.parts[i];
		if (p->n_members > 1)
			qsort(p->members, (size_t)p->n_members, sizeof(*p->members), cmp_member);
	}
	*out = f;
	return 0;
}

void iso_partitions_file_clear(struct iso_partitions_file *f)
{
	iso_fabric_intent_clear(&f->parts);
	free(f->all);
	free(f->all_cas);
	free(f->self);
	memset(f, 0, sizeof(*f));
}
