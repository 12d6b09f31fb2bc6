/* smp.c: what the fabric really holds, read the way the subnet manager and
 * the diag tools read it: libibnetdisc walks the fabric, libibmad sends
 * SubnGet(P_KeyTable) to each end port. The OpenSM driver confirms an intent
 * only by this read-back, never by trusting that OpenSM did what the file
 * said (fabric.md: ERR 0507/0512, a flattened fabric). Reading a 1,000-HCA
 * fabric must fit well inside a second: only the blocks the port's
 * PartitionCap needs are read, and reads can fan out over threads, each with
 * its own MAD port. Measured under ibsim (docs/fabric.md): one thread reads
 * 1,008 HCA tables in ~0.25 s, so one is the default; umad2sim crashes with
 * two MAD ports open in two threads, so under it reads never fan out. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include <infiniband/ibnetdisc.h>
#include <infiniband/mad.h>
#include <infiniband/umad.h>

#include "internal.h"

#define PKEYS_PER_BLOCK  32
#define MAX_BLOCKS       2048 /* 16-bit PartitionCap / 32 */
#define DEFAULT_TIMEOUT  200
#define DEFAULT_THREADS  1
#define UNAVAILABLE_HINT "no InfiniBand port: is ib_umad loaded, or run under ibsim's LD_PRELOAD"

/* One end port as the last discovery saw it. */
struct smp_ref {
	uint64_t guid;
	uint16_t lid;
	int port_num;
	bool is_switch;
	int capacity;
	char node_desc[64];
	ib_portid_t path; /* directed route, for ports without a LID yet */
};

struct iso_smp {
	char ca_name[64];
	int ca_port;
	int timeout_ms;
	int threads;
	int n_refs;
	struct smp_ref *refs; /* sorted by guid */
};

int iso_smp_open(const struct iso_smp_options *opt, struct iso_smp **out, struct iso_error *err)
{
	struct iso_smp *s = calloc(1, sizeof(*s));

	if (!s)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	if (opt && opt->ca_name)
		iso_strlcpy(s->ca_name, opt->ca_name, sizeof(s->ca_name));
	s->ca_port = opt ? opt->ca_port : 0;
	s->timeout_ms = opt && opt->timeout_ms > 0 ? opt->timeout_ms : DEFAULT_TIMEOUT;
	s->threads = opt && opt->threads > 0 ? opt->threads : DEFAULT_THREADS;
	const char *preload = getenv("LD_PRELOAD");
	if (preload && strstr(preload, "umad2sim"))
		s->threads = 1;
	*out = s;
	return 0;
}

void iso_smp_free(struct iso_smp *s)
{
	free(s->refs);
	free(s);
}

static struct ibmad_port *open_mad_port(struct iso_smp *s)
{
	int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS};
	struct ibmad_port *p;

	p = mad_rpc_open_port(s->ca_name[0] ? s->ca_name : NULL, s->ca_port, classes,
	                      (int)ISO_ARRAY_SIZE(classes));
	if (p) {
		mad_rpc_set_timeout(p, s->timeout_ms);
		mad_rpc_set_retries(p, 2);
	}
	return p;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct smp_ref *x = a, *y = b;

	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

static const struct smp_ref *find_ref(const struct iso_smp *s, uint64_t guid)
{
	struct smp_ref key = {.guid = guid};

	if (!s->n_refs)
		return NULL;
	return bsearch(&key, s->refs, (size_t)s->n_refs, sizeof(key), cmp_ref);
}

static void add_ref(const ibnd_node_t *node, const ibnd_port_t *port, struct smp_ref *r)
{
	memset(r, 0, sizeof(*r));
	r->guid = port->guid;
	r->port_num = port->portnum;
	r->is_switch = node->type == IB_NODE_SWITCH;
	/* A switch has one LID, on port 0; a CA port has its own. */
	r->lid = port->base_lid;
	r->capacity = (int)mad_get_field((void *)node->info, 0, IB_NODE_PARTITION_CAP_F);
	iso_strlcpy(r->node_desc, node->nodedesc, sizeof(r->node_desc));
	r->path = node->path_portid;
}

