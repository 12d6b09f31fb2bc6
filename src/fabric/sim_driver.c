/* sim_driver.c: the fabric as OpenSM would program it, in memory, so that
 * the controller, the verifier and their tests run the real rules without a
 * subnet manager: every inventory port is a limited member of 0x7fff,
 * members get their keys (0x8000 when full), GUIDs the fabric does not have
 * are skipped silently as OpenSM skips them, and a table that is full drops
 * the keys beyond its capacity (OpenSM's ERR 0512), which is reported as an
 * incident. The model has no delay: an applied intent is confirmed at once.
 * An external assignment's GUID (an OpenStack VF whose GUID Neutron's agent
 * wrote, docs/openstack.md) is a port of the fabric from the first intent
 * that names it on: the VF is there with that GUID whether or not isostack
 * programs it, and it stays (Default only) after its port is unbound.
 * A test hook injects rogue entries to prove that the verifier sees them.
 * A snapshot may run on another thread than apply (GET /v1/fabric/verify
 * reads off the server thread), so the model has its own lock; for tests,
 * ISO_TEST_SIM_FABRIC_READ_MS makes every snapshot take that long, as a real
 * fabric's read does. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isostack/fabric.h"

#define SIM_SERVICE_CAPACITY 128 /* service ports are not in the inventory: ConnectX's size */

struct sim_port {
	uint64_t guid;
	int capacity;
	char desc[64];
	int n, cap; /* entries, allocated */
	uint16_t *pkeys;
};

struct sim_driver {
	struct iso_fabric_driver base;
	int n_ports;
	struct sim_port *ports; /* sorted by guid */
	struct iso_fabric_status st;
	pthread_mutex_t mu; /* ports and st */
	long read_delay_ms; /* tests: how long a snapshot takes */
};

static const struct iso_fabric_driver_ops sim_ops;

static int cmp_port(const void *a, const void *b)
{
	const struct sim_port *x = a, *y = b;
	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

static struct sim_port *find_port(struct sim_driver *s, uint64_t guid)
{
	struct sim_port key = {.guid = guid};
	return bsearch(&key, s->ports, (size_t)s->n_ports, sizeof(key), cmp_port);
}

/* Appends a raw entry, growing the array up to the port's capacity. */
static int port_push(struct sim_port *p, uint16_t raw)
{
	if (p->n >= p->capacity)
		return -ENOSPC;
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 4;
		cap = cap > p->capacity ? p->capacity : cap;
		uint16_t *k = realloc(p->pkeys, sizeof(*k) * (size_t)cap);
		if (!k)
			return -ENOMEM;
		p->pkeys = k;
		p->cap = cap;
	}
	p->pkeys[p->n++] = raw;
	return 0;
}

/* OpenSM merges a key given twice into one entry, full when either is. */
static int port_add(struct sim_port *p, uint16_t base, bool full)
{
	for (int i = 0; i < p->n; i++) {
		if ((p->pkeys[i] & ISO_PKEY_BASE_MASK) == base) {
			if (full)
				p->pkeys[i] |= ISO_PKEY_FULL_BIT;
			return 0;
		}
	}
	return port_push(p, (uint16_t)(base | (full ? ISO_PKEY_FULL_BIT : 0)));
}

static int sim_apply_locked(struct sim_driver *s, const struct iso_fabric_intent *in,
                            struct iso_error *err);

static int sim_apply(struct iso_fabric_driver *d, const struct iso_fabric_intent *in,
                     struct iso_error *err)
{
	struct sim_driver *s = (struct sim_driver *)d;
	int r;

	pthread_mutex_lock(&s->mu);
	r = sim_apply_locked(s, in, err);
	pthread_mutex_unlock(&s->mu);
	return r;
}

/* The external GUIDs of the intent that the fabric has no port for yet
 * become ports (kept sorted by GUID). */
static int add_external_ports(struct sim_driver *s, const struct iso_fabric_intent *in)
{
	int sorted = s->n_ports, added = 0;

	for (int p = 0; p < in->n_parts; p++) {
		const struct iso_partition *part = &in->parts[p];
		for (int m = 0; m < part->n_members; m++) {
			const struct iso_fabric_member *mem = &part->members[m];
			struct sim_port key = {.guid = mem->guid};
			bool known = !mem->external ||
			             bsearch(&key, s->ports, (size_t)sorted, sizeof(key), cmp_port);
			for (int k = sorted; k < s->n_ports && !known; k++)
				known = s->ports[k].guid == mem->guid; /* added here, unsorted */
			if (known)
				continue;
			struct sim_port *np =
			    realloc(s->ports, sizeof(*np) * (size_t)(s->n_ports + 1));
			if (!np)
				return -ENOMEM;
			s->ports = np;
			np[s->n_ports] =
			    (struct sim_port){.guid = mem->guid, .capacity = SIM_SERVICE_CAPACITY};
			snprintf(np[s->n_ports].desc, sizeof(np[0].desc), "external VF");
			s->n_ports++;
			added++;
		}
	}
	if (added)
		qsort(s->ports, (size_t)s->n_ports, sizeof(*s->ports), cmp_port);
	return 0;
}

