#include "plugins/plugin.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "cases/registry.hpp"
#include "cases/shapes.hpp"
#include "core/errors.hpp"
#include "core/json_file.hpp"
#include "core/sha256.hpp"
#include "plugins/plugin_kernel.hpp"

namespace fs = std::filesystem;

namespace attnbench {

namespace {

std::vector<LoadedPlugin>& plugins() {
  static std::vector<LoadedPlugin> loaded;
  return loaded;
}

std::string quoted(const char* s) { return s ? "'" + compact_value(s) + "'" : std::string("NULL"); }

// Why descriptor i cannot join the registry ("" when it can); `names` holds the names of the table's earlier ones.
std::string descriptor_problem(const attnbench_kernel& k, uint32_t i, const std::set<std::string>& names) {
  const std::string at = "kernels[" + std::to_string(i) + "].";
  if (!k.name || !safe_name(k.name)) return at + "name " + quoted(k.name) + ": " + kSafeNameRule;
  const std::string name = k.name;
  if (names.count(name)) return at + "name '" + name + "': given twice in this plugin";
  if (const KernelEntry* taken = find_kernel(name))
    return at + "name '" + name + "': " +
           (taken->plugin.empty() ? "the name of a built-in kernel" : "already provided by plugin " + taken->plugin);
  if (!plugin_backend(k.backend))
    return at + "backend: " + std::to_string(k.backend) +
           " is not ATTNBENCH_BACKEND_CPU (0), ATTNBENCH_BACKEND_CUDA (1) or ATTNBENCH_BACKEND_HIP (2)";
  if (k.op != ATTNBENCH_OP_ATTENTION)
    return at + "op: " + std::to_string(k.op) + " is not ATTNBENCH_OP_ATTENTION (0), the one op of ABI version 1";
  if (!k.supports) return at + "supports: NULL";
  if (!k.plan) return at + "plan: NULL";
  if (!k.run) return at + "run: NULL";
  return "";
}

}  // namespace

void register_plugin(const attnbench_plugin* table, const std::string& origin, const std::string& label) {
  if (!table) throw UsageError(label + ": no plugin table (NULL)");
  for (const LoadedPlugin& p : plugins())
    if (p.table == table) return;
  if (table->abi_version != ATTNBENCH_PLUGIN_ABI_VERSION)
    throw UsageError(label + ": plugin ABI version " + std::to_string(table->abi_version) + ", expected " +
                     std::to_string(ATTNBENCH_PLUGIN_ABI_VERSION) +
                     " (rebuild it against this attnbench's kernels/include/attnbench/plugin.h)");
  if (table->num_kernels == 0 || !table->kernels) throw UsageError(label + ": the plugin table lists no kernels");
  std::set<std::string> names;
  for (uint32_t i = 0; i < table->num_kernels; ++i) {
    const std::string why = descriptor_problem(table->kernels[i], i, names);
    if (!why.empty()) throw UsageError(label + ": " + why);
    names.insert(table->kernels[i].name);
  }
  std::error_code ec;
  const bool file = fs::is_regular_file(origin, ec);
  LoadedPlugin loaded{origin, file ? sha256_file(origin) : "", table->abi_version, {}, table};
  for (uint32_t i = 0; i < table->num_kernels; ++i) {
    const attnbench_kernel& k = table->kernels[i];
    const Backend b = *plugin_backend(k.backend);
    KernelEntry e;
    e.op = Op::attention;
    e.attention = make_plugin_kernel(k, b);
    e.name = k.name;
    e.backend = b;
    e.description = k.description ? k.description : "";
    e.plugin = loaded.path;
    e.plugin_sha256 = loaded.sha256;
    register_kernel(std::move(e));
    loaded.kernels.push_back(k.name);
  }
  plugins().push_back(std::move(loaded));
}

namespace {

// The file's absolute path, checked to be a file; UsageError naming it otherwise.
std::string plugin_file(const std::string& path, const std::string& label) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw UsageError(label + ": no such file");
  if (fs::is_directory(st)) throw UsageError(label + ": is a folder, expected a shared library");
  const fs::path absolute = fs::absolute(path, ec);
  const fs::path file = fs::weakly_canonical(absolute, ec);  // one file by any path: loaded once
  return ec ? absolute.string() : file.string();
}

bool already_loaded(const std::string& file) {
  return std::any_of(plugins().begin(), plugins().end(), [&](const LoadedPlugin& p) { return p.path == file; });
}

// dlopen, the entry symbol, its table; the library stays loaded for the process's life (its kernels are called
// until exit).
void load_plugin_file(const std::string& file, const std::string& label) {
  if (already_loaded(file)) return;
  dlerror();
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw UsageError(label + ": cannot load it as a shared library: " + (why ? why : "dlopen failed"));
  }
  void* sym = dlsym(lib, ATTNBENCH_PLUGIN_ENTRY);
  if (!sym)
    throw UsageError(label + ": no symbol " ATTNBENCH_PLUGIN_ENTRY " (not an attnbench plugin, or the entry is not "
                             "exported: declare it with ATTNBENCH_PLUGIN_EXPORT, attnbench/plugin.h)");
  attnbench_plugin_entry_fn entry;
  static_assert(sizeof entry == sizeof sym, "a function pointer as wide as dlsym's result");
  std::memcpy(&entry, &sym, sizeof entry);
  const attnbench_plugin* table = entry(ATTNBENCH_PLUGIN_ABI_VERSION);
  if (!table)
    throw UsageError(label + ": " ATTNBENCH_PLUGIN_ENTRY "(" + std::to_string(ATTNBENCH_PLUGIN_ABI_VERSION) +
                     ") returned no table: the plugin has none for this attnbench's ABI version");
  register_plugin(table, file, label);
}

}  // namespace

