/* replay.c: runs a harness without libFuzzer, so that `make test` (gcc, and
 * the ASan+UBSan build) replays the committed seed corpora and every crash
 * reproducer as regression tests. Arguments are files or directories (one
 * level, sorted); `-o DIR` names a directory that may not exist yet (where
 * crash reproducers go once there is one). Each file is read into a buffer of exactly its size, so
 * that a parser reading past the end trips ASan as it would under libFuzzer.
 * Exit 0 when every input was fed, 1 when an input could not be read. A bug
 * the harness finds aborts, like under libFuzzer. */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static int feed_file(const char *path, long *fed)
{
	_cleanup_fclose_ FILE *f = fopen(path, "rbe");
	struct stat st;

	if (!f || fstat(fileno(f), &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* malloc(0) may return NULL; the harness gets a valid pointer either way */
	_cleanup_free_ uint8_t *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		return -1;
	}
	fprintf(stderr, "replay: %s (%lld bytes)\n", path, (long long)st.st_size);
	LLVMFuzzerTestOneInput(buf, (size_t)st.st_size);
	(*fed)++;
	return 0;
}

static int feed_dir(const char *dir, long *fed)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, NULL, alphasort), rc = 0;

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		if (names[i]->d_name[0] != '.' &&
		    snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name) <
		        (int)sizeof(path) &&
		    stat(path, &st) == 0 && S_ISREG(st.st_mode) && feed_file(path, fed) < 0)
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	long fed = 0;
	int rc = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		bool optional = strcmp(argv[i], "-o") == 0 && i + 1 < argc;
		struct stat st;

		if (optional)
			i++;
		if (stat(argv[i], &st) < 0 && optional && errno == ENOENT) {
			continue;
		} else if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
		} else if (S_ISDIR(st.st_mode) ? feed_dir(argv[i], &fed) < 0
		                               : feed_file(argv[i], &fed) < 0) {
			rc = 1;
		}
	}
	if (fed == 0) {
		fprintf(stderr, "replay: no inputs\n");
		rc = 1;
	}
	fprintf(stderr, "replay: %ld inputs\n", fed);
	return rc;
}
