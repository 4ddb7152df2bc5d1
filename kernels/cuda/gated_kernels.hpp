// Launchers of the gated block's own kernels (gated_norm_rope.cu, gated_sigmoid.cu, gated_quantize.cu,
// gated_save.cu), over the params structs every backend's provider shares (common/gated_provider.hpp).
// Host-callable, no device headers; each only enqueues on `stream` (graph-capturable) and throws on a launch error.
#pragma once
#include <cuda_runtime_api.h>

#include "attnbench/dtype.hpp"
#include "common/gated_provider.hpp"

namespace attnbench::cuda {

void launch_gated_norm_rope(DType dt, int d_head, const GatedNormRopeParams& p, cudaStream_t stream);
void launch_gated_sigmoid(DType dt, const GatedSigmoidParams& p, cudaStream_t stream);
void launch_gated_quantize(DType dt, const GatedQuantizeParams& p, cudaStream_t stream);
void launch_gated_tables(const GatedTablesParams& p, cudaStream_t stream);
void launch_gated_lse_reorder(const GatedLseReorderParams& p, cudaStream_t stream);

}  // namespace attnbench::cuda