void load_plugins(const std::vector<std::string>& paths, bool read_env) {
  std::set<std::string> given;
  for (const std::string& p : paths) {
    const std::string label = "--plugin " + p;
    const std::string file = plugin_file(p, label);
    if (!given.insert(file).second) throw UsageError(label + ": given twice (the same file as an earlier --plugin)");
    load_plugin_file(file, label);
  }
  const char* env = read_env ? std::getenv(kPluginsVariable) : nullptr;
  if (!env) return;
  for (const std::string& p : split_list(env, ':')) {
    const std::string label = std::string(kPluginsVariable) + " entry " + p;
    load_plugin_file(plugin_file(p, label), label);
  }
}

const std::vector<LoadedPlugin>& loaded_plugins() { return plugins(); }

nlohmann::json plugins_json() {
  nlohmann::json a = nlohmann::json::array();
  for (const LoadedPlugin& p : plugins())
    a.push_back({{"path", p.path}, {"sha256", p.sha256}, {"abi_version", p.abi_version}, {"kernels", p.kernels}});
  return a;
}

}  // namespace attnbench

// The C entry of plugin.h for a host that links the harness (Python over ctypes): the same core as --plugin.
extern "C" ATTNBENCH_PLUGIN_EXPORT int32_t attnbench_register_plugin(const attnbench_plugin* plugin,
                                                                     const char* origin, char* error, size_t size) {
  const std::string where = origin && *origin ? origin : "(unnamed)";
  try {
    std::error_code ec;
    const bool file = fs::is_regular_file(where, ec);
    const fs::path canonical = file ? fs::weakly_canonical(fs::absolute(where, ec), ec) : fs::path();
    attnbench::register_plugin(plugin, file && !ec ? canonical.string() : where, "plugin " + where);
    return ATTNBENCH_OK;
  } catch (const std::exception& e) {
    if (error && size > 0) {
      std::strncpy(error, e.what(), size - 1);
      error[size - 1] = '\0';
    }
    return -1;
  }
}