/* Rebuilds the GUID map from a fresh discovery. */
static int rediscover(struct iso_smp *s, struct iso_error *err)
{
	struct ibnd_config cfg = {.timeout_ms = (unsigned)s->timeout_ms, .retries = 2};
	ibnd_fabric_t *fab;
	struct smp_ref *refs;
	int n = 0, cap = 0;

	fab = ibnd_discover_fabric(s->ca_name[0] ? s->ca_name : NULL, s->ca_port, NULL, &cfg);
	if (!fab)
		return iso_error_set(err, ISO_E_UNAVAILABLE, "fabric",
		                     "fabric discovery failed: " UNAVAILABLE_HINT);
	for (ibnd_node_t *node = fab->nodes; node; node = node->next) {
		if (node->type == IB_NODE_SWITCH)
			cap += 1;
		else if (node->type == IB_NODE_CA)
			cap += node->numports;
	}
	refs = calloc(cap ? (size_t)cap : 1, sizeof(*refs));
	if (!refs) {
		ibnd_destroy_fabric(fab);
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	}
	for (ibnd_node_t *node = fab->nodes; node; node = node->next) {
		if (node->type == IB_NODE_SWITCH) {
			if (node->ports && node->ports[0] && n < cap)
				add_ref(node, node->ports[0], &refs[n++]);
		} else if (node->type == IB_NODE_CA && node->ports) {
			for (int p = 1; p <= node->numports && n < cap; p++)
				if (node->ports[p])
					add_ref(node, node->ports[p], &refs[n++]);
		}
	}
	ibnd_destroy_fabric(fab);
	qsort(refs, (size_t)n, sizeof(*refs), cmp_ref);
	free(s->refs);
	s->refs = refs;
	s->n_refs = n;
	return 0;
}

/* ---- reading tables, fanned out over threads ---- */

struct read_job {
	struct iso_smp *s;
	const struct smp_ref **refs;
	struct iso_port_table *out; /* parallel to refs */
	bool *ok;
	int from, to;
	bool no_port; /* this thread could not open a MAD port */
};

static int read_table(struct ibmad_port *mp, const struct smp_ref *r, struct iso_port_table *t)
{
	uint8_t buf[IB_SMP_DATA_SIZE];
	ib_portid_t id;
	int cap = r->capacity > 0 ? r->capacity : PKEYS_PER_BLOCK;
	int blocks = (cap + PKEYS_PER_BLOCK - 1) / PKEYS_PER_BLOCK;
	uint16_t *keys;
	int n = 0;

	if (blocks > MAX_BLOCKS)
		blocks = MAX_BLOCKS;
	if (r->lid) {
		memset(&id, 0, sizeof(id));
		ib_portid_set(&id, r->lid, 0, 0);
	} else {
		id = r->path;
	}
	keys = calloc((size_t)blocks * PKEYS_PER_BLOCK, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (int b = 0; b < blocks; b++) {
		/* The port number in the modifier only matters on a switch. */
		unsigned mod = (unsigned)b | (r->is_switch ? (unsigned)r->port_num << 16 : 0);

		memset(buf, 0, sizeof(buf));
		if (!smp_query_via(buf, &id, IB_ATTR_PKEY_TBL, mod, 0, mp)) {
			free(keys);
			return -EIO;
		}
		for (int i = 0; i < PKEYS_PER_BLOCK && b * PKEYS_PER_BLOCK + i < cap; i++) {
			uint16_t k = (uint16_t)(buf[2 * i] << 8 | buf[2 * i + 1]);
			if (k & ISO_PKEY_BASE_MASK)
				keys[n++] = k;
		}
	}
	memset(t, 0, sizeof(*t));
	t->guid = r->guid;
	t->lid = r->lid;
	t->port_num = r->port_num;
	t->is_switch = r->is_switch;
	t->capacity = r->capacity;
	iso_strlcpy(t->node_desc, r->node_desc, sizeof(t->node_desc));
	t->n_pkeys = n;
	t->pkeys = keys;
	return 0;
}

/* Closes a MAD port after unregistering its agents. The kernel frees them
 * on close anyway; umad2sim (ibsim) does not, and its table fills after
 * about 30 opens, after which every read fails. */
static void close_mad_port(struct ibmad_port *mp)
{
	static const int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS};

	for (size_t i = 0; i < ISO_ARRAY_SIZE(classes); i++) {
		int agent = mad_rpc_class_agent(mp, classes[i]);
		if (agent >= 0)
			umad_unregister(mad_rpc_portid(mp), agent);
	}
	mad_rpc_close_port(mp);
}

static void *read_worker(void *arg)
{
	struct read_job *j = arg;
	struct ibmad_port *mp = open_mad_port(j->s);

	if (!mp) {
		j->no_port = true;
		return NULL;
	}
	for (int i = j->from; i < j->to; i++)
		j->ok[i] = read_table(mp, j->refs[i], &j->out[i]) == 0;
	close_mad_port(mp);
	return NULL;
}

