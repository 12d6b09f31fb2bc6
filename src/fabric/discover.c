/* discover.c: reads what `ibnetdiscover` prints (its default topology
 * format, the same one ibsim reads) and turns the channel adapters into
 * inventory `nodes:` entries, so that an operator starts the inventory from
 * the fabric's real port GUIDs instead of typing them. The reader is strict:
 * a line that is not part of the format is an error naming the line, since a
 * silently skipped CA would be a node missing from the inventory. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "isostack/fabric.h"

enum rec { REC_NONE, REC_SWITCH, REC_CA, REC_ROUTER };

struct reader {
	const char *name;
	int line;
	struct iso_discovered *d;
	int cap_cas;
	enum rec rec;               /* the record being read */
	int rec_line;               /* its header line */
	int rec_ports;              /* its port count */
	uint64_t rec_ports_seen[4]; /* bitmap of port numbers 0-255 already given */
	int keys_line;   /* first `key=value` line not yet followed by a header, 0: none */
	uint64_t caguid; /* from a caguid= line before the header, 0: none */
	struct iso_error *err;
};

static int bad(struct reader *r, const char *fmt, ...) _printf_(2, 3);
static int bad(struct reader *r, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return iso_error_set(r->err, ISO_E_INVALID, "", "%s:%d: %s", r->name, r->line, msg);
}

void iso_discovered_free(struct iso_discovered *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->n_cas; i++)
		free(d->cas[i].ports);
	free(d->cas);
	free(d);
}

/* Hex digits (1-16, optional 0x) up to `end`; *s advanced past them. */
static bool hex_u64(const char **s, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	int n = 0;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	for (; isxdigit((unsigned char)*p); p++, n++) {
		if (n == 16)
			return false;
		v = v << 4 |
		    (uint64_t)(isdigit((unsigned char)*p) ? *p - '0'
		                                          : tolower((unsigned char)*p) - 'a' + 10);
	}
	if (n == 0)
		return false;
	*s = p;
	*out = v;
	return true;
}

/* A decimal number in [min, max]; *s advanced past it. */
static bool dec_int(const char **s, int min, int max, int *out)
{
	const char *p = *s;
	long v = 0;

	if (!isdigit((unsigned char)*p))
		return false;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (*p - '0');
		if (v > max)
			return false;
	}
	if (v < min)
		return false;
	*s = p;
	*out = (int)v;
	return true;
}

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* `"text"`: *s advanced past the closing quote; the text in [*a, *b). */
static bool quoted(const char **s, const char **a, const char **b)
{
	const char *p = *s, *e;

	if (*p != '"')
		return false;
	e = strchr(p + 1, '"');
	if (!e)
		return false;
	*a = p + 1;
	*b = e;
	*s = e + 1;
	return true;
}

static int end_record(struct reader *r)
{
	if (r->rec == REC_CA && r->d->cas[r->d->n_cas - 1].n_ports == 0) {
		r->line = r->rec_line;
		return bad(r, "truncated record: Ca without port lines");
	}
	r->rec = REC_NONE;
	return 0;
}

/* vendid=, devid=, sysimgguid=, switchguid=, caguid=, rtguid=: before a
 * header. Returns 1 when the line was one of them. */
static int key_line(struct reader *r, const char *s)
{
	static const char *const keys[] = {
	    "vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid="};
	uint64_t v;

	for (size_t k = 0; k < ISO_ARRAY_SIZE(keys); k++) {
		size_t n = strlen(keys[k]);
		const char *p = s + n;

		if (strncmp(s, keys[k], n) != 0)
			continue;
		if (r->rec != REC_NONE)
			return bad(r,
			           "%.*s inside a record (a blank line must end the record "
			           "before)",
			           (int)n - 1, s);
		if (!hex_u64(&p, &v))
			return bad(r, "%.*s: expected a hex number", (int)n - 1, s);
		/* switchguid=0x...(0x...) gives the port-0 GUID in parentheses. */
		if (*p == '(') {
			uint64_t w;
			p++;
			if (!hex_u64(&p, &w) || *p++ != ')')
				return bad(r, "%.*s: bad (GUID) after the value", (int)n - 1, s);
		}
		if (*skip_ws(p) != '\0')
			return bad(r, "%.*s: unexpected text after the value", (int)n - 1, s);
		if (!r->keys_line)
			r->keys_line = r->line;
		if (strcmp(keys[k], "caguid=") == 0)
			r->caguid = v;
		return 1;
	}
	return 0;
}