static int sim_apply_locked(struct sim_driver *s, const struct iso_fabric_intent *in,
                            struct iso_error *err)
{
	int dropped = 0;
	char first[160] = "";

	if (add_external_ports(s, in) < 0)
		return iso_error_set(err, ISO_E_INTERNAL, "", "sim fabric: out of memory");

	for (int i = 0; i < s->n_ports; i++) {
		s->ports[i].n = 0;
		if (port_push(&s->ports[i], ISO_PKEY_DEFAULT) == -ENOMEM)
			return iso_error_set(err, ISO_E_INTERNAL, "", "sim fabric: out of memory");
	}
	for (int p = 0; p < in->n_parts; p++) {
		const struct iso_partition *part = &in->parts[p];
		uint16_t base = part->pkey & ISO_PKEY_BASE_MASK;
		for (int m = 0; m < part->n_members; m++) {
			struct sim_port *port = find_port(s, part->members[m].guid);
			if (!port)
				continue; /* OpenSM skips an unknown GUID */
			int r =
			    port_add(port, base, part->members[m].membership == ISO_MEMBER_FULL);
			if (r == -ENOMEM)
				return iso_error_set(err, ISO_E_INTERNAL, "",
				                     "sim fabric: out of memory");
			if (r == -ENOSPC && dropped++ == 0)
				snprintf(first, sizeof(first),
				         "port 0x%016llx (%s) holds %d P_Keys, 0x%04x (%s) not "
				         "programmed",
				         (unsigned long long)port->guid, port->desc, port->capacity,
				         base, part->name);
		}
	}
	s->st.applied = in->generation;
	s->st.confirmed = in->generation;
	s->st.incident = dropped > 0;
	if (dropped)
		snprintf(s->st.incident_msg, sizeof(s->st.incident_msg),
		         "ERR 0512: P_Key table full on %d entr%s: %s", dropped,
		         dropped == 1 ? "y" : "ies", first);
	else
		s->st.incident_msg[0] = '\0';
	return 0;
}

