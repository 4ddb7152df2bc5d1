#include "cases/registry.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_bwd.hpp"

namespace attnbench {

namespace {
std::deque<KernelEntry>& mutable_registry() {
  static std::deque<KernelEntry> table = [] {
    std::vector<KernelEntry> t;
    auto add = [&t](std::shared_ptr<const AttentionKernel> k, const char* what) {
      t.push_back({Op::attention, k, k->name(), k->backend(), what, nullptr});
    };
    auto add_gated = [&t](std::shared_ptr<const GatedBlockKernel> k, const char* what) {
      t.push_back({Op::gated_block, nullptr, k->name(), k->backend(), what, k});
    };
    auto add_bwd = [&t](std::shared_ptr<const AttentionBwdKernel> k, const char* what) {
      t.push_back({Op::attention_backward, nullptr, k->name(), k->backend(), what, nullptr, false, k});
    };
    auto add_gated_bwd = [&t](std::shared_ptr<const GatedBlockBwdKernel> k, const char* what) {
      t.push_back({Op::gated_block_backward, nullptr, k->name(), k->backend(), what, nullptr, false, nullptr, k});
    };
    add(make_cpu_unified(), "paged attention, online-softmax over KV tiles; prefill and split-KV decode paths");
#ifdef ATTNBENCH_WITH_CUDA
    add(make_cuda_unified(), "paged attention, sm_90a: 2D prefill (mma.sync) and 3D split-KV decode, merged in the same launch");
#endif
#ifdef ATTNBENCH_WITH_HIP
    add(make_hip_unified(), "paged attention, gfx942/gfx90a: 2D prefill (narrow mfma 16x16x16, flash transposed-x8 "
                            "mfma 32x32x8) and 3D split-KV decode + combine");
#endif
#ifdef ATTNBENCH_WITH_CUDNN
    add(make_cudnn_sdpa(), "cuDNN SDPA (frontend graph API) on the paged inputs: page tables, padding + causal mask");
#endif
    add_gated(make_cpu_gated_block(), "gated attention block: fp32 GEMMs over rounded stages, cpu.unified SDPA");
#ifdef ATTNBENCH_WITH_CUDA
    add_gated(make_cuda_gated_block(),
              "gated attention block: cuBLASLt projections, norm+RoPE kernel, cuda.unified SDPA, sigmoid gate");
#endif
#ifdef ATTNBENCH_WITH_CUDNN
    add_gated(make_cudnn_gated_chain(), "gated block as the vendor chain, unfused: cuBLASLt projections, norm+RoPE "
                                        "and sigmoid-gate kernels, cudnn.sdpa (fusion knobs ignored)");
#endif
    add_bwd(make_cpu_unified_bwd(), "attention backward over 64x64 tiles: dK/dV per key tile, dQ per query tile, fp32 sums");
#ifdef ATTNBENCH_WITH_CUDA
    add_bwd(make_cuda_unified_bwd(), "attention backward, sm_90a: dK/dV per key tile in registers, dQ summed "
                                     "in fp32; wgmma + TMA (dQ by TMA reductions) at d64/d128, FlashAttention-2's mma.sync kernel at d256 "
                                     "(128-column chunks; ATTNBENCH_SM90_BWD_PATH)");
#endif
#ifdef ATTNBENCH_WITH_CUDNN
    add_bwd(make_cudnn_sdpa_backward(), "cuDNN's fused SDPA backward (frontend graph API) on the packed inputs: dense "
                                        "where the batch is uniform, else ragged offsets and a padding mask; causal / "
                                        "sliding-window band (top-left where it is the same mask), GQA");
#endif
    add_gated_bwd(make_cpu_gated_block_bwd(), "gated block backward: fp32 GEMMs and passes over rounded stages, "
                                              "cpu.unified_bwd SDPA backward");
#ifdef ATTNBENCH_WITH_CUDA
    add_gated_bwd(make_cuda_gated_block_bwd(), "gated block backward: cuBLASLt dY/dW/dh GEMMs, gate and norm+RoPE "
                                               "backward kernels, cuda.unified_bwd SDPA backward");
#endif
#ifdef ATTNBENCH_WITH_CUDNN
    add_gated_bwd(make_cudnn_gated_chain_bwd(), "gated block backward as the vendor chain: cuBLASLt GEMMs, the "
                                                "elementwise backward kernels, cudnn.sdpa_backward");
#endif
    for (auto& e : t) e.peer = is_peer_kernel(e.name);
    return std::deque<KernelEntry>(t.begin(), t.end());
  }();
  return table;
}
}  // namespace

const std::deque<KernelEntry>& kernel_registry() { return mutable_registry(); }

void register_kernel(KernelEntry e) {
  if (const KernelEntry* taken = find_kernel(e.name))
    throw std::invalid_argument("kernel name '" + e.name + "' is taken by " +
                                (taken->plugin.empty() ? "a built-in kernel" : "plugin " + taken->plugin));
  e.peer = is_peer_kernel(e.name);
  mutable_registry().push_back(std::move(e));
}

const KernelEntry* find_kernel(const std::string& name) {
  for (const auto& k : kernel_registry())
    if (k.name == name) return &k;
  return nullptr;
}

bool is_peer_kernel(const std::string& name) { return name.rfind("cudnn.", 0) == 0; }

bool backend_built(Backend b) {
  for (const auto& k : kernel_registry())
    if (k.backend == b && k.plugin.empty()) return true;
  return false;
}

std::string backend_not_built_reason(Backend b) {
  if (b == Backend::cuda) return "built without the CUDA backend";
  const std::string name = backend_name(b);
  std::string upper = name;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return upper + " backend not built (this binary has no " + name + " kernels)";
}

std::unique_ptr<Device> make_backend_device(Backend b, std::string* why_not) {
  if (b == Backend::cpu) return make_cpu_device();
  if (b == Backend::cuda) return make_cuda_device(why_not);  // says why itself in a build without CUDA
#ifdef ATTNBENCH_WITH_HIP
  if (b == Backend::hip) return make_hip_device(why_not);
#endif
  if (why_not) *why_not = backend_not_built_reason(b);
  return nullptr;
}

bool glob_match(const std::string& pattern, const std::string& text) {
  std::size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string> split_list(const std::string& list, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(sep, start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> glob_list(const std::string& list) { return split_list(list, ','); }

bool glob_list_match(const std::string& list, const std::string& text) {
  for (const auto& g : glob_list(list))
    if (glob_match(g, text)) return true;
  return false;
}

}  // namespace attnbench