static int add_ca(struct reader *r, uint64_t guid, const char *da, const char *db)
{
	struct iso_discovered *d = r->d;
	struct iso_discovered_ca *ca;

	if (d->n_cas == r->cap_cas) {
		int cap = r->cap_cas ? r->cap_cas * 2 : 64;
		struct iso_discovered_ca *p = realloc(d->cas, (size_t)cap * sizeof(*p));
		if (!p)
			return iso_error_set(r->err, ISO_E_INTERNAL, "", "out of memory");
		d->cas = p;
		r->cap_cas = cap;
	}
	ca = &d->cas[d->n_cas++];
	memset(ca, 0, sizeof(*ca));
	ca->node_guid = guid;
	ca->line = r->line;
	memcpy(ca->desc, da, (size_t)(db - da));
	ca->desc[db - da] = '\0';
	return 0;
}

/* `Switch N "S-guid" # "desc" ...`, `Ca N "H-guid" # "desc"`, `Rt ...`. */
static int header_line(struct reader *r, const char *s)
{
	static const struct {
		const char *word;
		enum rec rec;
		char prefix;
	} kinds[] = {{"Switch", REC_SWITCH, 'S'}, {"Ca", REC_CA, 'H'}, {"Rt", REC_ROUTER, 'R'}};
	const char *p, *a, *b, *da, *db;
	uint64_t guid;
	size_t k;
	int nports;

	for (k = 0; k < ISO_ARRAY_SIZE(kinds); k++) {
		size_t n = strlen(kinds[k].word);
		if (strncmp(s, kinds[k].word, n) == 0 && (s[n] == ' ' || s[n] == '\t'))
			break;
	}
	if (k == ISO_ARRAY_SIZE(kinds))
		return 0;
	if (r->rec != REC_NONE)
		return bad(r, "%s header inside a record (a blank line must end the record before)",
		           kinds[k].word);
	p = skip_ws(s + strlen(kinds[k].word));
	if (!dec_int(&p, 1, 255, &nports))
		return bad(r, "%s: port count must be 1-255", kinds[k].word);
	p = skip_ws(p);
	if (!quoted(&p, &a, &b))
		return bad(r, "%s: expected the quoted node id (\"%c-GUID\")", kinds[k].word,
		           kinds[k].prefix);
	if (b - a < 3 || a[0] != kinds[k].prefix || a[1] != '-')
		return bad(r, "%s: node id \"%.*s\" is not \"%c-GUID\"", kinds[k].word,
		           (int)(b - a), a, kinds[k].prefix);
	const char *g = a + 2;
	if (!hex_u64(&g, &guid) || g != b || guid == 0)
		return bad(r, "%s: node id \"%.*s\" does not carry a GUID", kinds[k].word,
		           (int)(b - a), a);
	p = skip_ws(p);
	if (*p != '#')
		return bad(r, "%s: expected # \"node description\"", kinds[k].word);
	p = skip_ws(p + 1);
	/* The description runs to the last quote: it may hold quotes itself. */
	if (*p != '"' || !(db = strrchr(p, '"')) || db == p)
		return bad(r, "%s: expected # \"node description\"", kinds[k].word);
	da = p + 1;
	if (db - da > 64)
		return bad(r, "%s: node description longer than 64 characters", kinds[k].word);

	r->rec = kinds[k].rec;
	r->rec_line = r->line;
	r->rec_ports = nports;
	memset(r->rec_ports_seen, 0, sizeof(r->rec_ports_seen));
	if (r->rec == REC_SWITCH)
		r->d->n_switches++;
	if (r->rec == REC_CA) {
		if (r->caguid && r->caguid != guid)
			return bad(r,
			           "Ca: node id GUID 0x%016" PRIx64
			           " differs from caguid=0x%016" PRIx64,
			           guid, r->caguid);
		int rc = add_ca(r, guid, da, db);
		if (rc < 0)
			return rc;
	}
	r->keys_line = 0;
	r->caguid = 0;
	return 1;
}

