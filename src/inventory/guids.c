/* guids.c: every GUID the inventory declares is unique. Port GUIDs, explicit
 * VF GUIDs, runs of VF GUIDs from a guid_base and shared-service GUIDs are
 * all intervals; sorting them and sweeping once finds any overlap in
 * O(n log n) without expanding the runs. Two ports sharing a GUID would put
 * two tenants in one partition, so this check is not optional. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "internal.h"

int inv_guids_add(struct inv_ctx *c, uint64_t lo, uint64_t hi, enum inv_guid_kind kind, int a,
                  int b, int line)
{
	if (c->n_guids == c->cap_guids) {
		int cap = c->cap_guids ? c->cap_guids * 2 : 64;
		struct inv_guid_site *v = reallocarray(c->guids, (size_t)cap, sizeof(*v));
		if (!v)
			return inv_oom(c);
		c->guids = v;
		c->cap_guids = cap;
	}
	c->guids[c->n_guids] = (struct inv_guid_site){
	    .lo = lo, .hi = hi, .kind = kind, .a = a, .b = b, .line = line, .seq = c->n_guids};
	c->n_guids++;
	return 0;
}

static int site_cmp(const void *x, const void *y)
{
	const struct inv_guid_site *p = x, *q = y;

	if (p->lo != q->lo)
		return p->lo < q->lo ? -1 : 1;
	return (p->seq > q->seq) - (p->seq < q->seq);
}

static void site_path(const struct inv_guid_site *s, char out[ISO_ERR_FIELD_MAX])
{
	switch (s->kind) {
	case INV_GK_PORT:
		snprintf(out, ISO_ERR_FIELD_MAX, "nodes[%d].port.guid", s->a);
		break;
	case INV_GK_VF_BASE:
		snprintf(out, ISO_ERR_FIELD_MAX, "nodes[%d].port.vfs.guid_base", s->a);
		break;
	case INV_GK_VF:
		snprintf(out, ISO_ERR_FIELD_MAX, "nodes[%d].port.vfs.guids[%d]", s->a, s->b);
		break;
	case INV_GK_SERVICE:
		snprintf(out, ISO_ERR_FIELD_MAX, "fabric.shared_services[%d].guids[%d]", s->a,
		         s->b);
		break;
	}
}

/* Which VF of a run collides: " for VF 3" (the later site) or "VF 3 of " (the
 * earlier one), nothing for a single GUID. */
static void vf_note(const struct inv_guid_site *s, uint64_t guid, bool later, char *buf,
                    size_t size)
{
	if (s->kind != INV_GK_VF_BASE)
		buf[0] = '\0';
	else if (later)
		snprintf(buf, size, " for VF %" PRIu64, guid - s->lo);
	else
		snprintf(buf, size, "VF %" PRIu64 " of ", guid - s->lo);
}

/* Document order: sites are added section by section, not top to bottom. */
static bool after(const struct inv_guid_site *a, const struct inv_guid_site *b)
{
	if (a->line != b->line)
		return a->line > b->line;
	return a->seq > b->seq;
}

int inv_guids_check(struct inv_ctx *c)
{
	const struct inv_guid_site *later = NULL, *earlier = NULL;
	char path[ISO_ERR_FIELD_MAX], first_path[ISO_ERR_FIELD_MAX], n1[32], n2[32];
	uint64_t guid = 0;
	int reach = 0; /* index of the site reaching furthest so far */

	if (c->n_guids > 1)
		qsort(c->guids, (size_t)c->n_guids, sizeof(*c->guids), site_cmp);
	/* Sweep: a site overlaps an earlier-starting one iff it starts at or
	 * before the furthest end seen so far. Report the overlap whose later
	 * declaration comes first in the document. */
	for (int i = 1; i < c->n_guids; i++) {
		const struct inv_guid_site *s = &c->guids[i], *r = &c->guids[reach];
		if (s->lo <= r->hi) {
			const struct inv_guid_site *lt = after(s, r) ? s : r;
			if (!later || after(later, lt)) {
				later = lt;
				earlier = lt == s ? r : s;
				guid = s->lo;
			}
		}
		if (s->hi > r->hi)
			reach = i;
	}
	if (!later)
		return 0;
	site_path(later, path);
	site_path(earlier, first_path);
	vf_note(later, guid, true, n1, sizeof(n1));
	vf_note(earlier, guid, false, n2, sizeof(n2));
	return inv_fail(c, path, later->line,
	                "duplicate GUID 0x%016" PRIx64 "%s (first used by %s%s at line %d)", guid,
	                n1, n2, first_path, earlier->line);
}
