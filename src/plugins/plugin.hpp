// Plugins: kernels in shared libraries implementing attnbench/plugin.h, loaded with --plugin PATH (run, sweep, list)
// or from ATTNBENCH_PLUGINS, and registered as KernelEntry beside the built-in ones (plugin_kernel.hpp adapts each
// descriptor). The core takes a descriptor table; dlopen is one way to get one, attnbench_register_plugin another.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnbench/plugin.h"

namespace attnbench {

// The environment variable of plugin files to load, ':'-separated.
inline constexpr const char* kPluginsVariable = "ATTNBENCH_PLUGINS";

struct LoadedPlugin {
  std::string path;    // the file (absolute), or the origin a host registered the table under
  std::string sha256;  // of the file; empty when the origin is not a readable file
  uint32_t abi_version = 0;
  std::vector<std::string> kernels;
  const attnbench_plugin* table = nullptr;
};

// Checks the table (version, each descriptor, names against the registry's) and registers its kernels, all or
// none. UsageError "LABEL: why" (LABEL names the file: "--plugin PATH"); the same table again does nothing.
void register_plugin(const attnbench_plugin* table, const std::string& origin, const std::string& label);

// Loads each --plugin path, then each ATTNBENCH_PLUGINS entry (when read_env): dlopen, the entry symbol, then
// register_plugin. A file already loaded (the same file by any path) is loaded once; one given twice to --plugin
// is a UsageError. Errors name the file and where it was given: a missing file, one dlopen refuses, a missing
// entry symbol, a version mismatch, a bad descriptor, a kernel name already taken.
void load_plugins(const std::vector<std::string>& paths, bool read_env = true);

const std::vector<LoadedPlugin>& loaded_plugins();
// The provenance of the loaded plugins: [{path, sha256, abi_version, kernels}], empty when none.
nlohmann::json plugins_json();

}  // namespace attnbench
