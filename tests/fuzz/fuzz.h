/* fuzz.h: what every harness in tests/fuzz shares. Each harness is one
 * LLVMFuzzerTestOneInput over one parser; the same file links either into a
 * libFuzzer binary (meson -Dfuzzing=true, clang) or into replay.c's main(),
 * which feeds it the committed corpus and crash reproducers as a meson test
 * (suite fuzz-replay). docs/fuzzing.md says how to run and extend them. */
#ifndef ISOSTACK_TESTS_FUZZ_H
#define ISOSTACK_TESTS_FUZZ_H

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The one directory a harness may write in: made on the first call (on
 * tmpfs when there is one, as the parsers fsync), removed with everything in
 * it when the process exits. */
static inline char *fuzz_tmpdir_slot(void)
{
	static char path[96];
	return path;
}

static inline int fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static inline void fuzz_tmpdir_remove(void)
{
	char *p = fuzz_tmpdir_slot();

	if (*p)
		nftw(p, fuzz_rm_one, 8, FTW_DEPTH | FTW_PHYS);
	*p = '\0';
}

static inline const char *fuzz_tmpdir(const char *name)
{
	char *p = fuzz_tmpdir_slot();

	if (*p)
		return p;
	snprintf(p, 96, "%s/isofuzz-%s-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
	         name);
	if (!mkdtemp(p)) {
		perror(p);
		abort();
	}
	atexit(fuzz_tmpdir_remove);
	return p;
}

#endif