/* `[N]` or `[N][ext M]`; returns the port number. */
static bool port_number(struct reader *r, const char **s, int *num)
{
	const char *p = *s;
	int ext;

	if (*p++ != '[' || !dec_int(&p, 0, r->rec_ports, num) || *p++ != ']')
		return false;
	if (strncmp(p, "[ext ", 5) == 0) {
		p += 5;
		if (!dec_int(&p, 0, 255, &ext) || *p++ != ']')
			return false;
	}
	*s = p;
	return true;
}

/* `"REMOTE"[M]`, optionally `(guid)` after it (switch lines). */
static bool remote(const char **s, bool with_guid)
{
	const char *p = *s, *a, *b;
	int m;
	uint64_t g;

	if (!quoted(&p, &a, &b) || a == b || *p++ != '[' || !dec_int(&p, 0, 255, &m))
		return false;
	if (strncmp(p, "][ext ", 6) == 0) {
		p += 6;
		if (!dec_int(&p, 0, 255, &m))
			return false;
	}
	if (*p++ != ']')
		return false;
	if (with_guid && *p == '(') {
		p++;
		if (!hex_u64(&p, &g) || *p++ != ')')
			return false;
	}
	*s = p;
	return true;
}

/* The port's own LID: the first "lid N" after the '#' of a CA port line. */
static int port_lid(const char *p)
{
	const char *h = strchr(p, '#'), *l;
	int lid;

	if (!h || !(l = strstr(h, "lid ")))
		return 0;
	l += 4;
	return dec_int(&l, 0, 0xffff, &lid) ? lid : 0;
}

static int port_line(struct reader *r, const char *s)
{
	struct iso_discovered_ca *ca;
	const char *p = s;
	uint64_t guid;
	int num;

	if (r->rec == REC_NONE)
		return bad(r, "port line outside a Switch/Ca record");
	if (!port_number(r, &p, &num))
		return bad(r, "bad port number (this record has %d ports)", r->rec_ports);
	if (num == 0 && r->rec != REC_SWITCH)
		return bad(r, "port 0 on a channel adapter");
	if (r->rec_ports_seen[num / 64] & (1ULL << (num % 64)))
		return bad(r, "port %d given twice", num);
	r->rec_ports_seen[num / 64] |= 1ULL << (num % 64);
	if (r->rec == REC_SWITCH) {
		p = skip_ws(p);
		if (!remote(&p, true))
			return bad(r, "expected \"REMOTE\"[PORT] after the port number");
		p = skip_ws(p);
		if (*p != '\0' && *p != '#')
			return bad(r, "unexpected text after the remote port");
		return 0;
	}
	/* CAs and routers: [N](portguid) "S-..."[M] # lid L lmc 0 "desc" lid L2 4xQDR */
	if (*p++ != '(' || !hex_u64(&p, &guid) || *p++ != ')' || guid == 0)
		return bad(r, "expected (PORT GUID) after the port number");
	p = skip_ws(p);
	if (!remote(&p, false))
		return bad(r, "expected \"REMOTE\"[PORT] after the port GUID");
	p = skip_ws(p);
	if (*p != '\0' && *p != '#')
		return bad(r, "unexpected text after the remote port");
	if (r->rec != REC_CA)
		return 0;

	ca = &r->d->cas[r->d->n_cas - 1];
	struct iso_discovered_port *np =
	    realloc(ca->ports, (size_t)(ca->n_ports + 1) * sizeof(*np));
	if (!np)
		return iso_error_set(r->err, ISO_E_INTERNAL, "", "out of memory");
	ca->ports = np;
	ca->ports[ca->n_ports++] = (struct iso_discovered_port){
	    .port_num = num, .guid = guid, .lid = (uint16_t)port_lid(p)};
	return 0;
}

