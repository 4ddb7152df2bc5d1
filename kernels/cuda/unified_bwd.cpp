// cuda.unified_bwd's host side: what it takes, its plan (the path and the workspace) and the dispatch to an
// instance of the chosen dK/dV kernel (ATTNBENCH_SM90_BWD_PATH).
#include <mutex>
#include <stdexcept>
#include <string>

#include "attnbench/attention_bwd.hpp"
#include "cuda/bwd_wgmma.hpp"
#include "cuda/bwd_workspace.hpp"
#include "cuda/unified_bwd.hpp"

namespace attnbench {
namespace {

enum class BwdPath { mma, wgmma };

struct CudaBwdPlan final : AttentionBwdPlan {
  AttentionProblem problem;
  BwdPath path = BwdPath::mma;
  mutable std::mutex maps_mutex;  // run() is const and may be called from any thread
  mutable cuda::WgBwdMapCache maps;
};

// The knob's path for a head size, or "" with the reason it cannot be served that way.
std::string pick_path(const AttentionProblem& p, const KnobValues& knobs, BwdPath& path) {
  const std::string& k = knobs.get("ATTNBENCH_SM90_BWD_PATH");
  const bool wg = cuda::wg_bwd_head_size(p.head_size);
  if (k == "wgmma" && !wg)
    return "head_size " + std::to_string(p.head_size) + ": ATTNBENCH_SM90_BWD_PATH=wgmma has instances for 64 and 128";
  path = k == "mma" || !wg ? BwdPath::mma : BwdPath::wgmma;
  return "";
}

// The mma.sync path's GQA split (1 on the wgmma path, whose CTA walks every head of the group).
int group_splits(const AttentionBwdParams& a, BwdPath path) {
  return path == BwdPath::mma ? cuda::bwd_group_splits(a) : 1;
}

// d256 names its column chunks: each CTA recomputes S and dP over the whole head for its chunk of dK, dV and dQ.
std::string summary(const AttentionBwdParams& a, BwdPath path) {
  if (path == BwdPath::wgmma)
    return "wgmma+tma kv-tile " + std::to_string(cuda::kWgBwdKeys) + " q-tile " + std::to_string(cuda::kWgBwdQueries) +
           " warpgroups 1+2 dq tma-reduce";
  const cuda::BwdTile t = cuda::bwd_tile(a.head_size);
  std::string s = "fa2 mma.sync kv-tile " + std::to_string(t.key_rows) + " q-tile " + std::to_string(t.query_rows) +
                  " warps 4 dq atomics";
  if (t.chunks > 1)
    s += " col-chunks " + std::to_string(t.chunks) + "x" + std::to_string(t.cols) + " (S, dP per chunk)";
  if (const int n = group_splits(a, path); n > 1)
    s += " group split " + std::to_string(n) + " (" + std::to_string(a.heads / a.kv_heads / n) +
         " heads a CTA, dK/dV by fp32 atomics)";
  return s;
}

template <DType DT, int D> void launch_dt(const AttentionBwdParams& a, const CudaBwdPlan& pl, cudaStream_t s) {
  if constexpr (cuda::wg_bwd_head_size(D)) {
    if (pl.path == BwdPath::wgmma) {
      const std::lock_guard<std::mutex> lock(pl.maps_mutex);
      return cuda::launch_attention_bwd_wgmma<DT, D>(a, pl.maps, s);
    }
  }
  cuda::launch_attention_bwd<DT, D>(a, s);
}

template <int D> void launch(const AttentionBwdParams& a, const CudaBwdPlan& pl, cudaStream_t s) {
  if (a.dtype == DType::bf16)
    launch_dt<DType::bf16, D>(a, pl, s);
  else
    launch_dt<DType::f16, D>(a, pl, s);
}

class CudaUnifiedBwd final : public AttentionBwdKernel {
 public:
  std::string name() const override { return "cuda.unified_bwd"; }
  Backend backend() const override { return Backend::cuda; }

  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    if (const std::string why = attention_bwd_conflict(p); !why.empty()) return Support::no(why);
    if (p.head_size != 64 && p.head_size != 128 && p.head_size != 256)
      return Support::no("head_size " + std::to_string(p.head_size) +
                         ": cuda.unified_bwd has instances for 64, 128 and 256");
    BwdPath path;
    if (const std::string why = pick_path(p, knobs, path); !why.empty()) return Support::no(why);
    return Support::yes();
  }

  std::unique_ptr<AttentionBwdPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const Support s = supports(p, knobs);
    if (!s.ok) throw std::invalid_argument("cuda.unified_bwd declines: " + s.reason);
    auto pl = std::make_unique<CudaBwdPlan>();
    pl->problem = p;
    pick_path(p, knobs, pl->path);
    const AttentionBwdParams a = make_attention_bwd_params(p);
    pl->workspace_bytes = cuda::bwd_workspace_bytes(a, group_splits(a, pl->path));
    pl->summary = summary(a, pl->path);
    return pl;
  }

  void run(const AttentionBwdPlan& plan, const AttentionBwdParams& a, void* stream) const override {
    const auto* pl = dynamic_cast<const CudaBwdPlan*>(&plan);
    if (!pl) throw std::invalid_argument("cuda.unified_bwd: plan was not made by cuda.unified_bwd");
    check_attention_bwd_params("cuda.unified_bwd", pl->problem, a);
    if (!a.workspace) throw std::invalid_argument("cuda.unified_bwd: params.workspace is null");
    if ((a.q_stride_token | a.q_stride_head | a.k_stride_token | a.k_stride_head) % 8 != 0)
      throw std::invalid_argument("cuda.unified_bwd: strides must be multiples of 8 elements (16-byte rows)");
    auto* s = static_cast<cudaStream_t>(stream);
    switch (a.head_size) {  // supports() admitted only these
      case 64: return launch<64>(a, *pl, s);
      case 128: return launch<128>(a, *pl, s);
      default: return launch<256>(a, *pl, s);
    }
  }
};

}  // namespace

std::unique_ptr<AttentionBwdKernel> make_cuda_unified_bwd() { return std::make_unique<CudaUnifiedBwd>(); }

}  // namespace attnbench
