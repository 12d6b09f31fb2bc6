/* overlay.c: the node agent's side of the tenant overlay (issue 14). From the
 * desired document's members (their `overlay`: VNI, this node's index, the
 * peers) and the network namespaces of their sandboxes, it brings the
 * node's kernel to what they need, level-triggered, through the sandbox
 * library (src/sandbox/overlay*.c): one bridge and VXLAN device per tenant
 * with a member here, one veth per member, the nft guard allowing exactly
 * the (peer, VNI) pairs of those tenants; and it removes what no wanted
 * member explains (a released member's veth, a tenant with no member left,
 * the guard when no overlay member is left). A member's slot (its
 * address's last octet less 2) is read back from its eth0, so an agent that
 * restarts keeps every address. What it reports in the status `overlay` is
 * read back from the kernel afterwards, never copied from the document:
 * the Ethernet verifier relies on that (docs/agents.md, "overlay"). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "isostack/agent.h"
#include "isostack/codec.h"
#include "isostack/sandbox.h"
#include "isostack/util.h"

/* "iso-<allocation>-<member>": the sandbox's (and the veth alias's) name. */
static void member_name(const struct iso_agent_member_want *w, char out[ISO_NAME_MAX])
{
	snprintf(out, ISO_NAME_MAX, "iso-%s-%u", w->allocation, w->member);
}

/* The veth alias of one input: its own name (a CNI attachment) or its
 * member's. */
static const char *in_name(const struct iso_agent_overlay_member_in *in, char buf[ISO_NAME_MAX])
{
	if (in->name)
		return in->name;
	member_name(in->want, buf);
	return buf;
}

/* The inverse, for what the kernel holds; -EINVAL when not ours. */
static int parse_member_name(const char *name, char *alloc, size_t size, int *member)
{
	if (strncmp(name, "iso-", 4) != 0)
		return -EINVAL;
	const char *dash = strrchr(name, '-');
	if (!dash || dash <= name + 4 || !dash[1])
		return -EINVAL;
	char *end;
	long m = strtol(dash + 1, &end, 10);
	if (*end || m < 0 || m > 65535 || (size_t)(dash - (name + 4)) >= size)
		return -EINVAL;
	memcpy(alloc, name + 4, (size_t)(dash - (name + 4)));
	alloc[dash - (name + 4)] = '\0';
	*member = (int)m;
	return 0;
}

/* The slot of an address 10.a.b.(slot+2) on node_index, or -1. */
static int slot_of(const char *ip, unsigned node_index)
{
	unsigned a, b, c, d;
	char tail;
	if (sscanf(ip, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a != 10 ||
	    b != node_index / 256 || c != node_index % 256 || d < 2 || d > ISO_OVERLAY_SLOT_MAX + 2)
		return -1;
	return (int)d - 2;
}

struct vni_set {
	size_t n;
	uint32_t vni[ISO_AGENT_MAX_OVERLAY_TENANTS];
};

static bool vni_has(const struct vni_set *s, uint32_t v)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->vni[i] == v)
			return true;
	return false;
}

/* The wanted tenants (members with an overlay and a namespace), and the
 * guard's pairs: every peer of every wanted tenant. */
static int wanted(const struct iso_agent_overlay_member_in *in, size_t n, struct vni_set *vs,
                  struct iso_overlay_allow **allow, size_t *n_allow, struct iso_error *err)
{
	vs->n = 0;
	*allow = NULL;
	*n_allow = 0;
	size_t cap = 0;
	for (size_t i = 0; i < n; i++) {
		const struct iso_agent_member_want *w = in[i].want;
		if (!w->has_overlay || !in[i].netns)
			continue;
		if (!vni_has(vs, w->vni)) {
			if (vs->n == ISO_AGENT_MAX_OVERLAY_TENANTS)
				return iso_error_set(err, ISO_E_INVALID, "members",
				                     "more than %d overlay tenants on one node",
				                     ISO_AGENT_MAX_OVERLAY_TENANTS);
			vs->vni[vs->n++] = w->vni;
		}
		for (size_t p = 0; p < w->n_peers; p++) {
			bool dup = false;
			for (size_t k = 0; k < *n_allow && !dup; k++)
				dup = (*allow)[k].vni == w->vni &&
				      strcmp((*allow)[k].peer, w->peers[p]) == 0;
			if (dup)
				continue;
			if (*n_allow == cap) {
				cap = cap ? 2 * cap : 16;
				void *q = realloc(*allow, cap * sizeof(**allow));
				if (!q)
					return iso_error_set(err, ISO_E_INTERNAL, "members",
					                     "out of memory");
				*allow = q;
			}
			struct iso_overlay_allow *a = &(*allow)[(*n_allow)++];
			iso_strlcpy(a->peer, w->peers[p], sizeof(a->peer));
			a->vni = w->vni;
		}
	}
	return 0;
}

