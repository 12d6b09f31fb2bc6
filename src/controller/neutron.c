/* neutron.c: OpenStack Neutron's networks and ports as isostack partitions
 * (docs/openstack.md). networking-mlnx's mlnx_sdn_assist driver sends every
 * network with a segmentation id and every bound port; here a network
 * becomes a P_Key of the tenant its Neutron project is mapped to (taken
 * exactly, a fabric key with alloc_id "n-<uuid>"), and a port the full
 * membership of its GUID in that partition (an external assignment: the VF
 * and its GUID are Neutron's agent's). Each write is one transaction (the
 * object's row, its key, its audit event, the staged intent) and gets a job
 * that completes when the fabric driver confirmed the generation that
 * carried it. The objects live here in memory, sorted by uuid, and are read
 * back at start; fabric.c asks for them whenever it stages the intent, so
 * keys stay in one place (fabric.c) and Neutron's objects in this one. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "controller/internal.h"

/* Jobs are promises about a generation: kept in memory, the newest
 * CTL_NEUTRON_JOBS of them. A poll of a forgotten one (restart, or pushed
 * out) is a 404, which puts the driver's journal row back to pending: it
 * sends the request again, which is idempotent here. */
#define CTL_NEUTRON_JOBS 4096

struct ctl_neutron_job {
	char id[17]; /* 16 hex; "" unused */
	uint64_t generation;
};

struct ctl_neutron {
	struct iso_neutron_project *projects; /* sorted by project_id */
	int n_projects;
	struct iso_neutron_object *objs; /* networks and ports, sorted by uuid */
	int n_objs;
	uint64_t *inv_guids; /* the inventory's PF, VF and service GUIDs, sorted */
	int n_inv_guids;
	struct ctl_neutron_job jobs[CTL_NEUTRON_JOBS];
	int next_job;
};

#define KEY_PREFIX "n-"

void ctl_neutron_key_alloc(const char *uuid, char *out, size_t size)
{
	snprintf(out, size, KEY_PREFIX "%s", uuid);
}

