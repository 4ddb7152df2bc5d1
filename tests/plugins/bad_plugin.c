/* Broken plugins for the loader's usage errors (tests/test_plugin.cpp), one per definition:
 * BAD_NO_ENTRY exports no entry symbol, BAD_VERSION speaks ABI version 999, BAD_CLASH names its kernel after a
 * built-in one. */
#include <stddef.h>

#include "attnbench/plugin.h"

static int32_t supports(void* user, const attnbench_problem* p, char* reason, size_t size) {
  (void)user, (void)p, (void)reason, (void)size;
  return ATTNBENCH_OK;
}
static int32_t plan(void* user, const attnbench_problem* p, attnbench_plan* out, char* error, size_t size) {
  (void)user, (void)p, (void)out, (void)error, (void)size;
  return ATTNBENCH_OK;
}
static int32_t run(void* user, void* handle, const attnbench_params* a, void* stream, char* error, size_t size) {
  (void)user, (void)handle, (void)a, (void)stream, (void)error, (void)size;
  return ATTNBENCH_OK;
}

#ifdef BAD_CLASH
#define NAME "cpu.unified"
#else
#define NAME "bad.kernel"
#endif
#ifdef BAD_VERSION
#define VERSION 999u
#else
#define VERSION ATTNBENCH_PLUGIN_ABI_VERSION
#endif

static const attnbench_kernel kernels[] = {
    {NAME, "a broken plugin", ATTNBENCH_BACKEND_CPU, ATTNBENCH_OP_ATTENTION, NULL, supports, plan, run, NULL}};
static const attnbench_plugin table = {VERSION, 1, kernels};

#ifdef BAD_NO_ENTRY
ATTNBENCH_PLUGIN_EXPORT const attnbench_plugin* not_the_entry(void) { return &table; }
#else
ATTNBENCH_PLUGIN_EXPORT const attnbench_plugin* attnbench_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &table;
}
#endif