/* The union of the peers the members of tenant vni list. */
static size_t tenant_peers(const struct iso_agent_overlay_member_in *in, size_t n, uint32_t vni,
                           const char **out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct iso_agent_member_want *w = in[i].want;
		if (!w->has_overlay || w->vni != vni || !in[i].netns)
			continue;
		for (size_t p = 0; p < w->n_peers; p++) {
			bool dup = false;
			for (size_t j = 0; j < k && !dup; j++)
				dup = strcmp(out[j], w->peers[p]) == 0;
			if (!dup && k < cap)
				out[k++] = w->peers[p];
		}
	}
	return k;
}

static void reason(struct iso_agent_overlay_member_in *m, const char *what, const char *why)
{
	snprintf(m->reason, sizeof(m->reason), "%s: %.200s", what, why);
}

/* Whether tenant vni's emptied bridge stays for now (env.linger); `next`
 * gets the entries that stay. */
static bool linger_keep(const struct iso_agent_overlay_linger *l,
                        struct iso_agent_overlay_linger *next, uint32_t vni, uint64_t now)
{
	uint64_t since = now;

	if (!l || next->n == ISO_ARRAY_SIZE(next->t))
		return false;
	for (size_t i = 0; i < l->n; i++)
		if (l->t[i].vni == vni)
			since = l->t[i].since_ns;
	if (now - since >= l->hold_ns)
		return false;
	next->t[next->n].vni = vni;
	next->t[next->n].since_ns = since;
	next->n++;
	return true;
}

/* Removes every member veth and tenant the wanted set does not explain
 * (an emptied tenant's bridge may linger: env.linger). */
static int remove_stale(const struct iso_agent_overlay_env *env,
                        const struct iso_agent_overlay_member_in *in, size_t n,
                        const struct vni_set *vs, struct iso_error *err)
{
	struct iso_overlay_state st;
	int r = iso_overlay_read(env->host_netns, &st, err);
	if (r < 0)
		return r;
	struct iso_agent_overlay_linger next = {.hold_ns = env->linger ? env->linger->hold_ns : 0};
	uint64_t now = iso_mono_ns();
	for (size_t t = 0; t < st.n_tenants && r == 0; t++) {
		const struct iso_overlay_tenant_state *ts = &st.tenants[t];
		size_t left = ts->n_members;
		for (size_t k = 0; k < ts->n_members && r == 0; k++) {
			bool keep = false;
			for (size_t i = 0; i < n && !keep; i++) {
				char name[ISO_NAME_MAX];
				keep = in[i].want->has_overlay && in[i].netns &&
				       in[i].want->vni == ts->vni &&
				       strcmp(in_name(&in[i], name), ts->members[k].name) == 0;
			}
			if (keep)
				continue;
			r = iso_overlay_member_remove(env->host_netns, ts->members[k].name, err);
			left--;
		}
		if (r == 0 && left == 0 && !vni_has(vs, ts->vni)) {
			if (!linger_keep(env->linger, &next, ts->vni, now)) {
				r = iso_overlay_tenant_remove(env->host_netns, ts->vni, err);
			} else if (ts->vxlan[0]) {
				/* the bridge alone: its tunnel goes with its guard pairs */
				struct iso_overlay_tenant bare = {.vni = ts->vni};
				r = iso_overlay_tenant_ensure(env->host_netns, &bare, err);
			}
		}
	}
	iso_overlay_state_clear(&st);
	if (env->linger && r == 0)
		*env->linger = next; /* (a tenant wanted again, or gone, is dropped) */
	return r;
}

/* The slots in use on this node for tenant vni, read back from the members'
 * eth0 addresses. */
