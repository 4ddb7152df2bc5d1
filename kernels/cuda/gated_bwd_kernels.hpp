// Launchers of the gated block backward's own kernels (gated_bwd_kernels.cu, gated_norm_rope_bwd.cu), over the
// params structs every backend's backward provider shares (common/gated_bwd_provider.hpp). Host-callable, no device
// headers; each only enqueues on `stream` (graph-capturable) and throws on a launch error or a layout it cannot take.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attnbench/dtype.hpp"
#include "common/gated_bwd_provider.hpp"

namespace attnbench::cuda {

// 16-byte accesses where every pointer and stride allows them, one element a thread otherwise.
void launch_gated_gate_bwd(DType dt, const GatedGateBwdParams& p, cudaStream_t stream);
// d_head 64, 128 or 256; g, x, dst, dv and dst_v 16-byte aligned with strides a multiple of 8 (std::invalid_argument
// otherwise). dw sums are fp32 atomics: their order, and so their last bits, vary from run to run.
void launch_gated_norm_rope_bwd(DType dt, int d_head, const GatedNormRopeBwdParams& p, cudaStream_t stream);
void launch_gated_cast(DType dt, const float* src, void* dst, int64_t n, cudaStream_t stream);
// cu[b] = b seqlen for b <= batch (batch seqlen < 2^31, as GatedGeometry guarantees).
void launch_gated_cu_seqlens(int32_t* cu, int batch, int seqlen, cudaStream_t stream);

}  // namespace attnbench::cuda
