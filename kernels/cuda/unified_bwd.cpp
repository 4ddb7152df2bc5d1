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

class CudaUnifiedBwd final : public AttentionBwdKernel {
 public:
  std::string name() const override { return "cuda.unified_bwd"; }
  Backend backend() const override { return Backend::cuda; }

  Support supports(const AttentionProblem& p, const KnobValues& /*knobs*/) const override {
    if (const std::string why = attention_bwd_conflict(p); !why.empty()) return Support::no(why);
    if (p.head_size != 64 && p.head_size != 128)
      return Support::no("head_size " + std::to_string(p.head_size) +
                         ": cuda.unified_bwd has instances for 64 and 128 (its dK/dV registers do not fit d256 yet)");
    return Support::yes();
  }

  std::unique_ptr<AttentionBwdPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const Support s = supports(p, knobs);
    if (!s.ok) throw std::invalid_argument("cuda.unified_bwd declines: " + s.reason);
    auto pl = std::make_unique<CudaBwdPlan>();
    pl->problem = p;
    pl->workspace_bytes = cuda::bwd_workspace_bytes(make_attention_bwd_params(p));
    pl->summary = "fa2 mma.sync kv-tile 64 q-tile 64 warps 4 dq atomics";
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
    const bool bf16 = a.dtype == DType::bf16;
    if (a.head_size == 64)
      bf16 ? cuda::launch_attention_bwd<DType::bf16, 64>(a, s) : cuda::launch_attention_bwd<DType::f16, 64>(a, s);
    else
      bf16 ? cuda::launch_attention_bwd<DType::bf16, 128>(a, s) : cuda::launch_attention_bwd<DType::f16, 128>(a, s);
  }
};

}  // namespace

std::unique_ptr<AttentionBwdKernel> make_cuda_unified_bwd() { return std::make_unique<CudaUnifiedBwd>(); }

}  // namespace attnbench
