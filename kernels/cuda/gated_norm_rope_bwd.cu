// The gated block's norm + RoPE backward: per (token, head) row of Q then K, g' = RoPE^T g and, when the block norms,
// the RMSNorm's backward into dx; then dV's rows copied into the projection gradient. D/8 lanes a row, 8 elements (16
// bytes) each, as in the forward (gated_norm_rope.cu). One wave of CTAs walks the rows: each CTA sums its rows' dw in
// registers, then shared memory, and adds the sum to dw with one fp32 atomic a column.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>

#include "cuda/gated_bwd_io.cuh"
#include "cuda/gated_bwd_kernels.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;

using dev::load_f32;
using dev::store_f32;

// The D/8 lanes of this thread's head row within its warp: rows of one warp may take different paths.
template <int D>
__device__ __forceinline__ unsigned row_mask() {
  constexpr int kLanes = D / 8;
  if constexpr (kLanes == 32) return 0xffffffffu;
  else return ((1u << kLanes) - 1) << (threadIdx.x % 32 / kLanes * kLanes);
}

template <int D>
__device__ __forceinline__ float row_sum(float v, unsigned mask) {
#pragma unroll
  for (int off = D / 16; off > 0; off /= 2) v += __shfl_xor_sync(mask, v, off);
  return v;
}

// g <- RoPE^T g over [0, rope_dim), the forward's rotation by -angle; each element's partner i +- rope_dim/2 read
// from the row's copy `row` in shared memory. cs, sn: the token's cos and sin.
template <DType DT>
__device__ __forceinline__ void rope_bwd(float (&g)[8], float* row, int col, const void* cs, const void* sn,
                                         int rope_dim, unsigned mask) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  reinterpret_cast<float4*>(row + col)[0] = make_float4(g[0], g[1], g[2], g[3]);
  reinterpret_cast<float4*>(row + col)[1] = make_float4(g[4], g[5], g[6], g[7]);
  __syncwarp(mask);
  const int half = rope_dim / 2;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int i = col + j;
    if (i >= rope_dim) continue;
    const int m = i < half ? i + half : i - half;
    const float partner = row[m] * H::to_float(static_cast<const T*>(sn)[m]);
    g[j] = g[j] * H::to_float(static_cast<const T*>(cs)[i]) + (i < half ? partner : -partner);
  }
  __syncwarp(mask);  // the lanes' next row overwrites the copy
}

// g <- rstd (dn - n mean(dn n)), n = x rstd, dn = g w with w = offset + weight; acc += g n (g before the update).
template <int D>
__device__ __forceinline__ void rms_bwd(float (&g)[8], const float (&x)[8], float rstd, const float* w,
                                        float (&acc)[8], unsigned mask) {
  float n[8], dn[8], dot = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    n[j] = x[j] * rstd;
    dn[j] = g[j] * w[j];
    dot += dn[j] * n[j];
    acc[j] += g[j] * n[j];
  }
  const float mean = row_sum<D>(dot, mask) * (1.f / D);
#pragma unroll
  for (int j = 0; j < 8; ++j) g[j] = rstd * (dn[j] - n[j] * mean);
}

// dV head h of token t (packed [tokens, k.heads, D]) to dst_v at its strides, 16 bytes a lane.
template <int D>
__device__ __forceinline__ void copy_dv(const GatedNormRopeBwdParams& p, unsigned t, unsigned h, int col) {
  const auto* src = static_cast<const uint16_t*>(p.dv) + (static_cast<int64_t>(t) * p.k.heads + h) * D + col;
  auto* dst = static_cast<uint16_t*>(p.dst_v) + t * p.dst_v_stride_token + h * p.dst_v_stride_head + col;
  dev::store16(dst, *reinterpret_cast<const uint4*>(src));
}

// Row `row` < rows is head r = row % heads_per_token of token row / heads_per_token: Q heads, K heads, then (with
// dv) the V copies. Every thread of the CTA reaches the dw flush (no early return).
template <DType DT, int D>
__global__ void __launch_bounds__(kThreads)
    norm_rope_bwd_kernel(const __grid_constant__ GatedNormRopeBwdParams p, unsigned heads_per_token, unsigned rows) {
  using T = typename StorageOf<DT>::type;
  constexpr int kLanes = D / 8, kRows = kThreads / kLanes;
  static_assert(kLanes <= 32 && 32 % kLanes == 0, "a row's lanes sit in one warp");
  __shared__ __align__(16) float gs[kRows][D];  // each row's g, for its RoPE partners
  __shared__ float ws[2][D];                    // offset + weight of Q (0) and K (1)
  __shared__ float dws[2][D];                   // the CTA's dw sums
  for (int i = threadIdx.x; i < 2 * D; i += kThreads) {
    const void* w = i < D ? p.q.weight : p.k.weight;
    ws[i / D][i % D] = p.norm ? p.weight_offset + StorageOf<DT>::to_float(static_cast<const T*>(w)[i % D]) : 0.f;
    dws[i / D][i % D] = 0.f;
  }
  __syncthreads();

  const int local_row = threadIdx.x / kLanes, col = threadIdx.x % kLanes * 8;
  const unsigned mask = row_mask<D>(), qk_heads = p.q.heads + p.k.heads;
  float acc_q[8] = {}, acc_k[8] = {};
  for (unsigned row = blockIdx.x * kRows + local_row; row < rows; row += gridDim.x * kRows) {
    const unsigned t = row / heads_per_token, r = row - t * heads_per_token;
    if (r >= qk_heads) {
      copy_dv<D>(p, t, r - qk_heads, col);
      continue;
    }
    const bool is_k = r >= static_cast<unsigned>(p.q.heads);
    const GatedNormRopeBwdTensor& a = is_k ? p.k : p.q;
    const unsigned h = is_k ? r - p.q.heads : r;
    const int64_t hr = static_cast<int64_t>(t) * a.heads + h;  // the row in g and rstd
    float g[8], x[8] = {}, rstd = 0.f;  // every load issued before the first use
    load_f32<DT, 8>(static_cast<const T*>(a.g) + hr * D + col, g);
    if (p.norm) {
      load_f32<DT, 8>(static_cast<const T*>(a.x) + t * a.x_stride_token + h * a.x_stride_head + col, x);
      rstd = a.rstd[hr];
    }
    if (p.rope_dim > 0) {
      const int64_t cs = static_cast<int64_t>(t) * p.rope_dim;
      rope_bwd<DT>(g, gs[local_row], col, static_cast<const T*>(p.cos) + cs, static_cast<const T*>(p.sin) + cs,
                   p.rope_dim, mask);
    }
    if (p.norm) {
      if (is_k) rms_bwd<D>(g, x, rstd, ws[1] + col, acc_k, mask);
      else rms_bwd<D>(g, x, rstd, ws[0] + col, acc_q, mask);
    }
    store_f32<DT, 8>(static_cast<T*>(a.dst) + t * a.dst_stride_token + h * a.dst_stride_head + col, g);
  }

  if (!p.norm || (!p.q.dw && !p.k.dw)) return;  // uniform over the CTA
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    atomicAdd(&dws[0][col + j], acc_q[j]);
    atomicAdd(&dws[1][col + j], acc_k[j]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 2 * D; i += kThreads) {
    float* dw = i < D ? p.q.dw : p.k.dw;
    if (dw) atomicAdd(dw + i % D, dws[i / D][i % D]);
  }
}