bool ctl_neutron_is_key(const char *alloc)
{
	return strncmp(alloc, KEY_PREFIX, strlen(KEY_PREFIX)) == 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int cmp_obj(const void *a, const void *b)
{
	return strcmp(((const struct iso_neutron_object *)a)->uuid,
	              ((const struct iso_neutron_object *)b)->uuid);
}

static int cmp_proj(const void *a, const void *b)
{
	return strcmp(((const struct iso_neutron_project *)a)->project_id,
	              ((const struct iso_neutron_project *)b)->project_id);
}

/* The inventory's own GUIDs: a Neutron port may not claim one. */
static int index_inventory(struct ctl_neutron *nt, const struct iso_inventory *inv)
{
	int n = 0;

	for (int i = 0; i < inv->n_nodes; i++)
		n += inv->nodes[i].has_port ? 1 + inv->nodes[i].port.n_vfs : 0;
	for (int s = 0; s < inv->fabric.n_services; s++)
		n += inv->fabric.services[s].n_guids;
	nt->inv_guids = calloc((size_t)n + 1, sizeof(*nt->inv_guids));
	if (!nt->inv_guids)
		return -ENOMEM;
	for (int i = 0; i < inv->n_nodes; i++) {
		const struct iso_node *nd = &inv->nodes[i];
		if (!nd->has_port)
			continue;
		nt->inv_guids[nt->n_inv_guids++] = nd->port.guid;
		for (int v = 0; v < nd->port.n_vfs; v++)
			nt->inv_guids[nt->n_inv_guids++] = nd->port.vf_guids[v];
	}
	for (int s = 0; s < inv->fabric.n_services; s++)
		for (int g = 0; g < inv->fabric.services[s].n_guids; g++)
			nt->inv_guids[nt->n_inv_guids++] = inv->fabric.services[s].guids[g];
	if (nt->n_inv_guids > 0)
		qsort(nt->inv_guids, (size_t)nt->n_inv_guids, sizeof(uint64_t), cmp_u64);
	return 0;
}

int ctl_neutron_open(struct iso_controller *c, struct iso_error *err)
{
	struct ctl_neutron *nt = calloc(1, sizeof(*nt));
	int r;

	if (!nt)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	c->neutron = nt;
	if (index_inventory(nt, c->inv) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	r = c->store->ops->neutron_project_list(c->store, &nt->projects, &nt->n_projects, err);
	if (r == 0)
		r = c->store->ops->neutron_object_list(c->store, &nt->objs, &nt->n_objs, err);
	if (r < 0)
		return r;
	/* the stores list in key order, but by their collation: sort ours */
	if (nt->n_projects > 0) /* qsort's base may not be NULL, even for none */
		qsort(nt->projects, (size_t)nt->n_projects, sizeof(*nt->projects), cmp_proj);
	if (nt->n_objs > 0)
		qsort(nt->objs, (size_t)nt->n_objs, sizeof(*nt->objs), cmp_obj);
	if (nt->n_objs > 0)
		iso_log(ISO_LOG_INFO, "neutron_restored", "projects=%d objects=%d", nt->n_projects,
		        nt->n_objs);
	return 0;
}

void ctl_neutron_close(struct iso_controller *c)
{
	struct ctl_neutron *nt = c->neutron;

	if (!nt)
		return;
	free(nt->projects);
	free(nt->objs);
	free(nt->inv_guids);
	free(nt);
	c->neutron = NULL;
}

const struct iso_neutron_object *ctl_neutron_objects(const struct iso_controller *c, int *n)
{
	*n = c->neutron ? c->neutron->n_objs : 0;
	return c->neutron ? c->neutron->objs : NULL;
}

int ctl_neutron_find(const struct iso_controller *c, const char *uuid)
{
	const struct ctl_neutron *nt = c->neutron;
	int lo = 0, hi = nt ? nt->n_objs - 1 : -1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2, d = strcmp(nt->objs[mid].uuid, uuid);
		if (d == 0)
			return mid;
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static struct iso_neutron_project *project_of(struct ctl_neutron *nt, const char *id)
{
	struct iso_neutron_project key = {0};

	iso_strlcpy(key.project_id, id, sizeof(key.project_id));
	if (nt->n_projects == 0) /* bsearch's base may not be NULL, even for none */
		return NULL;
	return bsearch(&key, nt->projects, (size_t)nt->n_projects, sizeof(*nt->projects), cmp_proj);
}

/* Inserts o in uuid order, or replaces the object of its uuid. */
static int obj_set(struct ctl_neutron *nt, const struct iso_neutron_object *o)
{
	int lo = 0, hi = nt->n_objs;

	while (lo < hi) {
		int mid = (lo + hi) / 2, d = strcmp(nt->objs[mid].uuid, o->uuid);
		if (d == 0) {
			nt->objs[mid] = *o;
			return 0;
		}
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	struct iso_neutron_object *v =
	    realloc(nt->objs, (size_t)(nt->n_objs + 1) * sizeof(*nt->objs));
	if (!v)
		return -ENOMEM;
	nt->objs = v;
	memmove(&v[lo + 1], &v[lo], (size_t)(nt->n_objs - lo) * sizeof(*v));
	v[lo] = *o;
	nt->n_objs++;
	return 0;
}

static void obj_remove(struct ctl_neutron *nt, int i)
{
	memmove(&nt->objs[i], &nt->objs[i + 1], (size_t)(nt->n_objs - i - 1) * sizeof(*nt->objs));
	nt->n_objs--;
}

/* ---- jobs ---- */

static void job_new(struct ctl_neutron *nt, uint64_t generation, char *out)
{
	struct ctl_neutron_job *j = &nt->jobs[nt->next_job];
	unsigned char raw[8];

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(j->id, sizeof(j->id), raw, sizeof(raw));
	j->generation = generation;
	nt->next_job = (nt->next_job + 1) % CTL_NEUTRON_JOBS;
	snprintf(out, ISO_NEUTRON_JOB_MAX, "job-%s", j->id);
}

int iso_controller_neutron_job(struct iso_controller *c, const struct iso_principal *p,
                               const char *id, const char **status, struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	int r = ctl_authorize(p, "neutron.job.read", NULL, err);

	if (r < 0)
		return r;
	if (id && strncmp(id, "job-", 4) == 0)
		id += 4;
	else
		id = NULL;
	for (int i = 0; id && strlen(id) == 16 && i < CTL_NEUTRON_JOBS; i++)
		if (strcmp(nt->jobs[i].id, id) == 0) {
			*status = ctl_fabric_confirmed(c, nt->jobs[i].generation) ? "Completed"
			                                                          : "Running";
			return 0;
		}
	return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such job");
}

/* ---- checks shared by the writes ---- */

static int tenant_of_project(struct iso_controller *c, const char *project_id, int64_t *tenant_id,
                             char *tenant, struct iso_error *err)
{
	const struct iso_neutron_project *pr = project_of(c->neutron, project_id);
	struct iso_tenant t;

	if (!pr)
		return iso_error_set(
		    err, ISO_E_INVALID, "project_id",
		    "project_id: Neutron project \"%s\" is not mapped to an isostack "
		    "tenant (a cluster-admin maps it: PUT "
		    "/v1/neutron/projects/%s)",
		    project_id, project_id);
	int r = c->store->ops->tenant_get_by_id(c->store, pr->tenant_id, &t, err);
	if (r < 0)
		return r;
	*tenant_id = t.id;
	iso_strlcpy(tenant, t.name, ISO_NAME_MAX);
	return 0;
}

/* The same uuid held by another tenant or domain, or as the other kind: a
 * Neutron UUID is random, so only a hostile or broken caller meets it. */
static int uuid_in_use(const struct iso_neutron_object *held, enum iso_neutron_kind kind,
                       int64_t tenant_id, const char *domain, struct iso_error *err)
{
	if (held->kind == kind && held->tenant_id == tenant_id && strcmp(held->domain, domain) == 0)
		return 0;
	return iso_error_set(err, ISO_E_CONFLICT, "id", "id: %s is in use",
	                     kind == ISO_NEUTRON_NETWORK ? "this network id" : "this port id");
}

/* One write's audit event. The memory change is made first (so that the
 * staging sees it); the rows, the event and the staged intent then go in
 * one transaction, and the caller puts memory back when it fails. */
struct write {
	const char *action, *kind, *uuid, *tenant;
	int64_t tenant_id;
	json_t *details;
};

/* Runs the rows' writes and the staging in one transaction. put: the rows
 * to upsert; del: the uuids to delete. */
static int write_tx(struct iso_controller *c, const struct iso_principal *p, const struct write *w,
                    const struct iso_neutron_object *put, const char *const *del, int n_del,
                    char *job, struct iso_error *err)
{
	const struct iso_store_ops *ops = c->store->ops;
	uint64_t generation;
	int r = ctl_tx_begin(c, err);

	if (r < 0) {
		json_decref(w->details);
		return r;
	}
	if (put)
		r = ops->neutron_object_put(c->store, put, err);
	for (int i = 0; r == 0 && i < n_del; i++)
		r = ops->neutron_object_delete(c->store, del[i], err);
	if (r == 0)
		r = ctl_fabric_stage(c, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = w->action,
		                             .kind = w->kind,
		                             .id = w->uuid,
		                             .tenant = w->tenant,
		                             .tenant_id = w->tenant_id,
		                             .details = w->details});
	else
		json_decref(w->details);
	r = ctl_tx_end(c, r, err);
	if (r < 0) {
		ctl_fabric_abort(c);
		return r;
	}
	generation = ctl_fabric_commit(c);
	job_new(c->neutron, generation, job);
	return 0;
}

/* Nothing changed: a job of the current generation (done once it is). */
static int no_change(struct iso_controller *c, char *job)
{
	job_new(c->neutron, ctl_fabric_generation(c), job);
	return 0;
}

static int wire_authorize(const struct iso_principal *p, const char *action, struct iso_error *err)
{
	return ctl_authorize(p, action, NULL, err);
}

static int need_fabric(struct iso_controller *c, struct iso_error *err)
{
	if (!ctl_fabric_partitioned(c) || c->inv->fabric.type != ISO_FABRIC_INFINIBAND)
		return iso_error_set(err, ISO_E_CONFLICT, NULL,
		                     "this cluster's fabric (%s) has no InfiniBand partitions for "
		                     "Neutron networks",
		                     iso_fabric_type_name(c->inv->fabric.type));
	return 0;
}

/* What every PUT checks first: the right, the fabric, the project's tenant
 * (into *tenant_id and tenant), and that the uuid, if held, is this
 * tenant's and domain's object of this kind. *at: its index, or -1. */
static int put_prelude(struct iso_controller *c, const struct iso_principal *p, const char *action,
                       enum iso_neutron_kind kind, const char *project_id, const char *uuid,
                       const char *domain, int64_t *tenant_id, char *tenant, int *at,
                       struct iso_error *err)
{
	int r = wire_authorize(p, action, err);

	if (r == 0)
		r = need_fabric(c, err);
	if (r == 0)
		r = tenant_of_project(c, project_id, tenant_id, tenant, err);
	if (r < 0)
		return r;
	*at = ctl_neutron_find(c, uuid);
	if (*at >= 0)
		return uuid_in_use(&c->neutron->objs[*at], kind, *tenant_id, domain, err);
	return 0;
}

/* ---- networks ---- */

int iso_controller_neutron_network_put(struct iso_controller *c, const struct iso_principal *p,
                                       const struct iso_neutron_network_req *req, char *job,
                                       struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	struct iso_neutron_object o = {.kind = ISO_NEUTRON_NETWORK}, old;
	const struct iso_fabric_config *fc = &c->inv->fabric;
	char tenant[ISO_NAME_MAX];
	int i, r = put_prelude(c, p, "neutron.network.write", ISO_NEUTRON_NETWORK, req->project_id,
	                       req->uuid, req->domain, &o.tenant_id, tenant, &i, err);

	if (r < 0)
		return r;
	if (req->pkey < fc->pkey_min || req->pkey > fc->pkey_max)
		return iso_error_set(
		    err, ISO_E_INVALID, "provider:segmentation_id",
		    "provider:segmentation_id: %d (0x%04x) is outside this "
		    "cluster's P_Key range 0x%04x-0x%04x (fabric.pkey_range); keep "
		    "ml2_type_vlan's network_vlan_ranges inside it",
		    req->pkey, req->pkey, fc->pkey_min, fc->pkey_max);
	if (i >= 0 && nt->objs[i].pkey == req->pkey &&
	    strcmp(nt->objs[i].project_id, req->project_id) == 0)
		return no_change(c, job);
	iso_strlcpy(o.uuid, req->uuid, sizeof(o.uuid));
	iso_strlcpy(o.domain, req->domain, sizeof(o.domain));
	iso_strlcpy(o.project_id, req->project_id, sizeof(o.project_id));
	o.pkey = req->pkey;
	o.updated_ms = iso_now_ms();
	bool had = i >= 0;
	if (had)
		old = nt->objs[i];
	if (obj_set(nt, &o) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	char hex[8], prev[8];
	snprintf(hex, sizeof(hex), "0x%04x", o.pkey);
	snprintf(prev, sizeof(prev), "0x%04x", had ? old.pkey : 0);
	struct write w = {.action = "neutron.network.put",
	                  .kind = "neutron_network",
	                  .uuid = o.uuid,
	                  .tenant = tenant,
	                  .tenant_id = o.tenant_id,
	                  .details = json_pack("{s:s, s:s, s:s, s:o}", "domain", o.domain,
	                                       "project_id", o.project_id, "pkey", hex, "previous",
	                                       had ? json_string(prev) : json_null())};
	r = write_tx(c, p, &w, &o, NULL, 0, job, err);
	if (r < 0) {
		int j = ctl_neutron_find(c, o.uuid);
		if (had)
			nt->objs[j] = old;
		else
			obj_remove(nt, j);
	}
	return r;
}

/* The held object `uuid` of kind in domain, visible to this write: another
 * tenant's or domain's answers as a missing one. */
static int held(struct iso_controller *c, const char *domain, const char *uuid,
                enum iso_neutron_kind kind, struct iso_error *err)
{
	int i = ctl_neutron_find(c, uuid);

	if (i < 0 || c->neutron->objs[i].kind != kind ||
	    strcmp(c->neutron->objs[i].domain, domain) != 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such %s",
		                     kind == ISO_NEUTRON_NETWORK ? "network" : "port");
	return i;
}

int iso_controller_neutron_network_delete(struct iso_controller *c, const struct iso_principal *p,
                                          const char *domain, const char *uuid, char *job,
                                          struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	_cleanup_free_ struct iso_neutron_object *saved = NULL;
	_cleanup_free_ const char **del = NULL;
	char tenant[ISO_NAME_MAX] = "";
	int n_saved = 0, r = wire_authorize(p, "neutron.network.write", err);

	if (r < 0)
		return r;
	int i = held(c, domain, uuid, ISO_NEUTRON_NETWORK, err);
	if (i < 0)
		return i;
	/* the network and its ports, which go with it (Neutron deletes them
	 * first; a port left behind would be a member of no partition) */
	saved = calloc((size_t)nt->n_objs, sizeof(*saved));
	del = calloc((size_t)nt->n_objs, sizeof(*del));
	if (!saved || !del)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int j = 0; j < nt->n_objs; j++)
		if (j == i || (nt->objs[j].kind == ISO_NEUTRON_PORT &&
		               strcmp(nt->objs[j].network, uuid) == 0))
			saved[n_saved++] = nt->objs[j];
	for (int j = 0; j < n_saved; j++) {
		obj_remove(nt, ctl_neutron_find(c, saved[j].uuid));
		del[j] = saved[j].uuid;
	}
	iso_controller_tenant_name(c, saved[0].tenant_id, tenant, sizeof(tenant));
	char hex[8];
	snprintf(hex, sizeof(hex), "0x%04x", saved[0].pkey);
	struct write w = {.action = "neutron.network.delete",
	                  .kind = "neutron_network",
	                  .uuid = uuid,
	                  .tenant = tenant,
	                  .tenant_id = saved[0].tenant_id,
	                  .details = json_pack("{s:s, s:s, s:i}", "domain", domain, "pkey", hex,
	                                       "ports", n_saved - 1)};
	r = write_tx(c, p, &w, NULL, del, n_saved, job, err);
	if (r < 0)
		for (int j = 0; j < n_saved; j++)
			if (obj_set(nt, &saved[j]) < 0)
				iso_log(ISO_LOG_ERR, "neutron_undo_lost", "uuid=%s", saved[j].uuid);
	return r;
}

/* ---- ports ---- */

static bool guid_in_inventory(const struct ctl_neutron *nt, uint64_t guid)
{
	return nt->n_inv_guids > 0 &&
	       bsearch(&guid, nt->inv_guids, (size_t)nt->n_inv_guids, sizeof(uint64_t), cmp_u64);
}

int iso_controller_neutron_port_put(struct iso_controller *c, const struct iso_principal *p,
                                    const struct iso_neutron_port_req *req, char *job,
                                    struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	struct iso_neutron_object o = {.kind = ISO_NEUTRON_PORT}, old;
	char tenant[ISO_NAME_MAX];
	int i, ni,
	    r = put_prelude(c, p, "neutron.port.write", ISO_NEUTRON_PORT, req->project_id,
	                    req->uuid, req->domain, &o.tenant_id, tenant, &i, err);

	if (r < 0)
		return r;
	/* another tenant's network answers as a missing one */
	int net = ctl_neutron_find(c, req->network_id);
	if (net < 0 || nt->objs[net].kind != ISO_NEUTRON_NETWORK ||
	    nt->objs[net].tenant_id != o.tenant_id ||
	    strcmp(nt->objs[net].domain, req->domain) != 0)
		return iso_error_set(
		    err, ISO_E_NOT_FOUND, "network_id",
		    "network_id: no such network here (isostack holds the networks "
		    "with a segmentation id of this project's tenant)");
	ni = iso_cluster_state_node_index(&c->cs, req->host);
	if (ni < 0 || !c->inv->nodes[ni].has_port)
		return iso_error_set(err, ISO_E_INVALID, "binding:host_id",
		                     "binding:host_id: \"%s\" is not a node with a fabric port in "
		                     "this cluster's inventory",
		                     req->host);
	/* one GUID, one port: never another port's, never the inventory's own
	 * (a PF, a VF isostack hands out, a shared service) */
	bool taken = guid_in_inventory(nt, req->guid);
	for (int j = 0; j < nt->n_objs && !taken; j++)
		taken =
		    j != i && nt->objs[j].kind == ISO_NEUTRON_PORT && nt->objs[j].guid == req->guid;
	if (taken)
		return iso_error_set(err, ISO_E_CONFLICT, req->guid_field,
		                     "%s: GUID 0x%016llx is in use", req->guid_field,
		                     (unsigned long long)req->guid);
	if (i >= 0 && nt->objs[i].guid == req->guid && strcmp(nt->objs[i].host, req->host) == 0 &&
	    strcmp(nt->objs[i].network, req->network_id) == 0 &&
	    strcmp(nt->objs[i].project_id, req->project_id) == 0)
		return no_change(c, job);
	iso_strlcpy(o.uuid, req->uuid, sizeof(o.uuid));
	iso_strlcpy(o.domain, req->domain, sizeof(o.domain));
	iso_strlcpy(o.project_id, req->project_id, sizeof(o.project_id));
	iso_strlcpy(o.network, req->network_id, sizeof(o.network));
	iso_strlcpy(o.host, req->host, sizeof(o.host));
	o.guid = req->guid;
	o.updated_ms = iso_now_ms();
	bool had = i >= 0;
	if (had)
		old = nt->objs[i];
	if (obj_set(nt, &o) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	char guid[24];
	snprintf(guid, sizeof(guid), "0x%016llx", (unsigned long long)o.guid);
	struct write w = {.action = "neutron.port.put",
	                  .kind = "neutron_port",
	                  .uuid = o.uuid,
	                  .tenant = tenant,
	                  .tenant_id = o.tenant_id,
	                  .details = json_pack("{s:s, s:s, s:s, s:s}", "domain", o.domain,
	                                       "network", o.network, "host", o.host, "guid", guid)};
	r = write_tx(c, p, &w, &o, NULL, 0, job, err);
	if (r < 0) {
		int j = ctl_neutron_find(c, o.uuid);
		if (had)
			nt->objs[j] = old;
		else
			obj_remove(nt, j);
	}
	return r;
}

int iso_controller_neutron_port_delete(struct iso_controller *c, const struct iso_principal *p,
                                       const char *domain, const char *uuid, char *job,
                                       struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	char tenant[ISO_NAME_MAX] = "", guid[24];
	int r = wire_authorize(p, "neutron.port.write", err);

	if (r < 0)
		return r;
	int i = held(c, domain, uuid, ISO_NEUTRON_PORT, err);
	if (i < 0)
		return i;
	struct iso_neutron_object old = nt->objs[i];
	obj_remove(nt, i);
	iso_controller_tenant_name(c, old.tenant_id, tenant, sizeof(tenant));
	snprintf(guid, sizeof(guid), "0x%016llx", (unsigned long long)old.guid);
	struct write w = {.action = "neutron.port.delete",
	                  .kind = "neutron_port",
	                  .uuid = uuid,
	                  .tenant = tenant,
	                  .tenant_id = old.tenant_id,
	                  .details = json_pack("{s:s, s:s, s:s, s:s}", "domain", domain, "network",
	                                       old.network, "host", old.host, "guid", guid)};
	const char *del[1] = {old.uuid};
	r = write_tx(c, p, &w, NULL, del, 1, job, err);
	if (r < 0 && obj_set(nt, &old) < 0)
		iso_log(ISO_LOG_ERR, "neutron_undo_lost", "uuid=%s", old.uuid);
	return r;
}

int iso_controller_neutron_list(struct iso_controller *c, const struct iso_principal *p,
                                const char *domain, enum iso_neutron_kind kind, const char *after,
                                int limit, struct iso_neutron_object **out, int *n,
                                struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	int r = ctl_authorize(p, "neutron.list", NULL, err), start = 0;

	*out = NULL;
	*n = 0;
	if (r < 0)
		return r;
	*out = calloc((size_t)(limit > 0 ? limit : 1), sizeof(**out));
	if (!*out)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	/* the first uuid past the cursor, by the sort */
	for (int lo = 0, hi = nt->n_objs; after && lo < hi;) {
		int mid = (lo + hi) / 2;
		if (strcmp(nt->objs[mid].uuid, after) <= 0)
			lo = start = mid + 1;
		else
			hi = mid;
	}
	for (int i = start; i < nt->n_objs && *n < limit; i++)
		if (nt->objs[i].kind == kind && strcmp(nt->objs[i].domain, domain) == 0)
			(*out)[(*n)++] = nt->objs[i];
	return 0;
}

/* ---- project mappings ---- */

static bool project_id_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n >= ISO_NEUTRON_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
			return false;
	return true;
}

static int project_objects(const struct ctl_neutron *nt, const char *project_id)
{
	int n = 0;

	for (int i = 0; i < nt->n_objs; i++)
		n += strcmp(nt->objs[i].project_id, project_id) == 0;
	return n;
}

int iso_controller_neutron_project_map(struct iso_controller *c, const struct iso_principal *p,
                                       const char *project_id, const char *tenant,
                                       struct iso_neutron_project *out, struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	struct iso_neutron_project np = {0};
	struct iso_tenant t;
	int r = ctl_authorize(p, "neutron.project.map", NULL, err);

	if (r < 0)
		return r;
	if (!project_id_valid(project_id))
		return iso_error_set(err, ISO_E_INVALID, "project_id",
		                     "project_id: want 1 to 64 of [A-Za-z0-9_-] (a Keystone "
		                     "project id)");
	r = ctl_resolve_tenant(c, p, tenant, "tenant", &t, err);
	if (r < 0)
		return r;
	struct iso_neutron_project *cur = project_of(nt, project_id);
	if (cur && cur->tenant_id == t.id) {
		*out = *cur;
		return 0;
	}
	if (cur && project_objects(nt, project_id) > 0)
		return iso_error_set(
		    err, ISO_E_CONFLICT, "tenant",
		    "tenant: Neutron project \"%s\" holds %d networks and ports of "
		    "its tenant; they must be deleted in Neutron first",
		    project_id, project_objects(nt, project_id));
	iso_strlcpy(np.project_id, project_id, sizeof(np.project_id));
	np.tenant_id = t.id;
	np.created_ms = iso_now_ms();
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->neutron_project_put(c->store, &np, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "neutron.project.map",
		                             .kind = "neutron_project",
		                             .id = np.project_id,
		                             .tenant = t.name,
		                             .tenant_id = t.id});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	if (cur) {
		*cur = np;
	} else {
		struct iso_neutron_project *v =
		    realloc(nt->projects, (size_t)(nt->n_projects + 1) * sizeof(*v));
		if (!v) /* committed: the restart reads it back */
			return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
		nt->projects = v;
		v[nt->n_projects++] = np;
		qsort(v, (size_t)nt->n_projects, sizeof(*v), cmp_proj);
	}
	*out = np;
	return 0;
}

int iso_controller_neutron_project_unmap(struct iso_controller *c, const struct iso_principal *p,
                                         const char *project_id, struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	int r = ctl_authorize(p, "neutron.project.unmap", NULL, err);
	char tenant[ISO_NAME_MAX] = "";

	if (r < 0)
		return r;
	struct iso_neutron_project *cur = project_of(nt, project_id);
	if (!cur)
		return iso_error_set(err, ISO_E_NOT_FOUND, NULL, "no such Neutron project mapping");
	int held_n = project_objects(nt, project_id);
	if (held_n > 0)
		return iso_error_set(
		    err, ISO_E_CONFLICT, NULL,
		    "Neutron project \"%s\" holds %d networks and ports; they must "
		    "be deleted in Neutron first",
		    project_id, held_n);
	iso_controller_tenant_name(c, cur->tenant_id, tenant, sizeof(tenant));
	r = ctl_tx_begin(c, err);
	if (r == 0)
		r = c->store->ops->neutron_project_delete(c->store, project_id, err);
	if (r == 0)
		ctl_emit(c, p,
		         &(struct ctl_event){.action = "neutron.project.unmap",
		                             .kind = "neutron_project",
		                             .id = project_id,
		                             .tenant = tenant,
		                             .tenant_id = cur->tenant_id});
	r = ctl_tx_end(c, r, err);
	if (r < 0)
		return r;
	int i = (int)(cur - nt->projects);
	memmove(&nt->projects[i], &nt->projects[i + 1],
	        (size_t)(nt->n_projects - i - 1) * sizeof(*nt->projects));
	nt->n_projects--;
	return 0;
}

int iso_controller_neutron_project_list(struct iso_controller *c, const struct iso_principal *p,
                                        const char *after, int limit,
                                        struct iso_neutron_project **out, int *n,
                                        struct iso_error *err)
{
	struct ctl_neutron *nt = c->neutron;
	int r = ctl_authorize(p, "neutron.project.list", NULL, err);

	*out = NULL;
	*n = 0;
	if (r < 0)
		return r;
	*out = calloc((size_t)(limit > 0 ? limit : 1), sizeof(**out));
	if (!*out)
		return iso_error_set(err, ISO_E_INTERNAL, NULL, "out of memory");
	for (int i = 0; i < nt->n_projects && *n < limit; i++)
		if (!after || strcmp(nt->projects[i].project_id, after) > 0)
			(*out)[(*n)++] = nt->projects[i];
	return 0;
}

int ctl_neutron_tenant_delete(struct iso_controller *c, int64_t tenant_id, const char *name,
                              struct iso_error *err)
{
	const struct ctl_neutron *nt = c->neutron;

	for (int i = 0; nt && i < nt->n_projects; i++)
		if (nt->projects[i].tenant_id == tenant_id)
			return iso_error_set(err, ISO_E_CONFLICT, NULL,
			                     "tenant \"%s\" is mapped from Neutron project \"%s\"; "
			                     "unmap it first (DELETE /v1/neutron/projects/%s)",
			                     name, nt->projects[i].project_id,
			                     nt->projects[i].project_id);
	return 0;
}