static int sim_poll(struct iso_fabric_driver *d, struct iso_fabric_status *st)
{
	struct sim_driver *s = (struct sim_driver *)d;

	pthread_mutex_lock(&s->mu);
	*st = s->st;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int sim_snapshot_locked(struct sim_driver *s, struct iso_fabric_snapshot *out,
                               struct iso_error *err);

static int sim_snapshot(struct iso_fabric_driver *d, struct iso_fabric_snapshot *out,
                        struct iso_error *err)
{
	struct sim_driver *s = (struct sim_driver *)d;
	uint64_t t0 = iso_mono_ns();
	int r;

	if (s->read_delay_ms > 0) {
		struct timespec ts = {.tv_sec = s->read_delay_ms / 1000,
		                      .tv_nsec = (s->read_delay_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&s->mu);
	r = sim_snapshot_locked(s, out, err);
	pthread_mutex_unlock(&s->mu);
	if (r == 0)
		out->read_ms = (int64_t)((iso_mono_ns() - t0) / 1000000);
	return r;
}

static int sim_snapshot_locked(struct sim_driver *s, struct iso_fabric_snapshot *out,
                               struct iso_error *err)
{
	struct iso_fabric_snapshot snap = {0};

	snap.ports = calloc((size_t)(s->n_ports ? s->n_ports : 1), sizeof(*snap.ports));
	if (!snap.ports)
		return iso_error_set(err, ISO_E_INTERNAL, "", "sim fabric: out of memory");
	for (int i = 0; i < s->n_ports; i++) {
		const struct sim_port *p = &s->ports[i];
		struct iso_port_table *t = &snap.ports[snap.n_ports];
		*t = (struct iso_port_table){.guid = p->guid,
		                             .lid = (uint16_t)(i + 1),
		                             .port_num = 1,
		                             .capacity = p->capacity,
		                             .n_pkeys = p->n};
		iso_strlcpy(t->node_desc, p->desc, sizeof(t->node_desc));
		t->pkeys = malloc(sizeof(*t->pkeys) * (size_t)(p->n ? p->n : 1));
		if (!t->pkeys) {
			iso_fabric_snapshot_clear(&snap);
			return iso_error_set(err, ISO_E_INTERNAL, "", "sim fabric: out of memory");
		}
		if (p->n)
			memcpy(t->pkeys, p->pkeys, sizeof(*t->pkeys) * (size_t)p->n);
		snap.n_ports++;
	}
	*out = snap;
	return 0;
}

static void sim_free(struct iso_fabric_driver *d)
{
	struct sim_driver *s = (struct sim_driver *)d;
	for (int i = 0; s && i < s->n_ports; i++)
		free(s->ports[i].pkeys);
	if (s) {
		free(s->ports);
		pthread_mutex_destroy(&s->mu);
	}
	free(s);
}

static const struct iso_fabric_driver_ops sim_ops = {
    .name = "sim",
    .apply = sim_apply,
    .poll = sim_poll,
    .snapshot = sim_snapshot,
    .free = sim_free,
};

int iso_fabric_sim_inject(struct iso_fabric_driver *d, uint64_t guid, uint16_t raw_pkey)
{
	if (!d || d->ops != &sim_ops)
		return -EINVAL;
	struct sim_driver *s = (struct sim_driver *)d;
	int r = -ENOENT;

	pthread_mutex_lock(&s->mu);
	struct sim_port *p = find_port(s, guid);
	if (p)
		r = port_push(p, raw_pkey);
	pthread_mutex_unlock(&s->mu);
	return r;
}

static void sim_freep(struct sim_driver **s)
{
	if (*s)
		sim_free(&(*s)->base);
}

int iso_fabric_sim_driver_new(const struct iso_inventory *inv, struct iso_fabric_driver **out,
                              struct iso_error *err)
{
	_cleanup_(sim_freep) struct sim_driver *s = calloc(1, sizeof(*s));
	size_t n = 0;

	if (!s)
		return iso_error_set(err, ISO_E_INTERNAL, "", "sim fabric: out of memory");
	s->base.ops = &sim_ops;
	/* no SM process to reach: the model is the SM (docs/fabric.md) */
	iso_sm_health_set(&s->st.sm, ISO_SM_STATE_NONE,
	                  "the sim driver models the subnet manager in-process", iso_now_ms());
	pthread_mutex_init(&s->mu, NULL);
	const char *delay = getenv("ISO_TEST_SIM_FABRIC_READ_MS");
	s->read_delay_ms = delay ? strtol(delay, NULL, 10) : 0;
	for (int i = 0; i < inv->n_nodes; i++)
		if (inv->nodes[i].has_port)
			n += 1 + (size_t)inv->nodes[i].port.n_vfs;
	for (int i = 0; i < inv->fabric.n_services; i++)
		n += (size_t)inv->fabric.services[i].n_guids;
	s->ports = calloc(n ? n : 1, sizeof(*s->ports));
	if (!s->ports)
		return iso_error_set(err, ISO_E_INTERNAL, "", "sim fabric: out of memory");

	for (int i = 0; i < inv->n_nodes; i++) {
		const struct iso_node *node = &inv->nodes[i];
		if (!node->has_port)
			continue;
		struct sim_port *p = &s->ports[s->n_ports++];
		*p = (struct sim_port){.guid = node->port.guid,
		                       .capacity = node->port.pkey_capacity};
		snprintf(p->desc, sizeof(p->desc), "%.40s %s", node->name, node->port.device);
		for (int v = 0; v < node->port.n_vfs; v++) {
			p = &s->ports[s->n_ports++];
			*p = (struct sim_port){.guid = node->port.vf_guids[v],
			                       .capacity = node->port.pkey_capacity};
			snprintf(p->desc, sizeof(p->desc), "%.40s %s vf%d", node->name,
			         node->port.device, v);
		}
	}
	for (int i = 0; i < inv->fabric.n_services; i++) {
		const struct iso_shared_service *svc = &inv->fabric.services[i];
		for (int g = 0; g < svc->n_guids; g++) {
			struct sim_port *p = &s->ports[s->n_ports++];
			*p = (struct sim_port){.guid = svc->guids[g],
			                       .capacity = SIM_SERVICE_CAPACITY};
			snprintf(p->desc, sizeof(p->desc), "service %.40s", svc->name);
		}
	}
	qsort(s->ports, (size_t)s->n_ports, sizeof(*s->ports), cmp_port);
	/* Until the first apply: what the file of an empty intent programs. */
	for (int i = 0; i < s->n_ports; i++)
		if (port_push(&s->ports[i], ISO_PKEY_DEFAULT) < 0)
			return iso_error_set(err, ISO_E_INTERNAL, "", "sim fabric: out of memory");
	*out = &ISO_TAKE(s)->base;
	return 0;
}