// Why the kernel cannot take p ("" when it can): a pointer it needs null, or one it reads 16 bytes at a time
// misaligned.
std::string norm_rope_bwd_conflict(const GatedNormRopeBwdParams& p, int d_head) {
  if (p.tokens < 0 || p.q.heads < 0 || p.k.heads < 0) return "negative tokens or heads";
  if (p.rope_dim < 0 || p.rope_dim % 2 != 0 || p.rope_dim > d_head) return "rope_dim not even in [0, d_head]";
  if (p.rope_dim > 0 && (!p.cos || !p.sin)) return "rope_dim > 0 with cos or sin null";
  if (p.dv && !p.dst_v) return "dv without dst_v";
  const auto chunked = [](const void* ptr, std::initializer_list<int64_t> strides) {
    return dev::aligned_to(ptr, 16) &&
           std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s % 8 == 0; });
  };
  if (p.dv && !(chunked(p.dv, {}) && chunked(p.dst_v, {p.dst_v_stride_token, p.dst_v_stride_head})))
    return "dv and dst_v must be 16-byte aligned, dst_v's strides multiples of 8";
  for (const GatedNormRopeBwdTensor* a : {&p.q, &p.k}) {
    if (a->heads == 0) continue;
    if (!a->g || !a->dst) return "g or dst null";
    if (p.norm && (!a->x || !a->rstd || !a->weight)) return "norm with x, rstd or weight null";
    if (!chunked(a->g, {}) || !chunked(a->dst, {a->dst_stride_token, a->dst_stride_head}) ||
        (p.norm && !chunked(a->x, {a->x_stride_token, a->x_stride_head})))
      return "g, x and dst must be 16-byte aligned, their strides multiples of 8";
  }
  return "";
}

template <DType DT, int D>
void launch(const GatedNormRopeBwdParams& p, cudaStream_t stream) {
  constexpr int kRows = kThreads / (D / 8);
  const auto kernel = norm_rope_bwd_kernel<DT, D>;
  const int64_t heads_per_token = int64_t{p.q.heads} + p.k.heads + (p.dv ? p.k.heads : 0);
  const int64_t rows = p.tokens * heads_per_token;
  if (rows == 0) return;
  static const int per_sm = [&] {  // the kernel's occupancy: a property of the build, not of the call
    int n = 0;
    ATTNBENCH_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, 0));
    return std::max(n, 1);
  }();
  int device = 0, sms = 0;
  ATTNBENCH_CUDA_CHECK(cudaGetDevice(&device));
  ATTNBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = std::min((rows + kRows - 1) / kRows, int64_t{sms} * per_sm);
  // The kernel walks its rows in 32 bits; no tensor that fits a GPU comes near this.
  if (rows > int64_t{std::numeric_limits<uint32_t>::max()} - blocks * kRows)
    throw std::invalid_argument("launch_gated_norm_rope_bwd: tokens * heads = " + std::to_string(rows) +
                                " exceeds the kernel's 32-bit row index");
  kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, static_cast<unsigned>(heads_per_token),
                                                                 static_cast<unsigned>(rows));
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

template <DType DT>
void launch_d(int d_head, const GatedNormRopeBwdParams& p, cudaStream_t stream) {
  switch (d_head) {
    case 64: return launch<DT, 64>(p, stream);
    case 128: return launch<DT, 128>(p, stream);
    case 256: return launch<DT, 256>(p, stream);
  }
  throw std::invalid_argument("launch_gated_norm_rope_bwd: no kernel for d_head " + std::to_string(d_head));
}

}  // namespace

void launch_gated_norm_rope_bwd(DType dt, int d_head, const GatedNormRopeBwdParams& p, cudaStream_t stream) {
  if (const std::string why = norm_rope_bwd_conflict(p, d_head); !why.empty())
    throw std::invalid_argument("launch_gated_norm_rope_bwd: " + why);
  dt == DType::bf16 ? launch_d<DType::bf16>(d_head, p, stream) : launch_d<DType::f16>(d_head, p, stream);
}

}  // namespace attnbench::cuda
