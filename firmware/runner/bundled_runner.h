/* The runner's bundled-program mode (bundled_runner.c): built with TORCHMCU_BUNDLE. */
#ifndef TM_RUNNER_BUNDLED_RUNNER_H
#define TM_RUNNER_BUNDLED_RUNNER_H

#include <stdint.h>

/* The embedded .bpte (generated assembly, runner/CMakeLists.txt; 32-byte aligned). */
extern const uint8_t tm_bundle_data[], tm_bundle_end[];

/* Runs every test case of the bundle; returns the runner's exit code (exit_codes.h). */
int tm_runner_bundled(void);

#endif