static void slots_in_use(const struct iso_agent_overlay_member_in *in, size_t n, uint32_t vni,
                         unsigned node_index, bool used[ISO_OVERLAY_SLOT_MAX + 1])
{
	memset(used, 0, (ISO_OVERLAY_SLOT_MAX + 1) * sizeof(bool));
	for (size_t i = 0; i < n; i++) {
		if (!in[i].want->has_overlay || in[i].want->vni != vni || !in[i].netns ||
		    in[i].address || in[i].ifname)
			continue;
		char ip[ISO_IPV4_MAX];
		if (iso_overlay_member_address(in[i].netns, ip, NULL) == 0) {
			int s = slot_of(ip, node_index);
			if (s >= 0)
				used[s] = true;
		}
	}
}

int iso_agent_overlay_reconcile(const struct iso_agent_overlay_env *env,
                                struct iso_agent_overlay_member_in *in, size_t n,
                                struct iso_agent_overlay *out, struct iso_error *err)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		in[i].ready = !in[i].want->has_overlay;
		in[i].reason[0] = '\0';
	}
	bool any = false;
	for (size_t i = 0; i < n; i++)
		any = any || in[i].want->has_overlay;
	bool have_underlay =
	    env->underlay_ip && *env->underlay_ip && env->underlay_dev && *env->underlay_dev;
	struct vni_set vs;
	_cleanup_free_ struct iso_overlay_allow *allow = NULL;
	size_t n_allow = 0;
	int r = wanted(in, n, &vs, &allow, &n_allow, err);
	if (r < 0)
		return r;
	char nb[ISO_NAME_MAX];
	int only = -1;
	for (size_t i = 0; env->only_name && i < n && only < 0; i++)
		if (strcmp(in_name(&in[i], nb), env->only_name) == 0)
			only = (int)i;
	if (env->only_name && only < 0)
		return iso_error_set(err, ISO_E_NOT_FOUND, "name", "%s: not among the members",
		                     env->only_name);
	uint64_t t0 = iso_mono_ns(), t_stale, t_tenant = 0, t_members = 0, t_guard;
	if (!env->only_name && (r = remove_stale(env, in, n, &vs, err)) < 0)
		return r;
	t_stale = iso_mono_ns();

	for (size_t v = 0; v < vs.n; v++) {
		if (only >= 0 && vs.vni[v] != in[only].want->vni)
			continue;
		const char *peers[ISO_AGENT_PEERS_MAX];
		struct iso_overlay_tenant t = {
		    .vni = vs.vni[v],
		    .underlay_dev = env->underlay_dev,
		    .local_ip = env->underlay_ip,
		    .peers = peers,
		    .n_peers = tenant_peers(in, n, vs.vni[v], peers, ISO_AGENT_PEERS_MAX),
		};
		struct iso_error terr = {0};
		size_t n_peers = t.n_peers;
		if (!have_underlay) {
			/* The bridge alone (a VXLAN device left from before goes:
			 * no tunnel stays up without its guard). Enough when the
			 * tenant's members are all here; else a tunnel needs this
			 * node's underlay address. */
			t.local_ip = NULL;
			t.underlay_dev = NULL;
			t.n_peers = 0;
		}
		uint64_t ta = iso_mono_ns();
		bool tenant_ok = iso_overlay_tenant_ensure(env->host_netns, &t, &terr) == 0;
		uint64_t tb = iso_mono_ns();
		t_tenant += tb - ta;
		if (tenant_ok && !have_underlay && n_peers) {
			tenant_ok = false;
			iso_strlcpy(terr.message, "this node has no underlay address",
			            sizeof(terr.message));
		}
		bool used[ISO_OVERLAY_SLOT_MAX + 1];
		unsigned node_index = 0;
		for (size_t i = 0; i < n; i++)
			if (in[i].want->has_overlay && in[i].want->vni == vs.vni[v])
				node_index = in[i].want->node_index;
		slots_in_use(in, n, vs.vni[v], node_index, used);
		for (size_t i = 0; i < n; i++) {
			const struct iso_agent_member_want *w = in[i].want;
			if (!w->has_overlay || w->vni != vs.vni[v] || !in[i].netns ||
			    (only >= 0 && (int)i != only))
				continue;
			if (!tenant_ok) {
				reason(&in[i], "overlay", terr.message);
				continue;
			}
			char ip[ISO_IPV4_MAX];
			int slot = -1;
			struct iso_overlay_member_link lk;
			if (in[i].address)
				slot = 0; /* the pod's IPAM's address, no slot */
			else if (iso_overlay_member_link_read(in[i].netns, in[i].ifname, &lk,
			                                      NULL) == 0) {
				iso_strlcpy(ip, lk.address, sizeof(ip));
				slot = slot_of(ip, w->node_index);
			}
			for (int s = 0; slot < 0 && s <= ISO_OVERLAY_SLOT_MAX; s++)
				if (!used[s]) {
					slot = s;
					used[s] = true;
				}
			if (slot < 0) {
				reason(&in[i], "overlay",
				       "no free address for the tenant on this node");
				continue;
			}
			char name[ISO_NAME_MAX];
			struct iso_overlay_member m = {.name = in_name(&in[i], name),
			                               .vni = w->vni,
			                               .member_netns = in[i].netns,
			                               .node_index = w->node_index,
			                               .slot = (unsigned)slot,
			                               .ifname = in[i].ifname,
			                               .address = in[i].address};
			struct iso_error merr = {0};
			if (iso_overlay_member_ensure(env->host_netns, &m, &merr) < 0)
				reason(&in[i], "overlay", merr.message);
		}
		t_members += iso_mono_ns() - tb;
	}
	for (size_t i = 0; i < n; i++) {
		if (!in[i].want->has_overlay || in[i].reason[0])
			continue;
		if (!in[i].netns)
			reason(&in[i], "overlay", "the member has no network namespace yet");
	}

	struct iso_error gerr = {0};
	if (vs.n && have_underlay)
		r = iso_overlay_guard_apply(env->host_netns, env->underlay_dev, allow, n_allow,
		                            &gerr);
	else if (only < 0)
		r = iso_overlay_guard_remove(env->host_netns, &gerr); /* (the tick's to remove) */
	else
		r = 0;
	if (r < 0)
		for (size_t i = 0; i < n; i++)
			if (in[i].want->has_overlay && !in[i].reason[0])
				reason(&in[i], "overlay guard", gerr.message);
	t_guard = iso_mono_ns();
	iso_log(ISO_LOG_DEBUG, "agent.overlay_steps",
	        "stale_ms=%.2f tenants_ms=%.2f members_ms=%.2f guard_ms=%.2f",
	        (double)(t_stale - t0) / 1e6, (double)t_tenant / 1e6, (double)t_members / 1e6,
	        (double)(t_guard - t_stale - t_tenant - t_members) / 1e6);

	if (only >= 0) {
		in[only].ready = !in[only].reason[0];
		return 0;
	}
	if (!any)
		return 0; /* the status has no `overlay` */
	return iso_agent_overlay_read(env, in, n, out, err);
}

