/* names.c: a sorted index over the names an inventory declares (pools, racks,
 * PDUs, nodes, subnet managers, shared services). One place finds duplicates,
 * reporting the later declaration and where the name was first used, and
 * answers lookups in O(log n) so that a 65536-node file loads quickly. */
#include <errno.h>
#include <string.h>

#include "internal.h"

int inv_names_add(struct inv_names *ix, const char *name, int a, int b, int line)
{
	if (ix->n == ix->cap) {
		int cap = ix->cap ? ix->cap * 2 : 16;
		struct inv_name_ref *v = reallocarray(ix->v, (size_t)cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		ix->v = v;
		ix->cap = cap;
	}
	ix->v[ix->n] =
	    (struct inv_name_ref){.name = name, .a = a, .b = b, .line = line, .seq = ix->n};
	ix->n++;
	return 0;
}

static int ref_cmp(const void *x, const void *y)
{
	const struct inv_name_ref *p = x, *q = y;
	int r = strcmp(p->name, q->name);

	if (r)
		return r;
	return (p->seq > q->seq) - (p->seq < q->seq);
}

void inv_names_path(const struct inv_names *ix, const struct inv_name_ref *r,
                    char out[ISO_ERR_FIELD_MAX])
{
	switch (ix->kind) {
	case INV_NK_POOL:
		snprintf(out, ISO_ERR_FIELD_MAX, "pools[%d].name", r->a);
		break;
	case INV_NK_RACK:
		snprintf(out, ISO_ERR_FIELD_MAX, "racks[%d].name", r->a);
		break;
	case INV_NK_PDU:
		snprintf(out, ISO_ERR_FIELD_MAX, "racks[%d].pdus[%d]", r->a, r->b);
		break;
	case INV_NK_NODE:
		snprintf(out, ISO_ERR_FIELD_MAX, "nodes[%d].name", r->a);
		break;
	case INV_NK_SM:
		snprintf(out, ISO_ERR_FIELD_MAX, "fabric.sm_nodes[%d]", r->a);
		break;
	case INV_NK_SERVICE:
		snprintf(out, ISO_ERR_FIELD_MAX, "fabric.shared_services[%d].name", r->a);
		break;
	}
}

int inv_names_seal(struct inv_ctx *c, struct inv_names *ix, const char *what)
{
	const struct inv_name_ref *dup = NULL, *first = NULL;
	char path[ISO_ERR_FIELD_MAX], first_path[ISO_ERR_FIELD_MAX];

	if (ix->n > 1)
		qsort(ix->v, (size_t)ix->n, sizeof(*ix->v), ref_cmp);
	/* Of all duplicates, report the one declared earliest, against the first
	 * declaration of its name. */
	for (int i = 1; i < ix->n; i++) {
		if (strcmp(ix->v[i].name, ix->v[i - 1].name) != 0)
			continue;
		int j = i - 1;
		while (j > 0 && strcmp(ix->v[j - 1].name, ix->v[i].name) == 0)
			j--;
		if (!dup || ix->v[i].seq < dup->seq) {
			dup = &ix->v[i];
			first = &ix->v[j];
		}
	}
	if (!dup)
		return 0;
	inv_names_path(ix, dup, path);
	inv_names_path(ix, first, first_path);
	return inv_fail(c, path, dup->line, "duplicate %s '%s' (first used by %s at line %d)", what,
	                dup->name, first_path, first->line);
}

const struct inv_name_ref *inv_names_find(const struct inv_names *ix, const char *name)
{
	int lo = 0, hi = ix->n - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int r = strcmp(name, ix->v[mid].name);
		if (r == 0)
			return &ix->v[mid];
		if (r < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

void inv_names_free(struct inv_names *ix)
{
	free(ix->v);
	ix->v = NULL;
	ix->n = ix->cap = 0;
}
