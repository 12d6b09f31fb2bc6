/* fuzz_agent_outbox.c: the node agent's fault outbox
 * (STATE_DIR/NODE/agent-faults.json, docs/agent.md "Faults"), which the
 * agent reads back at every start and before every XID it records, and
 * which may be what a crash or a full disk left. A refusal must name what is
 * wrong and hand out nothing. An accepted outbox must hold at most
 * ISO_AGENT_FAULTS_MAX faults in strictly growing seq order, none above
 * last_seq, each one a report body can be made of; acknowledging its first
 * fault must write back exactly the others (the writer and the reader
 * agree), and a fault recorded after it must get a seq above every earlier
 * one (or, when last_seq is INT64_MAX, be refused, the file left readable).
 * The input is written to the outbox's path in the harness's
 * directory. */
#include <string.h>

#include "fuzz.h"
#include "isostack/agent.h"

static bool same_fault(const struct iso_agent_fault *a, const struct iso_agent_fault *b)
{
	return a->seq == b->seq && a->gpu == b->gpu && a->xid == b->xid && a->gi == b->gi &&
	       a->ci == b->ci && a->member == b->member &&
	       strcmp(a->allocation, b->allocation) == 0;
}

static void check_accepted(const struct iso_agent_outbox *o)
{
	FUZZ_ASSERT(o->n <= ISO_AGENT_FAULTS_MAX && (o->n == 0 || o->faults), "%zu faults", o->n);
	for (size_t i = 0; i < o->n; i++) {
		const struct iso_agent_fault *f = &o->faults[i];
		json_t *body = iso_agent_fault_json(f);

		FUZZ_ASSERT(f->seq >= 1 && f->seq <= o->last_seq,
		            "faults[%zu]: seq %llu, last %llu", i, (unsigned long long)f->seq,
		            (unsigned long long)o->last_seq);
		FUZZ_ASSERT(i == 0 || f->seq > o->faults[i - 1].seq, "faults[%zu] out of order", i);
		FUZZ_ASSERT(f->gpu < ISO_GPU_MAX && f->gi >= -1 && f->ci >= -1 && f->member >= -1 &&
		                f->member <= 1023,
		            "faults[%zu]: gpu %u gi %d ci %d member %d", i, f->gpu, f->gi, f->ci,
		            f->member);
		FUZZ_ASSERT(body && json_integer_value(json_object_get(body, "seq")) ==
		                        (json_int_t)f->seq,
		            "faults[%zu]: no report body", i);
		json_decref(body);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_tmpdir("agent_outbox");
	char path[160];
	struct iso_agent_outbox o, back;
	struct iso_agent_fault f = {.gpu = 0, .xid = 79, .gi = -1, .ci = -1, .member = -1};
	struct iso_error err = {0};
	FILE *file;
	size_t kept;
	int r;

	snprintf(path, sizeof(path), "%s/" ISO_AGENT_FAULTS_FILE, dir);
	file = fopen(path, "we");
	if (!file || fwrite(data, 1, size, file) != size || fclose(file) != 0)
		abort();
	r = iso_agent_outbox_load(dir, &o, &err);
	fuzz_check_refusal(r, &err, "iso_agent_outbox_load");
	if (r < 0) {
		FUZZ_ASSERT(!o.faults && o.n == 0, "a refused outbox handed out faults");
		unlink(path);
		return 0;
	}
	check_accepted(&o);
	kept = o.n;
	if (o.n > 0) {
		/* the controller answered the first: the rest is written back */
		FUZZ_ASSERT(iso_agent_fault_ack(dir, o.faults[0].seq, &err) == 0, "ack: %s",
		            err.message);
		FUZZ_ASSERT(iso_agent_outbox_load(dir, &back, &err) == 0,
		            "the outbox written by ack does not load: %s", err.message);
		FUZZ_ASSERT(back.n == o.n - 1 && back.last_seq == o.last_seq,
		            "after ack: %zu faults (last %llu), expected %zu (last %llu)", back.n,
		            (unsigned long long)back.last_seq, o.n - 1,
		            (unsigned long long)o.last_seq);
		for (size_t i = 0; i < back.n; i++)
			FUZZ_ASSERT(same_fault(&back.faults[i], &o.faults[i + 1]),
			            "after ack: faults[%zu] changed", i);
		iso_agent_outbox_clear(&back);
		kept--;
	}
	r = iso_agent_fault_record(dir, &f, &err);
	if (o.last_seq == INT64_MAX) {
		/* no seq is left: refused, and the file stays readable */
		fuzz_check_refusal(r, &err, "iso_agent_fault_record");
		FUZZ_ASSERT(r < 0, "recorded a fault above seq %lld", (long long)INT64_MAX);
		FUZZ_ASSERT(iso_agent_outbox_load(dir, &back, &err) == 0 && back.n == kept,
		            "after a refused record the outbox does not load: %s", err.message);
		iso_agent_outbox_clear(&back);
		iso_agent_outbox_clear(&o);
		unlink(path);
		return 0;
	}
	FUZZ_ASSERT(r == 0, "record: %s", err.message);
	FUZZ_ASSERT(f.seq > o.last_seq, "recorded seq %llu, not above %llu",
	            (unsigned long long)f.seq, (unsigned long long)o.last_seq);
	FUZZ_ASSERT(iso_agent_outbox_load(dir, &back, &err) == 0,
	            "the outbox written by record does not load: %s", err.message);
	FUZZ_ASSERT(back.n == kept + 1 && same_fault(&back.faults[kept], &f) &&
	                back.last_seq == f.seq,
	            "after record: %zu faults, expected %zu", back.n, kept + 1);
	iso_agent_outbox_clear(&back);
	iso_agent_outbox_clear(&o);
	unlink(path);
	return 0;
}
