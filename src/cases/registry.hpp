// The explicit table of kernels (no self-registration), and the backends this binary builds.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "attnbench/attention_bwd.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/kernel.hpp"
#include "cases/shapes.hpp"
#include "device/device.hpp"

namespace attnbench {

struct KernelEntry {
  Op op;
  std::shared_ptr<const AttentionKernel> attention;  // op == attention
  std::string name;
  Backend backend;
  std::string description;
  std::shared_ptr<const GatedBlockKernel> gated = nullptr;  // op == gated_block
  bool peer = false;  // is_peer_kernel(name): the other kernels' rows carry their ratio to it (peer_ratio.hpp)
  std::shared_ptr<const AttentionBwdKernel> attention_bwd = nullptr;  // op == attention_backward
  std::shared_ptr<const GatedBlockBwdKernel> gated_bwd = nullptr;     // op == gated_block_backward
  // The plugin file that provided the kernel (absolute path) and its sha256; empty for the built-in kernels.
  std::string plugin = "", plugin_sha256 = "";
};

// Peers are kernels a user would otherwise use (a vendor library's): every kernel whose name starts with "cudnn.".
bool is_peer_kernel(const std::string& name);

// The built-in kernels, then those registered since (plugins). A deque: registering keeps earlier entries' addresses.
const std::deque<KernelEntry>& kernel_registry();
// Adds a kernel after the built-in ones; std::invalid_argument when its name is taken. Not thread-safe: register
// before a run starts (plugin.hpp does, for each --plugin file).
void register_kernel(KernelEntry e);
// The entry named `name`, or nullptr.
const KernelEntry* find_kernel(const std::string& name);

// Whether this binary has kernels of backend b (its built-in table lists one).
bool backend_built(Backend b);
// Why rows asked for a backend this binary does not build are declined, e.g. "HIP backend not built (...)".
std::string backend_not_built_reason(Backend b);
// The device of backend b, or nullptr with the reason (the backend is not built, or no device is visible).
std::unique_ptr<Device> make_backend_device(Backend b, std::string* why_not);

// Shell-style glob with '*' and '?' (e.g. "cuda.*").
bool glob_match(const std::string& pattern, const std::string& text);
// The pieces of a `sep`-separated list, empty ones dropped ("a,,b," -> a, b).
std::vector<std::string> split_list(const std::string& list, char sep);
// The globs of a comma-separated list ("cuda.*,cudnn.*"), empty entries dropped.
std::vector<std::string> glob_list(const std::string& list);
// Whether any glob of the list matches.
bool glob_list_match(const std::string& list, const std::string& text);

}  // namespace attnbench
