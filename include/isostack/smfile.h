/* smfile.h: the subnet manager's files as both sides of the fence see them
 * (docs/fabric.md, "partitions.conf through the SM host's agent"). With
 * fabric.partitions_writer agent, isostackd never writes OpenSM's
 * partitions.conf itself: it publishes the rendered file with its generation
 * and the leader's term, and the agent on the SM host writes it. The file
 * then starts with a header line naming the term and generation it holds, and
 * the agent refuses a document of a lower term than the highest it wrote (a
 * stale leader's), or of the same term and a lower generation. Here: that
 * header, written and read strictly; the refusal rule; the check of a
 * document's text; and the scan of OpenSM's log for the lines that say it
 * did not do what the file said, which the controller's opensm driver (a
 * local log) and the SM agent (the SM host's log) share; and whether the SM
 * runs: its pid file's process, and the four states of its reachability
 * (GET /v1/fabric/health, what the CNI plugin's STATUS asks). Pure C over files,
 * in isostack-core, so that the agent links it without the server library. */
#ifndef ISOSTACK_SMFILE_H
#define ISOSTACK_SMFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "isostack/util.h"

ISO_PUBLIC_BEGIN

/* The largest partitions.conf a document may carry. */
#define ISO_SM_TEXT_MAX (4u << 20)
/* Terms stay below 2^31 (the store's agent_term); generations below 2^63. */
#define ISO_SM_TERM_MAX ((1ULL << 31) - 1)
#define ISO_SM_GEN_MAX  ((1ULL << 63) - 1)

/* Where a file stands: the term and generation it was written under. */
struct iso_sm_mark {
	uint64_t term;
	uint64_t generation;
};

/* The header line, newline included:
 * "# isostack term T generation G: do not edit; written by isostack-agent\n".
 * Returns its length, or -ENOSPC when `size` is too small. */
int iso_sm_header_format(char *buf, size_t size, const struct iso_sm_mark *m);

/* Reads the first line of `text`. A first line that starts "# isostack term"
 * must be exactly the header above (decimal numbers without leading zeros,
 * term <= ISO_SM_TERM_MAX, generation <= ISO_SM_GEN_MAX): anything else is
 * ISO_E_INVALID with "NAME:1: header: what", since a receiver that cannot
 * tell which term a file holds cannot refuse a lower one. Any other first
 * line (a file written before the agent, or by hand) is no header: 0 with
 * *has false and *m zeroed. On success *body_off is where the text after the
 * header starts (0 without one). */
int iso_sm_header_parse(const char *name, const char *text, size_t len, struct iso_sm_mark *m,
                        bool *has, size_t *body_off, struct iso_error *err);

/* The refusal rule: a document of term T and generation G against the
 * highest mark written. Lower term: ISO_E_CONFLICT, field "term"; same term,
 * lower generation: ISO_E_CONFLICT, field "generation" (each message names
 * both marks). 1 when it is exactly the mark already written (nothing to
 * write), 0 when it is newer. */
int iso_sm_accept(const struct iso_sm_mark *highest, const struct iso_sm_mark *doc,
                  struct iso_error *err);

/* The highest of two marks (term first, then generation). */
struct iso_sm_mark iso_sm_mark_max(struct iso_sm_mark a, struct iso_sm_mark b);

/* A document's text, as the agent checks it before writing it: 1..
 * ISO_SM_TEXT_MAX bytes, printable ASCII, tabs and newlines only, ending in a
 * newline, and no line that starts "# isostack term" (only the agent writes
 * the header). ISO_E_INVALID, field `field`, naming the line. */
int iso_sm_text_check(const char *field, const char *text, size_t len, struct iso_error *err);

/* ---- OpenSM's log ---- */

#define ISO_SM_LOG_CARRY 256

/* One watched log: where the last scan stopped. `path` "" watches nothing. */
struct iso_sm_log {
	char path[512];
	off_t off;
	char carry[ISO_SM_LOG_CARRY]; /* tail of the last read, for marks split across reads */
};

/* Remembers the log's end: what OpenSM writes after this is scanned. Call it
 * before signalling the SM. */
void iso_sm_log_mark(struct iso_sm_log *w);
/* Reads what OpenSM logged since the mark (from the start again when the
 * log shrank: OpenSM restarted and truncated it); true with the first line
 * that holds "retrying with default config" (the file was refused: the
 * fabric is flattened), "ERR 0507" (switch enforcement off), "ERR 0512" (a
 * P_Key table full) or "PARSE ERROR", copied into `line`. */
bool iso_sm_log_scan(struct iso_sm_log *w, char *line, size_t size);

/* ---- the SM's process and whether it can be reached ---- */

/* The pid in the SM's pid file `path` if that process exists (kill 0; EPERM
 * counts as existing); 0 when the file is missing, holds no pid above 1, or
 * names no process: the SM is down. NULL or "" is 0. */
pid_t iso_sm_pid_alive(const char *path);

/* Whether a fabric driver's subnet manager is reachable:
 * NONE: the driver has no SM to reach (sim models the SM in-process);
 * UNKNOWN: the driver cannot tell (opafm; no pid file configured; no report
 * from the SM host's agent yet, or one too old to say);
 * UP, DOWN: as judged from the SM's process. */
enum iso_sm_state {
	ISO_SM_STATE_NONE,
	ISO_SM_STATE_UNKNOWN,
	ISO_SM_STATE_UP,
	ISO_SM_STATE_DOWN,
};
#define ISO_SM_REASON_MAX 160
/* The SM host's agent reports at least this often (and at once on a change);
 * the controller counts the SM DOWN after 3 x this without a report. */
#define ISO_SM_REPORT_S 2

/* A state, why (words and inventory keys only: no tenant, GUID, P_Key or
 * path, since every node agent reads it), and since when (wall clock ms). */
struct iso_sm_health {
	enum iso_sm_state state;
	char reason[ISO_SM_REASON_MAX];
	int64_t since_ms;
};

/* "none", "unknown", "up", "down"; parse: -EINVAL for anything else. */
const char *iso_sm_state_name(enum iso_sm_state s);
int iso_sm_state_parse(const char *name, enum iso_sm_state *out);
/* Sets the state and reason; since_ms moves to now_ms only when the state
 * changes (or was never set). */
void iso_sm_health_set(struct iso_sm_health *h, enum iso_sm_state s, const char *reason,
                       int64_t now_ms);

ISO_PUBLIC_END

#endif
