/* internal.h: what the fabric module's files share and nobody else sees: the
 * SMP reader (smp.c) that the OpenSM driver uses to confirm an intent by
 * reading the P_Key tables back, and the expected-table arithmetic both the
 * driver and its tests need. The public face is isostack/fabric.h. */
#ifndef ISOSTACK_FABRIC_INTERNAL_H
#define ISOSTACK_FABRIC_INTERNAL_H

#include "isostack/fabric.h"

/* ---- SMP reader (smp.c) ----
 * Reads the fabric through libibnetdisc (discovery) and libibmad (SubnGet of
 * NodeInfo and P_KeyTable), as the diag tools do; under ibsim through
 * umad2sim's LD_PRELOAD. Without an InfiniBand port every call fails with
 * ISO_E_UNAVAILABLE, never crashes. Not thread-safe: one owner (the
 * driver's worker thread); it spreads reads over its own threads inside. */
struct iso_smp;

struct iso_smp_options {
	const char *ca_name; /* NULL: the first CA, as the diag tools pick it */
	int ca_port;         /* 0: the first active port */
	int timeout_ms;      /* per MAD; 0 = 200 */
	int threads;         /* parallel readers, each with its own MAD port; 0 = 1 */
};

int iso_smp_open(const struct iso_smp_options *opt, struct iso_smp **out, struct iso_error *err);
void iso_smp_free(struct iso_smp *s);
static inline void iso_smp_freep(struct iso_smp **s)
{
	if (*s)
		iso_smp_free(*s);
}

/* Discovers the fabric and reads every end port's table (CA ports and switch
 * port 0), refreshing the GUID -> LID map. Ports that do not answer are left
 * out and counted in *n_failed (may be NULL). */
int iso_smp_discover(struct iso_smp *s, struct iso_fabric_snapshot *out, int *n_failed,
                     struct iso_error *err);
/* Reads only these port GUIDs, in the given order, through the map of the
 * last discovery (rediscovering once when a GUID is unknown). A GUID not on
 * the fabric, or a port that did not answer, is left out of `out`. */
int iso_smp_read_guids(struct iso_smp *s, const uint64_t *guids, int n,
                       struct iso_fabric_snapshot *out, struct iso_error *err);

/* ---- expected tables (opensm.c) ----
 * The P_Key entries (with the membership bit) the intent gives one port,
 * Default excluded (its membership depends on SELF), sorted. */
int iso_fabric_expected_keys(const struct iso_fabric_intent *in, uint64_t guid, uint16_t *keys,
                             int max);
/* Does the port's table hold exactly these keys, besides 0x7fff/0xffff? */
bool iso_fabric_table_matches(const struct iso_port_table *t, const uint16_t *keys, int n);

#endif
