/* fuzz_agent_socket.c: what the node agent's unix socket reads from a
 * caller (src/agent/socket.c, docs/agent.md "Sandboxes"): one request,
 * {"allocation": A, "member": M} or (issue 15) {"tenant": T, "key": K} or
 * (issue 17) {"op": "cxi_admit", ...}, and, from the state dir after a
 * restart, the sandbox records (STATE_DIR/sandboxes/<name>.json) and the
 * admitted CXI identities (NODE_DIR/cxi-admitted.json). The first byte
 * picks which: even, the bytes are a request answered by
 * agent_socket_answer over a table holding one ready, one waiting and one
 * released member (the ready one with a VNI) and a CXI state that is off
 * (--cxi-library none), so a cxi_admit is always refused; 3 mod 4, they
 * are the admitted file for agent_cxi_admitted_decode; else a record for
 * agent_record_decode.
 * Properties: an answer is always a JSON object, either a handle (of the
 * ready member, exactly what the table holds; for a key, only acme's
 * slurm-1, with its devices and P_Key) or {"error","message"} with a known
 * code and a message; a request the parser takes names a valid allocation
 * id and a member 0..1023, or a tenant name and a valid key; a refusal of
 * the parser or of the
 * record decode says why; a decoded record names a valid sandbox. */
#include <string.h>

#include "../../src/agent/internal.h"
#include "fuzz.h"

#define A1 "a-0123456789abcdef"

static struct agent_sandboxes table;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct agent_table_entry e[2];

	pthread_mutex_init(&table.lock, NULL);
	iso_strlcpy(table.cg.root, "/sys/fs/cgroup", sizeof(table.cg.root));
	for (int i = 0; i < 2; i++) {
		iso_strlcpy(e[i].node, "n1", sizeof(e[i].node));
		iso_strlcpy(e[i].allocation, A1, sizeof(e[i].allocation));
		e[i].member = (unsigned)i;
		snprintf(e[i].sb.name, sizeof(e[i].sb.name), "iso-%s-%d", A1, i);
		iso_strlcpy(e[i].cpus, "2-3", sizeof(e[i].cpus));
	}
	e[0].ready = e[0].member_ready = true;
	for (int i = 0; i < 2; i++) {
		iso_strlcpy(e[i].tenant, "acme", sizeof(e[i].tenant));
		snprintf(e[i].key, sizeof(e[i].key), "slurm-%d", i + 1);
	}
	iso_strlcpy(e[0].cuda, "MIG-aaa,MIG-bbb", sizeof(e[0].cuda));
	e[0].has_vf = true;
	iso_strlcpy(e[0].vf_device, "mlx5_0", sizeof(e[0].vf_device));
	e[0].pkey = 0x8001;
	iso_strlcpy(e[1].member_reason, "waiting for its GPU instances",
	            sizeof(e[1].member_reason));
	table.real = true;
	e[0].sb.holder_pid = 4242;
	e[0].sb.holder_start = 777;
	iso_strlcpy(e[1].reason, "waiting for its GPU instances", sizeof(e[1].reason));
	table.entries = e;
	table.n = table.cap = 2;
	static struct agent_tombstone tombs[AGENT_TOMBSTONES];
	table.tombs = tombs;
	iso_strlcpy(tombs[0].allocation, A1, sizeof(tombs[0].allocation));
	tombs[0].member = 5;
	iso_strlcpy(tombs[0].tenant, "acme", sizeof(tombs[0].tenant));
	iso_strlcpy(tombs[0].key, "slurm-5", sizeof(tombs[0].key));
	table.n_tombs = 1;
	table.tomb_next = 1;
	e[0].cxi_vni = 1100;
	{
		struct agent_cxi_config cc = {.off = true};
		struct iso_error err = {0};
		if (agent_cxi_new(&cc, &table.cxi, &err) < 0)
			return -1;
	}
	return 0;
}

