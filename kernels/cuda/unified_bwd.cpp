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
  int splits = 1;  // the GQA group's split, as the workspace was sized for
  mutable std::mutex maps_mutex;  // run() is const and may be called from any thread
  mutable cuda::WgBwdMapCache maps;
};

// The knob's path: both have instances for every head size the kernel takes.
BwdPath pick_path(const KnobValues& knobs) {
  return knobs.get("ATTNBENCH_SM90_BWD_PATH") == "mma" ? BwdPath::mma : BwdPath::wgmma;
}

// The GQA split: the knob's count, else the smallest that fills the grid with the path's tiles (bwd_group_splits).
int group_splits(const AttentionBwdParams& a, BwdPath path, const KnobValues& knobs) {
  if (const int forced = std::stoi(knobs.get("ATTNBENCH_SM90_BWD_SPLITS")); forced > 0) return forced;
  if (path == BwdPath::wgmma)
    return cuda::bwd_group_splits(a, cuda::wg_bwd_key_rows(a.head_size), 1, cuda::kBwdWgmmaTargetCtas);
  return cuda::bwd_group_splits(a);
}

// Why the knob's split cannot serve the problem ("" when it can).
std::string split_conflict(const AttentionProblem& p, const KnobValues& knobs) {
  const int forced = std::stoi(knobs.get("ATTNBENCH_SM90_BWD_SPLITS")), group = p.heads / p.kv_heads;
  if (forced == 0 || group % forced == 0) return "";
  return "ATTNBENCH_SM90_BWD_SPLITS=" + std::to_string(forced) + " does not divide the GQA group of " +
         std::to_string(group) + " query heads per kv head";
}

// d256 names its column chunks: each CTA recomputes S and dP over the whole head for its chunk of dK, dV and dQ.
std::string summary(const AttentionBwdParams& a, BwdPath path, int splits) {
  std::string s;
  if (path == BwdPath::wgmma) {
    s = "wgmma+tma kv-tile " + std::to_string(cuda::wg_bwd_key_rows(a.head_size)) + " q-tile " +
        std::to_string(cuda::kWgBwdQueries) + " warpgroups 1+2" +
        (a.head_size == 256 ? " (dV | dK, P^T shared)" : "") + " dq tma-reduce";
  } else {
    const cuda::BwdTile t = cuda::bwd_tile(a.head_size);
    s = "fa2 mma.sync kv-tile " + std::to_string(t.key_rows) + " q-tile " + std::to_string(t.query_rows) +
        " warps 4 dq atomics";
    if (t.chunks > 1)
      s += " col-chunks " + std::to_string(t.chunks) + "x" + std::to_string(t.cols) + " (S, dP per chunk)";
  }
  if (splits > 1) {
    const int per_cta = a.heads / a.kv_heads / splits;
    s += " group split " + std::to_string(splits) + " (" + std::to_string(per_cta) + (per_cta == 1 ? " head" : " heads") +
         " a CTA, dK/dV by fp32 atomics)";
  }
  return s;
}

template <DType DT, int D> void launch_dt(const AttentionBwdParams& a, const CudaBwdPlan& pl, cudaStream_t s) {
  if constexpr (cuda::wg_bwd_head_size(D)) {
    if (pl.path == BwdPath::wgmma) {
      const std::lock_guard<std::mutex> lock(pl.maps_mutex);
      return cuda::launch_attention_bwd_wgmma<DT, D>(a, pl.splits, pl.maps, s);
    }
  }
  cuda::launch_attention_bwd<DT, D>(a, pl.splits, s);
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
    if (const std::string why = split_conflict(p, knobs); !why.empty()) return Support::no(why);
    return Support::yes();
  }

  std::unique_ptr<AttentionBwdPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const Support s = supports(p, knobs);
    if (!s.ok) throw std::invalid_argument("cuda.unified_bwd declines: " + s.reason);
    auto pl = std::make_unique<CudaBwdPlan>();
    pl->problem = p;
    pl->path = pick_path(knobs);
    const AttentionBwdParams a = make_attention_bwd_params(p);
    pl->splits = group_splits(a, pl->path, knobs);
    pl->workspace_bytes = cuda::bwd_workspace_bytes(a, pl->splits);
    pl->summary = summary(a, pl->path, pl->splits);
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
