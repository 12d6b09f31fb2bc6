/* rng.c: the simulator's only source of randomness, so that a seed gives the
 * same arrivals on every machine and compiler: splitmix64 (Steele, Lea and
 * Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the
 * constants of Vigna's public-domain reference code), and integers below n by
 * rejection rather than by a biased modulo. */
#include "sim/internal.h"

void iso_sim_rng_seed(struct iso_sim_rng *r, uint64_t seed)
{
	r->state = seed;
}

uint64_t iso_sim_rng_next(struct iso_sim_rng *r)
{
	uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

uint64_t iso_sim_rng_below(struct iso_sim_rng *r, uint64_t n)
{
	/* The largest multiple of n that fits: draws at or above it would favour
	 * small results, so they are drawn again. */
	const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;

	if (n <= 1)
		return 0;
	do
		x = iso_sim_rng_next(r);
	while (x >= limit);
	return x % n;
}
