/* uring.c: which tenants' members may use io_uring (issue 14; docs/sandbox.md
 * "seccomp"). io_uring is a large kernel attack surface, so every member's
 * seccomp filter denies it unless its tenant's switch (iso_tenant.io_uring,
 * set by cluster-admins only) is on. The node agents' documents are rebuilt
 * at every settle without the store, so the tenants whose switch is on are
 * kept here in memory: read from the store at start, changed after the
 * commit that changed the tenant. A change marks only the nodes holding the
 * tenant's members dirty (agents.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

#define LIST_PAGE 500

struct ctl_uring {
	int64_t *id; /* tenant ids with io_uring on, unordered */
	int n, cap;
};

static int find(const struct ctl_uring *u, int64_t tenant_id)
{
	for (int i = 0; u && i < u->n; i++)
		if (u->id[i] == tenant_id)
			return i;
	return -1;
}

static int put(struct ctl_uring *u, int64_t tenant_id, bool on)
{
	int i = find(u, tenant_id);

	if (!on) {
		if (i >= 0)
			u->id[i] = u->id[--u->n];
		return 0;
	}
	if (i >= 0)
		return 0;
	if (u->n == u->cap) {
		int cap = u->cap ? 2 * u->cap : 8;
		int64_t *v = realloc(u->id, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		u->id = v;
		u->cap = cap;
	}
	u->id[u->n++] = tenant_id;
	return 0;
}

int ctl_uring_open(struct iso_controller *c, struct iso_error *err)
{
	char after[ISO_NAME_MAX] = "";
	int r = 0;

	if (!(c->uring = calloc(1, sizeof(*c->uring))))
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (;;) {
		_cleanup_free_ struct iso_tenant *page = NULL;
		int n = 0;

		r = c->store->ops->tenant_list(c->store, after[0] ? after : NULL, LIST_PAGE, &page,
		                               &n, err);
		if (r < 0)
			return r;
		for (int i = 0; i < n; i++)
			if (put(c->uring, page[i].id, page[i].io_uring) < 0)
				return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		if (n < LIST_PAGE)
			return 0;
		iso_strlcpy(after, page[n - 1].name, sizeof(after));
	}
}

void ctl_uring_close(struct iso_controller *c)
{
	if (!c->uring)
		return;
	free(c->uring->id);
	free(c->uring);
	c->uring = NULL;
}

bool ctl_uring_allowed(const struct iso_controller *c, int64_t tenant_id)
{
	return find(c->uring, tenant_id) >= 0;
}

void ctl_uring_set(struct iso_controller *c, int64_t tenant_id, bool on)
{
	if (!c->uring || ctl_uring_allowed(c, tenant_id) == on)
		return;
	if (put(c->uring, tenant_id, on) < 0) {
		/* the documents keep the strict filter for this tenant */
		iso_log(ISO_LOG_ERR, "tenant_io_uring_lost", "tenant_id=%lld",
		        (long long)tenant_id);
		return;
	}
	ctl_agents_tenant_changed(c, tenant_id);
}
