// cuda.unified_bwd's host side: what it takes, its plan (the workspace) and the dispatch to an instance.
#include "cuda/unified_bwd.hpp"

#include <stdexcept>
#include <string>

#include "attnbench/attention_bwd.hpp"

namespace attnbench {
namespace {

struct CudaBwdPlan final : AttentionBwdPlan {
  AttentionProblem problem;
};

// d256 names its column chunks: each CTA recomputes S and dP over the whole head for its chunk of dK, dV and dQ.
std::string summary(int head_size) {
  const cuda::BwdTile t = cuda::bwd_tile(head_size);
  std::string s = "fa2 mma.sync kv-tile " + std::to_string(t.key_rows) + " q-tile " + std::to_string(t.query_rows) +
                  " warps 4 dq atomics";
  if (t.chunks > 1)
    s += " col-chunks " + std::to_string(t.chunks) + "x" + std::to_string(t.cols) + " (S, dP per chunk)";
  return s;
}

template <int D> void launch(const AttentionBwdParams& a, cudaStream_t s) {
  if (a.dtype == DType::bf16)
    cuda::launch_attention_bwd<DType::bf16, D>(a, s);
  else
    cuda::launch_attention_bwd<DType::f16, D>(a, s);
}

class CudaUnifiedBwd final : public AttentionBwdKernel {
 public:
  std::string name() const override { return "cuda.unified_bwd"; }
  Backend backend() const override { return Backend::cuda; }

  Support supports(const AttentionProblem& p, const KnobValues& /*knobs*/) const override {
    if (const std::string why = attention_bwd_conflict(p); !why.empty()) return Support::no(why);
    if (p.head_size != 64 && p.head_size != 128 && p.head_size != 256)
      return Support::no("head_size " + std::to_string(p.head_size) +
                         ": cuda.unified_bwd has instances for 64, 128 and 256");
    return Support::yes();
  }

  std::unique_ptr<AttentionBwdPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const Support s = supports(p, knobs);
    if (!s.ok) throw std::invalid_argument("cuda.unified_bwd declines: " + s.reason);
    auto pl = std::make_unique<CudaBwdPlan>();
    pl->problem = p;
    pl->workspace_bytes = cuda::bwd_workspace_bytes(make_attention_bwd_params(p));
    pl->summary = summary(p.head_size);
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
      case 64: return launch<64>(a, s);
      case 128: return launch<128>(a, s);
      default: return launch<256>(a, s);
    }
  }
};

}  // namespace

std::unique_ptr<AttentionBwdKernel> make_cuda_unified_bwd() { return std::make_unique<CudaUnifiedBwd>(); }

}  // namespace attnbench