int iso_agent_overlay_read(const struct iso_agent_overlay_env *env,
                           struct iso_agent_overlay_member_in *in, size_t n,
                           struct iso_agent_overlay *out, struct iso_error *err)
{
	memset(out, 0, sizeof(*out));
	struct iso_overlay_guard_state g;
	int r = iso_overlay_guard_read(env->host_netns, &g, err);
	if (r < 0)
		return r;
	out->guard = g.present;
	out->drops = g.drops;
	if (g.n_allowed) {
		out->allowed = calloc(g.n_allowed, sizeof(*out->allowed));
		if (!out->allowed) {
			iso_overlay_guard_state_clear(&g);
			return iso_error_set(err, ISO_E_INTERNAL, "overlay", "out of memory");
		}
		for (size_t i = 0; i < g.n_allowed && i < ISO_AGENT_MAX_OVERLAY_ALLOWED; i++) {
			iso_strlcpy(out->allowed[i].peer, g.allowed[i].peer,
			            sizeof(out->allowed[i].peer));
			out->allowed[i].vni = g.allowed[i].vni;
			out->n_allowed++;
		}
	}
	iso_overlay_guard_state_clear(&g);

	struct iso_overlay_state st;
	if ((r = iso_overlay_read(env->host_netns, &st, err)) < 0)
		goto fail;
	if (st.n_tenants) {
		out->tenants = calloc(st.n_tenants, sizeof(*out->tenants));
		if (!out->tenants) {
			iso_overlay_state_clear(&st);
			r = iso_error_set(err, ISO_E_INTERNAL, "overlay", "out of memory");
			goto fail;
		}
	}
	for (size_t t = 0; t < st.n_tenants && t < ISO_AGENT_MAX_OVERLAY_TENANTS; t++) {
		const struct iso_overlay_tenant_state *ts = &st.tenants[t];
		struct iso_agent_overlay_tenant *ot = &out->tenants[out->n_tenants++];
		ot->vni = ts->vni;
		iso_strlcpy(ot->bridge, ts->bridge, sizeof(ot->bridge));
		iso_strlcpy(ot->vxlan, ts->vxlan, sizeof(ot->vxlan));
		if (!ts->n_members)
			continue;
		ot->members = calloc(ts->n_members, sizeof(*ot->members));
		if (!ot->members) {
			iso_overlay_state_clear(&st);
			r = iso_error_set(err, ISO_E_INTERNAL, "overlay", "out of memory");
			goto fail;
		}
		for (size_t k = 0; k < ts->n_members && k < ISO_AGENT_MAX_OVERLAY_MEMBERS; k++) {
			struct iso_agent_overlay_member *om = &ot->members[ot->n_members];
			memset(om, 0, sizeof(*om));
			/* The address from the member's own namespace, when the
			 * agent knows it; the veth's peer is eth0 by construction
			 * (a CNI attachment's: its CNI_IFNAME). */
			iso_strlcpy(om->ifname, "eth0", sizeof(om->ifname));
			for (size_t i = 0; i < n; i++) {
				char name[ISO_NAME_MAX];
				struct iso_overlay_member_link lk;
				if (in[i].netns &&
				    strcmp(in_name(&in[i], name), ts->members[k].name) == 0) {
					if (iso_overlay_member_link_read(in[i].netns, in[i].ifname,
					                                 &lk, NULL) == 0 &&
					    lk.address[0] && in[i].reason[0] == '\0')
						in[i].ready = true;
					iso_strlcpy(om->address, lk.address, sizeof(om->address));
					if (in[i].ifname)
						iso_strlcpy(om->ifname, in[i].ifname,
						            sizeof(om->ifname));
					break;
				}
			}
			if (parse_member_name(ts->members[k].name, om->allocation,
			                      sizeof(om->allocation), &om->member) < 0)
				continue; /* a joined attachment's veth: not a member's */
			ot->n_members++;
		}
	}
	iso_overlay_state_clear(&st);
	return 0;
fail:
	iso_agent_overlay_clear(out);
	return r;
}