/* Reads refs[0..n) into a snapshot, in order, leaving out ports that failed. */
static int read_refs(struct iso_smp *s, const struct smp_ref **refs, int n,
                     struct iso_fabric_snapshot *out, int *n_failed, struct iso_error *err)
{
	struct read_job jobs[16];
	pthread_t tids[16];
	bool started[16] = {false};
	_cleanup_free_ struct iso_port_table *tabs = NULL;
	_cleanup_free_ bool *ok = NULL;
	int threads = s->threads, failed = 0, k = 0;
	bool no_port = false;
	int64_t t0 = (int64_t)(iso_mono_ns() / 1000000);

	memset(out, 0, sizeof(*out));
	if (threads > (int)ISO_ARRAY_SIZE(jobs))
		threads = (int)ISO_ARRAY_SIZE(jobs);
	/* A thread per 16 ports at least: opening a MAD port costs more than a
	 * handful of reads. */
	if (threads > (n + 15) / 16)
		threads = (n + 15) / 16;
	if (threads < 1)
		threads = 1;
	tabs = calloc(n ? (size_t)n : 1, sizeof(*tabs));
	ok = calloc(n ? (size_t)n : 1, sizeof(*ok));
	if (!tabs || !ok)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	for (int t = 0; t < threads; t++) {
		jobs[t] = (struct read_job){.s = s,
		                            .refs = refs,
		                            .out = tabs,
		                            .ok = ok,
		                            .from = n * t / threads,
		                            .to = n * (t + 1) / threads};
		if (t == threads - 1) {
			read_worker(&jobs[t]); /* the caller's thread reads the last share */
			continue;
		}
		started[t] = pthread_create(&tids[t], NULL, read_worker, &jobs[t]) == 0;
		if (!started[t])
			read_worker(&jobs[t]);
	}
	for (int t = 0; t < threads; t++) {
		if (started[t])
			pthread_join(tids[t], NULL);
		no_port |= jobs[t].no_port;
	}
	if (no_port) {
		for (int i = 0; i < n; i++)
			if (ok[i])
				free(tabs[i].pkeys);
		return iso_error_set(err, ISO_E_UNAVAILABLE, "fabric",
		                     "cannot open a MAD port: " UNAVAILABLE_HINT);
	}
	for (int i = 0; i < n; i++) {
		if (ok[i])
			tabs[k++] = tabs[i];
		else
			failed++;
	}
	out->n_ports = k;
	out->ports = ISO_TAKE(tabs);
	out->read_ms = (int64_t)(iso_mono_ns() / 1000000) - t0;
	if (failed)
		iso_log(ISO_LOG_WARN, "fabric.smp_read", "failed=%d of=%d", failed, n);
	if (n_failed)
		*n_failed = failed;
	return 0;
}

int iso_smp_discover(struct iso_smp *s, struct iso_fabric_snapshot *out, int *n_failed,
                     struct iso_error *err)
{
	_cleanup_free_ const struct smp_ref **refs = NULL;
	int64_t t0 = (int64_t)(iso_mono_ns() / 1000000);
	int r;

	r = rediscover(s, err);
	if (r < 0)
		return r;
	refs = calloc(s->n_refs ? (size_t)s->n_refs : 1, sizeof(*refs));
	if (!refs)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	for (int i = 0; i < s->n_refs; i++)
		refs[i] = &s->refs[i];
	r = read_refs(s, refs, s->n_refs, out, n_failed, err);
	if (r == 0)
		out->read_ms = (int64_t)(iso_mono_ns() / 1000000) - t0;
	return r;
}

int iso_smp_read_guids(struct iso_smp *s, const uint64_t *guids, int n,
                       struct iso_fabric_snapshot *out, struct iso_error *err)
{
	_cleanup_free_ const struct smp_ref **refs = NULL;
	bool rediscovered = false;
	int k = 0, r;

	refs = calloc(n ? (size_t)n : 1, sizeof(*refs));
	if (!refs)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	for (int i = 0; i < n; i++) {
		const struct smp_ref *ref = find_ref(s, guids[i]);

		if (!ref && !rediscovered) {
			/* A port we have not seen (or a LID that moved): one new
			 * discovery, then the map is trusted for the rest. */
			r = rediscover(s, err);
			if (r < 0)
				return r;
			rediscovered = true;
			k = 0;
			i = -1;
			continue;
		}
		if (ref)
			refs[k++] = ref;
	}
	return read_refs(s, refs, k, out, NULL, err);
}

int iso_fabric_read_live(struct iso_fabric_snapshot *out, int *n_failed, struct iso_error *err)
{
	_cleanup_(iso_smp_freep) struct iso_smp *s = NULL;
	int r = iso_smp_open(&(struct iso_smp_options){0}, &s, err);

	memset(out, 0, sizeof(*out));
	if (r < 0)
		return r;
	return iso_smp_discover(s, out, n_failed, err);
}