static int one_line(struct reader *r, char *s)
{
	size_t n = strlen(s);
	int rc;

	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
			return bad(r, "control character in the line");
	if (n == 0) {
		if (r->keys_line && r->rec == REC_NONE) {
			r->line = r->keys_line;
			return bad(r, "truncated record: key lines without a node header");
		}
		return end_record(r);
	}
	if (s[0] == '#')
		return 0;
	if (s[0] == '[')
		return port_line(r, s);
	if ((rc = key_line(r, s)) != 0)
		return rc < 0 ? rc : 0;
	if ((rc = header_line(r, s)) != 0)
		return rc < 0 ? rc : 0;
	return bad(r, "unexpected line \"%.40s%s\" (not ibnetdiscover output?)", s,
	           n > 40 ? "..." : "");
}

int iso_fabric_discover_parse(const char *name, const char *text, size_t len,
                              struct iso_discovered **out, struct iso_error *err)
{
	_cleanup_(iso_discovered_freep) struct iso_discovered *d = calloc(1, sizeof(*d));
	struct reader r = {.name = name, .d = d, .err = err};
	_cleanup_free_ char *buf = NULL;
	size_t pos = 0;
	int rc;

	if (!d)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		for (const char *p = text; p < nul; p++)
			r.line += *p == '\n';
		r.line++;
		return bad(&r, "NUL byte in the input");
	}
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		char *p = realloc(buf, n + 1);

		if (!p)
			return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
		buf = p;
		memcpy(buf, text + pos, n);
		buf[n] = '\0';
		r.line++;
		rc = one_line(&r, buf);
		if (rc < 0)
			return rc;
		pos += n + (nl ? 1 : 0);
	}
	r.line++;
	if (r.keys_line && r.rec == REC_NONE) {
		r.line = r.keys_line;
		return bad(&r, "truncated record: key lines without a node header");
	}
	rc = end_record(&r);
	if (rc < 0)
		return rc;
	if (d->n_cas == 0) {
		r.line = len == 0 ? 1 : r.line - 1;
		return bad(&r, len == 0 ? "empty input: no channel adapters"
		                        : "no channel adapters (Ca records) found");
	}
	*out = ISO_TAKE(d);
	return 0;
}

/* ---- YAML ---- */

#define NAME_LEN 63

struct named {
	char name[NAME_LEN + 1];
	char device[32];
	int pf; /* for a VF: the CA it folds into; else -1 */
	int vf; /* its VF index */
	int n_vfs;
	int first_vf; /* index into the sorted VF list */
};

/* A node name from the first word of a description: lower case, every
 * character outside [a-z0-9._-] a '-', leading non-alphanumerics dropped. */
static void sanitise(const char *desc, char *out, size_t size)
{
	size_t n = 0;
	const char *p = desc;

	while (*p == ' ' || *p == '\t')
		p++;
	for (; *p && *p != ' ' && *p != '\t' && n + 1 < size; p++) {
		char c = (char)tolower((unsigned char)*p);
		if (!(isalnum((unsigned char)c) && !(c & 0x80)) && c != '.' && c != '_' && c != '-')
			c = '-';
		if (n == 0 && !isalnum((unsigned char)c))
			continue;
		out[n++] = c;
	}
	out[n] = '\0';
}

/* The second word when it looks like an RDMA device name, else mlx5_0. */
static void device_of(const char *desc, char *out, size_t size)
{
	const char *p = desc + strspn(desc, " \t");
	size_t n;

	p += strcspn(p, " \t");
	p += strspn(p, " \t");
	n = strcspn(p, " \t");
	if (n == 0 || n >= size || n >= 32)
		goto fallback;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)p[i]) && p[i] != '_' && p[i] != '.' && p[i] != '-')
			goto fallback;
	memcpy(out, p, n);
	out[n] = '\0';
	return;
fallback:
	iso_strlcpy(out, "mlx5_0", size);
}

