// The derived index tensors of cudnn.sdpa (derived.hpp): one thread per entry; and the FP8 graph's O dequantisation,
// 16 codes per thread.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>

#include "common/device/mx_rules.hpp"
#include "cuda/runtime.hpp"
#include "cuda/storage.cuh"
#include "cudnn/derived.hpp"

namespace attnbench::cudnn {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) derive_tables_kernel(const int32_t* cu_seqlens_q, int num_seqs,
                                                                 int64_t q_stride_token, int64_t o_stride_token,
                                                                 DerivedTables t, Fp8Scalars fp8) {
  const int i = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (i <= num_seqs) derive_entry(cu_seqlens_q, num_seqs, i, q_stride_token, o_stride_token, t);
  if (i < kFp8Scalars && t.fp8) t.fp8[i] = reinterpret_cast<const float*>(&fp8)[i];
}

// Grid: x over 16-code chunks of a token (heads * d / 16 of them), y over tokens in groups of gridDim.y.
template <DType DT>
__global__ void __launch_bounds__(kThreads) dequantize_o_kernel(const unsigned char* codes, int64_t total_q,
                                                                int chunks, int d, float inv_scale_o, void* out,
                                                                int64_t o_stride_token, int64_t o_stride_head) {
  using H = cuda::StorageOf<DT>;
  using T = typename H::type;
  const int c = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (c >= chunks) return;
  const int h = c * 16 / d, k = c * 16 % d;
  for (int64_t tok = blockIdx.y; tok < total_q; tok += gridDim.y) {
    const uint4 raw = *reinterpret_cast<const uint4*>(codes + (tok * chunks + c) * 16);
    const auto* b = reinterpret_cast<const unsigned char*>(&raw);
    uint4 v[2];
    auto* o = reinterpret_cast<T*>(v);
#pragma unroll
    for (int j = 0; j < 16; ++j) o[j] = H::from_float(device::mul_rn(device::e4m3_value(b[j]), inv_scale_o));
    T* dst = static_cast<T*>(out) + tok * o_stride_token + h * o_stride_head + k;
    reinterpret_cast<uint4*>(dst)[0] = v[0];
    reinterpret_cast<uint4*>(dst)[1] = v[1];
  }
}

}  // namespace

void launch_derive_tables(const int32_t* cu_seqlens_q, int num_seqs, int64_t q_stride_token, int64_t o_stride_token,
                          const DerivedTables& t, cudaStream_t stream, const Fp8Scalars& fp8) {
  const int blocks = (num_seqs + 1 + kThreads - 1) / kThreads;
  derive_tables_kernel<<<blocks, kThreads, 0, stream>>>(cu_seqlens_q, num_seqs, q_stride_token, o_stride_token, t,
                                                        fp8);
  cuda::check_last_launch("cudnn.sdpa: derive_tables_kernel");
}

void launch_dequantize_o(const unsigned char* codes, int64_t total_q, int heads, int d, float inv_scale_o, DType out_dt,
                         void* out, int64_t o_stride_token, int64_t o_stride_head, cudaStream_t stream) {
  if (d % 16 != 0) throw std::invalid_argument("cudnn.sdpa: the FP8 O dequantisation needs d % 16 == 0");
  if (total_q == 0) return;
  const int chunks = heads * d / 16;
  const dim3 grid((chunks + kThreads - 1) / kThreads, static_cast<unsigned>(total_q < 65535 ? total_q : 65535));
  if (out_dt == DType::bf16)
    dequantize_o_kernel<DType::bf16><<<grid, kThreads, 0, stream>>>(codes, total_q, chunks, d, inv_scale_o, out,
                                                                     o_stride_token, o_stride_head);
  else
    dequantize_o_kernel<DType::f16><<<grid, kThreads, 0, stream>>>(codes, total_q, chunks, d, inv_scale_o, out,
                                                                    o_stride_token, o_stride_head);
  cuda::check_last_launch("cudnn.sdpa: dequantize_o_kernel");
}

}  // namespace attnbench::cudnn
