/* fake_nvml_env.h: points the nvml GPU driver at the project's fake
 * libnvidia-ml (tests/fakes/, docs/gpu.md) for one test: the library meson
 * names in ISOSTACK_FAKE_NVML, its GPUs from `config` written to
 * DIR/config.json, its instances in DIR/state.json, no injected failure.
 * Shared by test_gpu and test_agent. */
#ifndef ISOSTACK_TESTS_FAKE_NVML_ENV_H
#define ISOSTACK_TESTS_FAKE_NVML_ENV_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static void fake_nvml_env(const char *dir, const char *config)
{
	const char *lib = getenv("ISOSTACK_FAKE_NVML");
	char path[PATH_MAX + 16];
	FILE *f;

	if (!lib)
		fail_msg("ISOSTACK_FAKE_NVML is not set (meson sets it)");
	snprintf(path, sizeof(path), "%s/config.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(config, f);
	fclose(f);
	setenv("ISOSTACK_NVML_LIBRARY", lib, 1);
	setenv("ISOSTACK_FAKE_NVML_CONFIG", path, 1);
	snprintf(path, sizeof(path), "%s/state.json", dir);
	setenv("ISOSTACK_FAKE_NVML_STATE", path, 1);
	unsetenv("ISOSTACK_FAKE_NVML_FAIL");
}

#endif