/* "NAME-vfN" -> the length of NAME and N; false when not that shape. */
static bool vf_name(const char *s, size_t *base_len, int *idx)
{
	const char *v = NULL;

	for (const char *p = strstr(s, "-vf"); p; p = strstr(p + 1, "-vf"))
		v = p;
	if (!v || v == s)
		return false;
	const char *d = v + 3;
	if (!dec_int(&d, 0, 126, idx) || *d != '\0' || (v[3] == '0' && v[4] != '\0'))
		return false;
	*base_len = (size_t)(v - s);
	return true;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
	const struct named *n = ctx;
	return strcmp(n[*(const int *)a].name, n[*(const int *)b].name);
}

struct vfref {
	int pf, vf, ca;
};

static int cmp_vfref(const void *a, const void *b)
{
	const struct vfref *x = a, *y = b;
	if (x->pf != y->pf)
		return (x->pf > y->pf) - (x->pf < y->pf);
	return (x->vf > y->vf) - (x->vf < y->vf);
}

/* Finds the CA named exactly [s, s+len) among the sorted index. */
static int find_name(const struct named *nm, const int *sorted, int n, const char *s, size_t len)
{
	int lo = 0, hi = n - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		const char *m = nm[sorted[mid]].name;
		int c = strncmp(m, s, len);
		if (c == 0 && m[len] != '\0')
			c = 1;
		if (c == 0)
			return sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* Makes names unique: later holders of a taken name get "-2", "-3"... */
static int unique_names(struct named *nm, int n, struct iso_error *err)
{
	_cleanup_free_ int *idx = malloc((size_t)(n ? n : 1) * sizeof(int));

	if (!idx)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	for (int i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, (size_t)n, sizeof(int), cmp_name, nm);
	for (int i = 0; i < n;) {
		int k = i + 1, seq = 2;
		/* a stable order inside the group: file order */
		while (k < n && strcmp(nm[idx[k]].name, nm[idx[i]].name) == 0)
			k++;
		if (k - i > 1) {
			int lowest = idx[i];
			for (int j = i; j < k; j++)
				if (idx[j] < lowest)
					lowest = idx[j];
			for (int j = i; j < k; j++) {
				char suffix[16];
				size_t sl, bl;
				if (idx[j] == lowest)
					continue;
				sl = (size_t)snprintf(suffix, sizeof(suffix), "-%d", seq++);
				bl = strlen(nm[idx[j]].name);
				if (bl + sl > NAME_LEN)
					bl = NAME_LEN - sl;
				memcpy(nm[idx[j]].name + bl, suffix, sl + 1);
			}
		}
		i = k;
	}
	/* A suffixed name may meet a name that was there already. */
	qsort_r(idx, (size_t)n, sizeof(int), cmp_name, nm);
	for (int i = 1; i < n; i++)
		if (strcmp(nm[idx[i]].name, nm[idx[i - 1]].name) == 0)
			return iso_error_set(err, ISO_E_INVALID, "",
			                     "two channel adapters would both be named \"%s\"; "
			                     "rename one (its node description)",
			                     nm[idx[i]].name);
	return 0;
}

static void yaml_comment_text(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

int iso_fabric_discover_yaml(const struct iso_discovered *d, char **out, struct iso_error *err)
{
	int n = d->n_cas, n_vf = 0, n_nodes = 0;
	_cleanup_free_ struct named *nm = calloc((size_t)(n ? n : 1), sizeof(*nm));
	_cleanup_free_ int *sorted = malloc((size_t)(n ? n : 1) * sizeof(int));
	_cleanup_free_ struct vfref *vfs = malloc((size_t)(n ? n : 1) * sizeof(*vfs));
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	if (!nm || !sorted || !vfs)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	for (int i = 0; i < n; i++) {
		sanitise(d->cas[i].desc, nm[i].name, sizeof(nm[i].name));
		if (!nm[i].name[0])
			snprintf(nm[i].name, sizeof(nm[i].name), "ca-%016" PRIx64,
			         d->cas[i].node_guid);
		device_of(d->cas[i].desc, nm[i].device, sizeof(nm[i].device));
		nm[i].pf = -1;
		sorted[i] = i;
	}
	/* VFs fold into the CA whose name they extend, when that CA's VFs are
	 * exactly 0..k-1 (ibsim-net's stand-ins); anything else stays a node. */
	qsort_r(sorted, (size_t)n, sizeof(int), cmp_name, nm);
	for (int i = 0; i < n; i++) {
		size_t bl;
		int idx, pf;
		if (!vf_name(nm[i].name, &bl, &idx))
			continue;
		pf = find_name(nm, sorted, n, nm[i].name, bl);
		if (pf < 0 || pf == i)
			continue;
		vfs[n_vf++] = (struct vfref){.pf = pf, .vf = idx, .ca = i};
	}
	qsort(vfs, (size_t)n_vf, sizeof(*vfs), cmp_vfref);
	for (int i = 0; i < n_vf;) {
		int k = i;
		bool ok = true;
		while (k < n_vf && vfs[k].pf == vfs[i].pf) {
			if (vfs[k].vf != k - i)
				ok = false;
			k++;
		}
		/* A PF that is itself some other CA's VF does not take VFs. */
		size_t bl;
		int dummy;
		if (vf_name(nm[vfs[i].pf].name, &bl, &dummy) &&
		    find_name(nm, sorted, n, nm[vfs[i].pf].name, bl) >= 0)
			ok = false;
		if (ok) {
			nm[vfs[i].pf].n_vfs = k - i;
			nm[vfs[i].pf].first_vf = i;
			for (int j = i; j < k; j++) {
				nm[vfs[j].ca].pf = vfs[j].pf;
				nm[vfs[j].ca].vf = vfs[j].vf;
			}
		}
		i = k;
	}
	r = unique_names(nm, n, err);
	if (r < 0)
		return r;

	for (int i = 0; i < n; i++)
		n_nodes += nm[i].pf < 0;
	f = open_memstream(&text, &len);
	if (!f)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	fprintf(f,
	        "# From ibnetdiscover (isoctl fabric discover): %d channel adapters as %d nodes,\n"
	        "# %d switches skipped. Merge into the inventory's nodes: and give each node\n"
	        "# its rack, pdu, pool or class, cpus and memory (docs/inventory.md).\n"
	        "nodes:\n",
	        n, n_nodes, d->n_switches);
	for (int i = 0; i < n; i++) {
		const struct iso_discovered_ca *ca = &d->cas[i];
		const struct named *m = &nm[i];

		if (m->pf >= 0)
			continue;
		fputs("  # \"", f);
		yaml_comment_text(f, ca->desc);
		fprintf(f, "\", node GUID 0x%016" PRIx64 "\n", ca->node_guid);
		for (int p = 1; p < ca->n_ports; p++)
			fprintf(f, "  # also port %d: 0x%016" PRIx64 "\n", ca->ports[p].port_num,
			        ca->ports[p].guid);
		fprintf(f, "  - name: %s\n    port: {device: %s, port: %d, guid: 0x%016" PRIx64,
		        m->name, m->device, ca->ports[0].port_num, ca->ports[0].guid);
		if (m->n_vfs > 0) {
			const struct vfref *v = &vfs[m->first_vf];
			uint64_t base = d->cas[v[0].ca].ports[0].guid;
			bool run = true;
			for (int k = 1; k < m->n_vfs; k++)
				if (d->cas[v[k].ca].ports[0].guid != base + (uint64_t)k)
					run = false;
			fprintf(f, ", vfs: {count: %d, ", m->n_vfs);
			if (run) {
				fprintf(f, "guid_base: 0x%016" PRIx64 "}", base);
			} else {
				fputs("guids: [", f);
				for (int k = 0; k < m->n_vfs; k++)
					fprintf(f, "%s0x%016" PRIx64, k ? ", " : "",
					        d->cas[v[k].ca].ports[0].guid);
				fputs("]}", f);
			}
		}
		fputs("}\n", f);
	}
	if (fclose(f) != 0 || !text)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	*out = ISO_TAKE(text);
	return 0;
}
