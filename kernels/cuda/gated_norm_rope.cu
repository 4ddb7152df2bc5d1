// The gated block's QK-RMSNorm + partial rotate-half RoPE, in place in the projection output. D/8 threads per
// head row, 8 elements (16 bytes) each: sum of squares reduced by shuffles within the row's lanes, norm in fp32,
// then the RoPE partner (i +- rope_dim/2) read from the row's fp32 copy in shared memory; rounded once on store.
// Under save_for_backward the row goes to the packed save set instead (with its rstd and, when asked, the row as
// loaded), V's rows too.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "common/device/mx_rules.hpp"
#include "cuda/elementwise.cuh"
#include "cuda/gated_kernels.hpp"
#include "cuda/row_norm.cuh"
#include "cuda/runtime.hpp"
#include "cuda/storage.cuh"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;


template <DType DT>
__device__ __forceinline__ void widen8(const uint4& raw, float (&x)[8]) {
  using H = StorageOf<DT>;
  const auto* h = reinterpret_cast<const typename H::type*>(&raw);
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = H::to_float(h[j]);
}

template <DType DT>
__device__ __forceinline__ void load8(const void* src, float (&x)[8]) {
  widen8<DT>(*static_cast<const uint4*>(src), x);
}

template <DType DT, int D>
__global__ void __launch_bounds__(kThreads) norm_rope_kernel(const __grid_constant__ GatedNormRopeParams p) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  constexpr int kTpr = D / 8;               // threads per head row
  constexpr int kRows = kThreads / kTpr;    // head rows per block
  static_assert(kTpr <= 32 && 32 % kTpr == 0, "a row's threads sit in one warp");
  __shared__ float xs[kRows][D];

  const int local_row = threadIdx.x / kTpr, lane = threadIdx.x % kTpr;
  const int heads = p.row_heads();  // V rows: quantised or saved only
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRows + local_row;
  const bool valid = row < p.tokens * heads;
  const int64_t t = valid ? row / heads : 0;
  const int hh = valid ? static_cast<int>(row % heads) : 0;
  const NormRopeRow nr = norm_rope_row_of(p, D, hh);
  const bool is_q = nr.kind == NormRopeRow::q, is_v = nr.kind == NormRopeRow::v;
  T* x_ptr = static_cast<T*>(p.proj) + t * p.row_stride + nr.src + lane * 8;
  const NormRopeSaveRow sv = p.save.q ? save_row_of(p, D, hh, t) : NormRopeSaveRow{nullptr, nullptr, nullptr};

  float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (valid) {
    const uint4 raw = *reinterpret_cast<const uint4*>(x_ptr);
    if (sv.pre) *reinterpret_cast<uint4*>(static_cast<T*>(sv.pre) + lane * 8) = raw;
    widen8<DT>(raw, x);
  }

  if (p.norm) {  // every lane shuffles (rows share warps); V rows keep x
    const float inv = row_inv_rms<D>(x, p.eps);
    if (valid && sv.rstd && lane == 0) *sv.rstd = inv;
    float w[8];
    load8<DT>(static_cast<const T*>(is_q ? p.q_weight : p.k_weight) + lane * 8, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = is_v ? x[j] : x[j] * inv * (p.weight_offset + w[j]);
  }

  if (p.rope_dim > 0) {
#pragma unroll
    for (int j = 0; j < 8; ++j) xs[local_row][lane * 8 + j] = x[j];
    __syncwarp();
    const int half = p.rope_dim / 2;
    const T* cs = static_cast<const T*>(p.cos) + t * p.rope_dim;
    const T* sn = static_cast<const T*>(p.sin) + t * p.rope_dim;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = lane * 8 + j;
      if (valid && !is_v && i < p.rope_dim) {
        const float c = H::to_float(cs[i]), s = H::to_float(sn[i]);
        x[j] = i < half ? x[j] * c - xs[local_row][i + half] * s : x[j] * c + xs[local_row][i - half] * s;
      }
    }
  }

  if (!valid) return;
  uint4 raw;
  auto* h = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int j = 0; j < 8; ++j) h[j] = H::from_float(x[j]);
  if (!p.codes) {  // back in place, or to the save set
    *reinterpret_cast<uint4*>(sv.out ? static_cast<T*>(sv.out) + lane * 8 : x_ptr) = raw;
    return;
  }
  uint32_t c[4];  // the stored value's codes: the unfused passes' bytes
#pragma unroll
  for (int j = 0; j < 4; ++j)
    c[j] = dev::e4m3_codes2(device::mul_rn(H::to_float(h[2 * j]), nr.scale),
                            device::mul_rn(H::to_float(h[2 * j + 1]), nr.scale));
  const uint2 codes = make_uint2(c[0] | c[1] << 16, c[2] | c[3] << 16);
  *reinterpret_cast<uint2*>(p.codes + t * p.codes_stride + nr.dst + lane * 8) = codes;
}

template <DType DT, int D>
void launch(const GatedNormRopeParams& p, cudaStream_t stream) {
  constexpr int kRows = kThreads / (D / 8);
  const int64_t rows = p.tokens * p.row_heads();
  const int64_t blocks = (rows + kRows - 1) / kRows;
  if (blocks == 0) return;
  norm_rope_kernel<DT, D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

template <DType DT>
void launch_d(int d_head, const GatedNormRopeParams& p, cudaStream_t stream) {
  switch (d_head) {
    case 64: return launch<DT, 64>(p, stream);
    case 128: return launch<DT, 128>(p, stream);
    case 256: return launch<DT, 256>(p, stream);
  }
  throw std::invalid_argument("launch_gated_norm_rope: no kernel for d_head " + std::to_string(d_head));
}

}  // namespace

void launch_gated_norm_rope(DType dt, int d_head, const GatedNormRopeParams& p, cudaStream_t stream) {
  dt == DType::bf16 ? launch_d<DType::bf16>(d_head, p, stream) : launch_d<DType::f16>(d_head, p, stream);
}

}  // namespace attnbench::cuda
