/* fuzz.h: what every harness in tests/fuzz shares. Each harness is one
 * LLVMFuzzerTestOneInput over one parser; the same file links either into a
 * libFuzzer binary (meson -Dfuzzing=true, clang) or into replay.c's main(),
 * which feeds it the committed corpus and crash reproducers as a meson test
 * (suite fuzz-replay). docs/fuzzing.md says how to run and extend them. */
#ifndef ISOSTACK_TESTS_FUZZ_H
#define ISOSTACK_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "isostack/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A harness checks the parser's contract as well as its memory safety: a
 * refusal must say what was wrong. An empty message is a bug, so it stops
 * the run like a crash does. */
static inline void fuzz_check_refusal(int r, const struct iso_error *err, const char *what)
{
	if (r < 0 && (err->code == ISO_OK || err->message[0] == '\0')) {
		fprintf(stderr, "fuzz: %s returned %d with an empty error\n", what, r);
		abort();
	}
}

/* A property the harness checks failed: print it and stop like a crash. */
#define FUZZ_ASSERT(cond, ...)                                                                     \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#endif
