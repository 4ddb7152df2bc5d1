// A build without the CUDA backend has no GPU reference: the harness gates on the Eigen reference.
#include <stdexcept>

#include "attnbench/gated_block_bwd_ref.hpp"
#include "attnbench/reference_bwd.hpp"
#include "attnbench/reference_gpu.hpp"

namespace attnbench::reference {

bool gpu_reference_built() { return false; }

std::string gpu_reference_conflict(const AttentionProblem&) { return "the GPU reference is not built (no CUDA backend)"; }

void paged_attention_gpu(const AttentionParams&, float*, float*, void*) {
  throw std::logic_error("reference::paged_attention_gpu: not built (no CUDA backend)");
}

void attention_backward_gpu(const AttentionBwdParams&, float*, float*, float*, float*, float*, float*, void*) {
  throw std::logic_error("reference::attention_backward_gpu: not built (no CUDA backend)");
}

std::size_t gated_block_backward_gpu_workspace(const GatedGeometry&) { return 0; }

void gated_block_backward_gpu(const GatedGeometry&, const GatedOptions&, const GatedBwdGpuIo&, void*) {
  throw std::logic_error("reference::gated_block_backward_gpu: not built (no CUDA backend)");
}

}  // namespace attnbench::reference