static void request(const char *text, size_t len)
{
	struct agent_request rq;
	struct iso_error err = {0};
	int r = agent_request_parse(text, len, &rq, &err);
	char *answer;
	json_t *doc;
	json_error_t je;

	fuzz_check_refusal(r, &err, "agent_request_parse");
	if (r == 0 && !rq.by_key) {
		FUZZ_ASSERT(strlen(rq.allocation) == 18 && strncmp(rq.allocation, "a-", 2) == 0 &&
		                strspn(rq.allocation + 2, "0123456789abcdef") == 16,
		            "allocation \"%s\"", rq.allocation);
		FUZZ_ASSERT(rq.member <= 1023, "member %u", rq.member);
	}
	if (r == 0 && rq.by_key)
		FUZZ_ASSERT(iso_name_valid(rq.tenant) && iso_idem_key_valid(rq.key),
		            "tenant \"%s\" key \"%s\"", rq.tenant, rq.key);
	if (r == 0 && rq.cxi_admit)
		FUZZ_ASSERT(iso_name_valid(rq.tenant) && rq.uid >= 1 && rq.uid < UINT32_MAX &&
		                rq.gid >= 1 && rq.gid < UINT32_MAX,
		            "tenant \"%s\" uid %u gid %u", rq.tenant, rq.uid, rq.gid);
	answer = agent_socket_answer(&table, 0, text, len);
	FUZZ_ASSERT(answer != NULL, "no answer");
	doc = json_loads(answer, JSON_REJECT_DUPLICATES, &je);
	FUZZ_ASSERT(json_is_object(doc), "answer not an object: %s", answer);
	if (json_object_get(doc, "error")) {
		enum iso_errcode c;
		const char *msg = json_string_value(json_object_get(doc, "message"));
		FUZZ_ASSERT(json_object_size(doc) == 2 && msg && *msg, "refusal %s", answer);
		FUZZ_ASSERT(
		    iso_errcode_parse(json_string_value(json_object_get(doc, "error")), &c) == 0,
		    "code in %s", answer);
		FUZZ_ASSERT(r < 0 || c == ISO_E_NOT_FOUND || c == ISO_E_UNAVAILABLE ||
		                (rq.cxi_admit && (c == ISO_E_FORBIDDEN || c == ISO_E_INVALID)),
		            "%s", answer);
	} else if (r == 0 && rq.cxi_admit) {
		FUZZ_ASSERT(false, "a grant with CXI off: %s", answer);
	} else if (r == 0 && rq.by_key) {
		FUZZ_ASSERT(strcmp(rq.tenant, "acme") == 0 && strcmp(rq.key, "slurm-1") == 0,
		            "a member for another key: %s", answer);
		FUZZ_ASSERT(
		    json_is_true(json_object_get(doc, "ready")) &&
		        strcmp(json_string_value(json_object_get(doc, "allocation")), A1) == 0 &&
		        json_integer_value(json_object_get(doc, "member")) == 0 &&
		        strcmp(json_string_value(json_object_get(doc, "cuda_visible_devices")),
		               "MIG-aaa,MIG-bbb") == 0 &&
		        strcmp(json_string_value(json_object_get(doc, "pkey")), "0x8001") == 0 &&
		        json_is_null(json_object_get(doc, "pkey_index")) &&
		        json_integer_value(json_object_get(doc, "holder_pid")) == 4242 &&
		        json_integer_value(json_object_get(doc, "vni")) == 1100,
		    "%s", answer);
	} else {
		FUZZ_ASSERT(r == 0 && rq.member == 0 && strcmp(rq.allocation, A1) == 0,
		            "a handle for another member: %s", answer);
		FUZZ_ASSERT(json_integer_value(json_object_get(doc, "holder_pid")) == 4242, "%s",
		            answer);
	}
	json_decref(doc);
	free(answer);
}

static void record(const char *text, size_t len)
{
	struct agent_sandbox_record rec;
	struct iso_error err = {0};
	int r = agent_record_decode(text, len, &rec, &err);

	fuzz_check_refusal(r, &err, "agent_record_decode");
	if (r == 0) {
		FUZZ_ASSERT(iso_name_valid(rec.sb.name), "name %s", rec.sb.name);
		FUZZ_ASSERT(iso_name_valid(rec.node), "node %s", rec.node);
		FUZZ_ASSERT(rec.cpus[0] && iso_codec_cpus_valid(rec.cpus), "cpus %s", rec.cpus);
		FUZZ_ASSERT(rec.sb.holder_pid >= 0 && rec.member <= 1023, "pid %d",
		            rec.sb.holder_pid);
	}
}

static void admitted(const char *text, size_t len)
{
	struct agent_cxi_admit *v = NULL;
	struct iso_error err = {0};
	size_t n = 0;
	int r = agent_cxi_admitted_decode(text, len, &v, &n, &err);

	fuzz_check_refusal(r, &err, "agent_cxi_admitted_decode");
	FUZZ_ASSERT(r == 0 || (v == NULL && n == 0), "a refusal left entries");
	for (size_t i = 0; r == 0 && i < n; i++) {
		FUZZ_ASSERT(agent_alloc_id_valid(v[i].allocation) && v[i].member <= 1023,
		            "entry %zu: %s %u", i, v[i].allocation, v[i].member);
		FUZZ_ASSERT(v[i].vni >= 1 && v[i].vni <= 65535 && v[i].uid >= 1 && v[i].gid >= 1 &&
		                v[i].uid < UINT32_MAX && v[i].gid < UINT32_MAX,
		            "entry %zu: vni %u uid %u gid %u", i, v[i].vni, v[i].uid, v[i].gid);
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(v[j].member != v[i].member ||
			                strcmp(v[j].allocation, v[i].allocation) != 0,
			            "member twice");
	}
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] % 2 == 0)
		request((const char *)data + 1, size - 1);
	else if (data[0] % 4 == 3)
		admitted((const char *)data + 1, size - 1);
	else
		record((const char *)data + 1, size - 1);
	return 0;
}
