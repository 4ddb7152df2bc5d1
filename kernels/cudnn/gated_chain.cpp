// cudnn.gated_chain: the gated block as a user would assemble it from vendor libraries, the in-process peer of
// cuda.gated_block. cuBLASLt projections and the CUDA provider's table, norm + RoPE and sigmoid-gate kernels, each
// its own launch, and cuDNN's SDPA (cudnn.sdpa) planned on the projection's strides. Nothing is fused: the block clears fuse_gate and fuse_norm_rope, and a problem cuDNN
// refuses is declined with cuDNN's reason.
#include <memory>
#include <string>

#include "attnbench/gated_block.hpp"
#include "common/gated_orchestrator.hpp"
#include "cuda/gated_provider.hpp"
#include "cudnn/sdpa.hpp"

namespace attnbench {
namespace {

class CudnnChainProvider final : public CudaGatedProvider {
 public:
  std::string name() const override { return "cudnn.gated_chain"; }
  std::unique_ptr<AttentionKernel> make_sdpa(const AttentionParams& layout) const override {
    return make_cudnn_sdpa_on(layout);
  }
  bool fuses() const override { return false; }
};

}  // namespace

std::unique_ptr<GatedBlockKernel> make_cudnn_gated_chain() {
  return make_gated_block_kernel(std::make_shared<const CudnnChainProvider>());
}

}  // namespace attnbench
