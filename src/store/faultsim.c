/* faultsim.c: a store that wraps another store's vtable, counts the ops the
 * caller makes, and fails the Nth of them with a chosen errno, in the spirit
 * of SQLite's do_faultsim_test (https://www.sqlite.org/testing.html, "I/O
 * error testing"). It exists for tests only: the controller promises that a
 * use case either completes or leaves nothing changed (store rows, memory,
 * audit log, fabric intent), and the only way to reach every rollback and
 * undo path is to make each op in turn fail. It is compiled into the store
 * module's library (isostack-server), next to the backends it wraps; no
 * daemon flag reaches it. The wrapped store is borrowed: closing the wrapper
 * leaves it open. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "isostack/store.h"

struct faultsim {
	struct iso_store base;
	struct iso_store_ops vtable; /* faultsim_ops, less the optional ops `inner` lacks */
	struct iso_store *inner;     /* borrowed */
	unsigned kinds;              /* which ops count (ISO_FAULTSIM_*) */
	int64_t nth;                 /* the counted op that fails, 1-based; 0: none */
	int error;                   /* the positive errno it fails with */
	bool persistent;             /* every counted op from the nth on fails too */
	int64_t ops;                 /* counted ops since the last arm */
	int64_t injected;            /* faults injected since the last arm */
	char last[32];               /* the op that failed last */
};

static struct faultsim *fs_of(const struct iso_store *s)
{
	return (struct faultsim *)s;
}

/* Counts one op of `kind`; 0 to go on, or the injected -errno. */
static int hit(struct iso_store *s, unsigned kind, const char *name, struct iso_error *err)
{
	struct faultsim *fs = fs_of(s);

	if (!(fs->kinds & kind))
		return 0;
	fs->ops++;
	if (fs->nth <= 0 || fs->ops < fs->nth || (fs->ops > fs->nth && !fs->persistent))
		return 0;
	fs->injected++;
	iso_strlcpy(fs->last, name, sizeof(fs->last));
	enum iso_errcode code = fs->error == ENOENT   ? ISO_E_NOT_FOUND
	                        : fs->error == EEXIST ? ISO_E_CONFLICT
	                                              : ISO_E_INTERNAL;
	iso_error_set(err, code, NULL, "store: injected fault in %s (op %lld): %s", name,
	              (long long)fs->ops, strerror(fs->error));
	return -fs->error;
}

#define INNER(s) (fs_of(s)->inner)