void iso_agent_overlay_clear(struct iso_agent_overlay *ov)
{
	if (!ov)
		return;
	for (int i = 0; ov->tenants && i < ov->n_tenants; i++)
		free(ov->tenants[i].members);
	free(ov->tenants);
	free(ov->allowed);
	memset(ov, 0, sizeof(*ov));
}

/* ---- the agent's tick ---- */

/* The address the kernel would send from to reach `peer` (a UDP connect
 * sends nothing): this node's underlay address, with no flag to keep in
 * step with the inventory. -errno when no route leads there. */
static int source_for(const char *peer, char out[ISO_IPV4_MAX])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(ISO_OVERLAY_PORT)};
	if (inet_pton(AF_INET, peer, &a.sin_addr) != 1)
		return -EINVAL;
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -errno;
	struct sockaddr_in l;
	socklen_t len = sizeof(l);
	if (getsockname(s, (struct sockaddr *)&l, &len) < 0)
		return -errno;
	if (!inet_ntop(AF_INET, &l.sin_addr, out, ISO_IPV4_MAX))
		return -EINVAL;
	return 0;
}

void agent_overlay_tick(const char *node, const struct iso_agent_desired *d,
                        struct agent_table_entry *entries, const struct agent_attachment *att,
                        size_t n_att, struct agent_attach_result *res, const char *only,
                        json_t *status, bool *clean, struct iso_agent_overlay_linger *linger)
{
	bool any = n_att > 0;
	for (size_t i = 0; i < d->n_members; i++)
		any = any || d->members[i].has_overlay;
	if (!any && *clean)
		return;
	*clean = false;
	size_t cap = d->n_members + n_att;
	struct iso_agent_overlay_member_in *in = calloc(cap ? cap : 1, sizeof(*in));
	char(*paths)[64] = calloc(d->n_members ? d->n_members : 1, sizeof(*paths));
	char(*names)[ISO_NAME_MAX] = calloc(n_att ? n_att : 1, sizeof(*names));
	if (!in || !paths || !names) {
		free(in);
		free(paths);
		free(names);
		iso_log(ISO_LOG_ERR, "agent.overlay_failed", "node=%s msg=\"out of memory\"", node);
		return;
	}
	char local[ISO_IPV4_MAX] = "", dev[ISO_OVERLAY_IFNAME] = "";
	for (size_t i = 0; i < d->n_members && !local[0]; i++)
		for (size_t p = 0; p < d->members[i].n_peers && !local[0]; p++)
			if (source_for(d->members[i].peers[p], local) < 0)
				local[0] = '\0';
	if (local[0] && iso_overlay_underlay_dev(NULL, local, dev, NULL) < 0)
		local[0] = '\0';
	for (size_t i = 0; i < d->n_members; i++) {
		in[i].want = &d->members[i];
		if (entries[i].ready && entries[i].sb.holder_pid > 0) {
			snprintf(paths[i], sizeof(paths[i]), "/proc/%d/ns/net",
			         entries[i].sb.holder_pid);
			in[i].netns = paths[i];
		}
	}
	size_t n_in = d->n_members;
	/* the pods' attachments (cni.c): a created one is its member's input */
	agent_attachment_inputs(d, att, n_att, in, names, &n_in);
	struct iso_agent_overlay_env env = {.host_netns = NULL,
	                                    .underlay_ip = local,
	                                    .underlay_dev = dev,
	                                    .only_name = only,
	                                    .linger = linger};
	struct iso_agent_overlay ov;
	struct iso_error err = {0};
	uint64_t t0 = iso_mono_ns();
	int r = iso_agent_overlay_reconcile(&env, in, n_in, &ov, &err);
	iso_log(ISO_LOG_DEBUG, "agent.overlay_pass", "node=%s only=%s inputs=%zu ms=%.2f", node,
	        only ? only : "-", n_in, (double)(iso_mono_ns() - t0) / 1e6);
	if (r < 0)
		iso_log(ISO_LOG_WARN, "agent.overlay_failed", "node=%s field=%s msg=\"%s\"", node,
		        err.field, err.message);
	for (size_t i = 0; i < d->n_members; i++) {
		bool pod = in[i].ifname != NULL; /* an attachment's member */
		if (!d->members[i].has_overlay || (!entries[i].ready && !pod))
			continue;
		if (r < 0 || !in[i].ready) {
			/* the member is not ready without its network */
			entries[i].ready = false;
			iso_codec_reason_copy(entries[i].reason,
			                      r < 0 ? err.message
			                            : (in[i].reason[0] ? in[i].reason : "overlay"));
		} else if (pod) {
			entries[i].ready = true;
			entries[i].reason[0] = '\0';
		}
	}
	for (size_t a = 0; res && a < n_att; a++) {
		char name[ISO_NAME_MAX];
		res[a].ready = false;
		iso_strlcpy(res[a].reason, "its allocation is not in the node's desired state",
		            sizeof(res[a].reason));
		agent_attachment_name(&att[a], name);
		for (size_t i = 0; i < n_in; i++) {
			char nb[ISO_NAME_MAX];
			if (!in[i].netns || strcmp(in_name(&in[i], nb), name) != 0)
				continue;
			res[a].ready = r == 0 && in[i].ready;
			iso_strlcpy(res[a].reason,
			            r < 0 ? err.message : (in[i].reason[0] ? in[i].reason : ""),
			            sizeof(res[a].reason));
		}
	}
	if (only) {
		/* a CNI request's: the tick reports and cleans */
		iso_agent_overlay_clear(&ov);
		free(in);
		free(paths);
		free(names);
		return;
	}
	if (any && r == 0)
		json_object_set_new(status, "overlay", iso_codec_status_overlay_encode(&ov));
	/* (a lingering bridge is not clean: a later pass removes it) */
	*clean = !any && r == 0 && ov.n_tenants == 0 && !ov.guard && (!linger || !linger->n);
	iso_agent_overlay_clear(&ov);
	free(in);
	free(paths);
	free(names);
}
