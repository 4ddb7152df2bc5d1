// cudnn.gated_chain_bwd: the gated block's backward as a user would assemble it from vendor libraries, the
// in-process peer of cuda.gated_block_bwd: the CUDA provider's cuBLASLt GEMMs and gate / norm + RoPE backward
// kernels, each its own launch, with cuDNN's SDPA backward (cudnn.sdpa_backward); a problem cuDNN refuses is
// declined with cuDNN's reason.
#include <memory>
#include <string>

#include "attnbench/attention_bwd.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "cuda/gated_block_bwd.hpp"

namespace attnbench {
namespace {

class CudnnChainBwdProvider final : public CudaBwdProvider {
 public:
  std::string name() const override { return "cudnn.gated_chain_bwd"; }
  std::unique_ptr<AttentionBwdKernel> make_sdpa_bwd() const override { return make_cudnn_sdpa_backward(); }
};

}  // namespace

std::unique_ptr<GatedBlockBwdKernel> make_cudnn_gated_chain_bwd() {
  return make_gated_block_bwd_kernel(std::make_shared<const CudnnChainBwdProvider>());
}

}  // namespace attnbench