/* One forwarding op: counted as `kind`, then passed to the wrapped store. */
#define FS_OP(kind, name, params, args)                                                            \
	static int fs_##name params                                                                \
	{                                                                                          \
		int r = hit(s, kind, #name, err);                                                  \
		return r < 0 ? r : INNER(s)->ops->name args;                                       \
	}

#define W ISO_FAULTSIM_WRITE
#define R ISO_FAULTSIM_READ

static void fs_close(struct iso_store *s)
{
	free(fs_of(s));
}

static void fs_rollback(struct iso_store *s)
{
	INNER(s)->ops->rollback(INNER(s));
}

FS_OP(ISO_FAULTSIM_BEGIN, begin, (struct iso_store * s, struct iso_error *err), (INNER(s), err))
FS_OP(ISO_FAULTSIM_COMMIT, commit, (struct iso_store * s, struct iso_error *err), (INNER(s), err))
FS_OP(R, meta_get,
      (struct iso_store * s, const char *key, char *buf, size_t size, struct iso_error *err),
      (INNER(s), key, buf, size, err))
FS_OP(W, meta_set,
      (struct iso_store * s, const char *key, const char *value, struct iso_error *err),
      (INNER(s), key, value, err))
FS_OP(W, tenant_insert, (struct iso_store * s, struct iso_tenant *t, struct iso_error *err),
      (INNER(s), t, err))
FS_OP(W, tenant_update, (struct iso_store * s, const struct iso_tenant *t, struct iso_error *err),
      (INNER(s), t, err))
FS_OP(W, tenant_delete, (struct iso_store * s, int64_t id, struct iso_error *err),
      (INNER(s), id, err))
FS_OP(R, tenant_get_by_name,
      (struct iso_store * s, const char *name, struct iso_tenant *out, struct iso_error *err),
      (INNER(s), name, out, err))
FS_OP(R, tenant_get_by_id,
      (struct iso_store * s, int64_t id, struct iso_tenant *out, struct iso_error *err),
      (INNER(s), id, out, err))
FS_OP(R, tenant_list,
      (struct iso_store * s, const char *after, int limit, struct iso_tenant **out, int *n,
       struct iso_error *err),
      (INNER(s), after, limit, out, n, err))
FS_OP(W, token_insert, (struct iso_store * s, const struct iso_token *t, struct iso_error *err),
      (INNER(s), t, err))
FS_OP(R, token_get,
      (struct iso_store * s, const char *id, struct iso_token *out, struct iso_error *err),
      (INNER(s), id, out, err))
FS_OP(R, token_list,
      (struct iso_store * s, int64_t tenant_id, const char *after, int limit,
       struct iso_token **out, int *n, struct iso_error *err),
      (INNER(s), tenant_id, after, limit, out, n, err))
FS_OP(W, token_revoke,
      (struct iso_store * s, const char *id, int64_t when_ms, struct iso_error *err),
      (INNER(s), id, when_ms, err))
FS_OP(W, token_revoke_tenant,
      (struct iso_store * s, int64_t tenant_id, int64_t when_ms, struct iso_error *err),
      (INNER(s), tenant_id, when_ms, err))
FS_OP(W, node_state_set,
      (struct iso_store * s, const struct iso_node_state *ns, struct iso_error *err),
      (INNER(s), ns, err))
FS_OP(R, node_state_list,
      (struct iso_store * s, struct iso_node_state **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, fabric_key_put,
      (struct iso_store * s, const struct iso_fabric_key_row *k, struct iso_error *err),
      (INNER(s), k, err))
FS_OP(W, fabric_key_delete, (struct iso_store * s, int pkey, struct iso_error *err),
      (INNER(s), pkey, err))
FS_OP(R, fabric_key_list,
      (struct iso_store * s, struct iso_fabric_key_row **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, fabric_port_put,
      (struct iso_store * s, const struct iso_fabric_port_row *p, struct iso_error *err),
      (INNER(s), p, err))
FS_OP(W, fabric_port_delete,
      (struct iso_store * s, const char *node, int vf, struct iso_error *err),
      (INNER(s), node, vf, err))
FS_OP(R, fabric_port_list,
      (struct iso_store * s, struct iso_fabric_port_row **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, neutron_project_put,
      (struct iso_store * s, const struct iso_neutron_project *p, struct iso_error *err),
      (INNER(s), p, err))
FS_OP(W, neutron_project_delete,
      (struct iso_store * s, const char *project_id, struct iso_error *err),
      (INNER(s), project_id, err))
FS_OP(R, neutron_project_list,
      (struct iso_store * s, struct iso_neutron_project **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, neutron_object_put,
      (struct iso_store * s, const struct iso_neutron_object *o, struct iso_error *err),
      (INNER(s), o, err))
FS_OP(W, neutron_object_delete, (struct iso_store * s, const char *uuid, struct iso_error *err),
      (INNER(s), uuid, err))
FS_OP(R, neutron_object_list,
      (struct iso_store * s, struct iso_neutron_object **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, org_put, (struct iso_store * s, const struct iso_org *o, struct iso_error *err),
      (INNER(s), o, err))
FS_OP(W, org_delete, (struct iso_store * s, const char *name, struct iso_error *err),
      (INNER(s), name, err))
FS_OP(R, org_list, (struct iso_store * s, struct iso_org **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, project_put, (struct iso_store * s, const struct iso_project *p, struct iso_error *err),
      (INNER(s), p, err))
FS_OP(W, project_delete,
      (struct iso_store * s, int64_t tenant_id, const char *name, struct iso_error *err),
      (INNER(s), tenant_id, name, err))
FS_OP(R, project_list,
      (struct iso_store * s, struct iso_project **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, quota_put, (struct iso_store * s, const struct iso_quota_row *q, struct iso_error *err),
      (INNER(s), q, err))
FS_OP(R, token_count_live,
      (struct iso_store * s, int64_t tenant_id, int64_t now_ms, int *n, struct iso_error *err),
      (INNER(s), tenant_id, now_ms, n, err))
FS_OP(W, account_forget, (struct iso_store * s, const char *tenant, struct iso_error *err),
      (INNER(s), tenant, err))
FS_OP(W, quota_delete,
      (struct iso_store * s, const char *account, const char *kind, struct iso_error *err),
      (INNER(s), account, kind, err))
FS_OP(R, quota_list,
      (struct iso_store * s, struct iso_quota_row **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, usage_append, (struct iso_store * s, const struct iso_usage_row *u, struct iso_error *err),
      (INNER(s), u, err))
FS_OP(R, usage_list,
      (struct iso_store * s, int64_t since_ms, struct iso_usage_row **out, int *n,
       struct iso_error *err),
      (INNER(s), since_ms, out, n, err))
FS_OP(W, gpu_fault_put,
      (struct iso_store * s, const struct iso_gpu_fault *f, struct iso_error *err),
      (INNER(s), f, err))
FS_OP(W, gpu_fault_delete, (struct iso_store * s, const char *node, int gpu, struct iso_error *err),
      (INNER(s), node, gpu, err))
FS_OP(R, gpu_fault_list,
      (struct iso_store * s, struct iso_gpu_fault **out, int *n, struct iso_error *err),
      (INNER(s), out, n, err))
FS_OP(W, alloc_insert,
      (struct iso_store * s, const struct iso_allocation *a, struct iso_error *err),
      (INNER(s), a, err))
FS_OP(W, alloc_update,
      (struct iso_store * s, const struct iso_allocation *a, struct iso_error *err),
      (INNER(s), a, err))
FS_OP(R, alloc_get,
      (struct iso_store * s, const char *id, struct iso_allocation *out, struct iso_error *err),
      (INNER(s), id, out, err))
FS_OP(R, alloc_list,
      (struct iso_store * s, const struct iso_alloc_filter *f, struct iso_allocation **out, int *n,
       struct iso_error *err),
      (INNER(s), f, out, n, err))
FS_OP(R, alloc_count_live, (struct iso_store * s, int64_t tenant_id, int *n, struct iso_error *err),
      (INNER(s), tenant_id, n, err))
FS_OP(R, alloc_recent,
      (struct iso_store * s, int limit, struct iso_allocation **out, int *n, struct iso_error *err),
      (INNER(s), limit, out, n, err))
FS_OP(R, alloc_get_by_key,
      (struct iso_store * s, int64_t tenant_id, const char *key, struct iso_allocation *out,
       struct iso_error *err),
      (INNER(s), tenant_id, key, out, err))
FS_OP(W, audit_append,
      (struct iso_store * s, const struct iso_audit_record *rec, struct iso_error *err),
      (INNER(s), rec, err))
FS_OP(R, audit_count, (struct iso_store * s, int64_t *n, struct iso_error *err), (INNER(s), n, err))
FS_OP(R, audit_scan,
      (struct iso_store * s, int64_t after, int64_t tenant_id, int limit, iso_audit_record_fn fn,
       void *arg, struct iso_error *err),
      (INNER(s), after, tenant_id, limit, fn, arg, err))
FS_OP(W, audit_head_put,
      (struct iso_store * s, const struct iso_audit_head *h, struct iso_error *err),
      (INNER(s), h, err))
FS_OP(R, audit_head_latest,
      (struct iso_store * s, struct iso_audit_head *out, struct iso_error *err),
      (INNER(s), out, err))
FS_OP(R, audit_head_scan,
      (struct iso_store * s, iso_audit_head_fn fn, void *arg, struct iso_error *err),
      (INNER(s), fn, arg, err))
/* Group commit: a sync is where commits become durable, so it counts as one. */
FS_OP(W, set_group_commit, (struct iso_store * s, bool on, struct iso_error *err),
      (INNER(s), on, err))
FS_OP(ISO_FAULTSIM_COMMIT, sync, (struct iso_store * s, struct iso_error *err), (INNER(s), err))

static const struct iso_store_ops faultsim_ops = {
    .name = "faultsim",
    .close = fs_close,
    .begin = fs_begin,
    .commit = fs_commit,
    .rollback = fs_rollback,
    .meta_get = fs_meta_get,
    .meta_set = fs_meta_set,
    .tenant_insert = fs_tenant_insert,
    .tenant_update = fs_tenant_update,
    .tenant_delete = fs_tenant_delete,
    .tenant_get_by_name = fs_tenant_get_by_name,
    .tenant_get_by_id = fs_tenant_get_by_id,
    .tenant_list = fs_tenant_list,
    .token_insert = fs_token_insert,
    .token_get = fs_token_get,
    .token_list = fs_token_list,
    .token_revoke = fs_token_revoke,
    .token_revoke_tenant = fs_token_revoke_tenant,
    .node_state_set = fs_node_state_set,
    .node_state_list = fs_node_state_list,
    .fabric_key_put = fs_fabric_key_put,
    .fabric_key_delete = fs_fabric_key_delete,
    .fabric_key_list = fs_fabric_key_list,
    .fabric_port_put = fs_fabric_port_put,
    .fabric_port_delete = fs_fabric_port_delete,
    .fabric_port_list = fs_fabric_port_list,
    .neutron_project_put = fs_neutron_project_put,
    .neutron_project_delete = fs_neutron_project_delete,
    .neutron_project_list = fs_neutron_project_list,
    .neutron_object_put = fs_neutron_object_put,
    .neutron_object_delete = fs_neutron_object_delete,
    .neutron_object_list = fs_neutron_object_list,
    .org_put = fs_org_put,
    .org_delete = fs_org_delete,
    .org_list = fs_org_list,
    .project_put = fs_project_put,
    .project_delete = fs_project_delete,
    .project_list = fs_project_list,
    .quota_put = fs_quota_put,
    .token_count_live = fs_token_count_live,
    .account_forget = fs_account_forget,
    .quota_delete = fs_quota_delete,
    .quota_list = fs_quota_list,
    .usage_append = fs_usage_append,
    .usage_list = fs_usage_list,
    .gpu_fault_put = fs_gpu_fault_put,
    .gpu_fault_delete = fs_gpu_fault_delete,
    .gpu_fault_list = fs_gpu_fault_list,
    .alloc_insert = fs_alloc_insert,
    .alloc_update = fs_alloc_update,
    .alloc_get = fs_alloc_get,
    .alloc_list = fs_alloc_list,
    .alloc_count_live = fs_alloc_count_live,
    .alloc_recent = fs_alloc_recent,
    .alloc_get_by_key = fs_alloc_get_by_key,
    .audit_append = fs_audit_append,
    .audit_count = fs_audit_count,
    .audit_scan = fs_audit_scan,
    .audit_head_put = fs_audit_head_put,
    .audit_head_latest = fs_audit_head_latest,
    .audit_head_scan = fs_audit_head_scan,
    .set_group_commit = fs_set_group_commit,
    .sync = fs_sync,
};

/* An op added to the vtable must be forwarded above: left NULL here, a
 * caller would crash on the wrapper only. */
_Static_assert(sizeof(struct iso_store_ops) == sizeof(const char *) + 62 * sizeof(void (*)(void)),
               "struct iso_store_ops changed: forward the new op in src/store/faultsim.c");

int iso_store_faultsim_open(struct iso_store *inner, struct iso_store **out, struct iso_error *err)
{
	struct faultsim *fs;

	*out = NULL;
	if (!inner)
		return iso_error_set(err, ISO_E_INVALID, "inner", "faultsim: no store to wrap");
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "faultsim: out of memory");
	fs->vtable = faultsim_ops;
	/* Optional ops stay absent when the wrapped store has none. */
	if (!inner->ops->set_group_commit || !inner->ops->sync) {
		fs->vtable.set_group_commit = NULL;
		fs->vtable.sync = NULL;
	}
	fs->base.ops = &fs->vtable;
	fs->inner = inner;
	*out = &fs->base;
	return 0;
}

void iso_store_faultsim_arm(struct iso_store *s, unsigned kinds, int64_t nth, int error,
                            bool persistent)
{
	struct faultsim *fs = fs_of(s);

	fs->kinds = kinds;
	fs->nth = nth;
	fs->error = error > 0 ? error : EIO;
	fs->persistent = persistent;
	fs->ops = 0;
	fs->injected = 0;
	fs->last[0] = '\0';
}

int64_t iso_store_faultsim_ops(const struct iso_store *s)
{
	return fs_of(s)->ops;
}

int64_t iso_store_faultsim_injected(const struct iso_store *s)
{
	return fs_of(s)->injected;
}

const char *iso_store_faultsim_last(const struct iso_store *s)
{
	return fs_of(s)->last;
}
