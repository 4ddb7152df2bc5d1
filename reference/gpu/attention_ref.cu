// The GPU fp32 reference (reference_gpu.hpp): one thread block per (query row, head). Each warp takes every
// kWarps-th visible key; its lanes split the head dimension. Pass 1 finds the row's maximum score (the sink
// included), pass 2 sums e^(s - max) and the weighted V rows; the warps' partial sums meet in shared memory.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "attnbench/reference_gpu.hpp"

namespace attnbench::reference {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxHeadSize = 512;
constexpr int kLaneElems = kMaxHeadSize / 32;

// A minifloat's value from its fields: 1 sign bit, ebits exponent bits (bias 2^(ebits-1) - 1), mbits mantissa
// bits. has_inf: the top exponent holds inf (mantissa 0) and NaN (IEEE fp16, e5m2); otherwise only the all-ones
// pattern is NaN and the rest of the top exponent are numbers (e4m3).
__device__ float minifloat(uint32_t bits, int ebits, int mbits, bool has_inf) {
  const uint32_t mant = bits & ((1u << mbits) - 1);
  const int exp = static_cast<int>((bits >> mbits) & ((1u << ebits) - 1));
  const bool negative = (bits >> (ebits + mbits)) & 1u;
  const int bias = (1 << (ebits - 1)) - 1, top = (1 << ebits) - 1;
  float v;
  if (exp == top && has_inf) v = mant == 0 ? INFINITY : NAN;
  else if (exp == top && mant == (1u << mbits) - 1) v = NAN;
  else if (exp == 0) v = ldexpf(static_cast<float>(mant), 1 - bias - mbits);
  else v = ldexpf(static_cast<float>(mant | (1u << mbits)), exp - bias - mbits);
  return negative ? -v : v;
}

__device__ float element(const void* base, int64_t i, DType t) {
  switch (t) {
    case DType::bf16: return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16);
    case DType::f16: return minifloat(static_cast<const uint16_t*>(base)[i], 5, 10, true);
    case DType::e4m3: return minifloat(static_cast<const uint8_t*>(base)[i], 4, 3, false);
    case DType::e5m2: return minifloat(static_cast<const uint8_t*>(base)[i], 5, 2, true);
  }
  return NAN;
}

// Where a query row sits: its sequence, its index there, its key position and its visible keys [begin, end).
struct RowSpan {
  int seq = 0, qi = 0, q_len = 0, kv_len = 0, pos = 0, begin = 0, end = 0;
};

__device__ RowSpan row_span(const AttentionParams& p, int64_t token) {
  int lo = 0, hi = p.num_seqs;  // the last sequence whose first token is <= token (empty ones skipped)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.cu_seqlens_q[mid] <= token) lo = mid;
    else hi = mid;
  }
  RowSpan r;
  r.seq = lo;
  r.q_len = p.cu_seqlens_q[lo + 1] - p.cu_seqlens_q[lo];
  r.kv_len = max(0, p.seqused_k[lo]);
  r.qi = static_cast<int>(token - p.cu_seqlens_q[lo]);
  r.pos = p.top_left ? r.qi : r.qi + r.kv_len - r.q_len;  // bottom-right unless aligned top-left
  int begin = 0, end = r.kv_len;
  if (p.causal) end = min(max(r.pos + 1, 0), r.kv_len);
  if (p.features.window_right >= 0) end = min(max(r.pos + p.features.window_right + 1, 0), end);
  if (p.features.window_left >= 0) begin = min(max(r.pos - p.features.window_left, 0), r.kv_len);
  r.begin = begin;
  r.end = max(begin, end);
  return r;
}

// Element offset of key j's row of kv head kvh, through the block table.
__device__ int64_t key_offset(const AttentionParams& p, const RowSpan& r, int j, int kvh) {
  const int64_t block = p.block_table[static_cast<int64_t>(r.seq) * p.block_table_stride + j / p.block_size];
  return block * p.kv_stride_block + static_cast<int64_t>(j % p.block_size) * p.kv_stride_token +
         static_cast<int64_t>(kvh) * p.kv_stride_head;
}

// Key j's final score (every lane of the warp gets it): scale * q.k, then softcap, ALiBi and the qq-bias.
__device__ float score(const AttentionParams& p, const float* q, const RowSpan& r, int head, int kvh, int j, int lane) {
  const int64_t k0 = key_offset(p, r, j, kvh);
  float dot = 0.f;
  for (int x = lane; x < p.head_size; x += 32) dot += q[x] * (element(p.k_cache, k0 + x, p.types.kv) * p.features.k_scale);
  for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  float s = dot * p.scale;
  const AttentionFeatureParams& f = p.features;
  if (f.softcap > 0.f) s = f.softcap * tanhf(s / f.softcap);
  if (f.alibi_slopes) s += f.alibi_slopes[head] * static_cast<float>(j - r.pos);
  const int new_from = r.kv_len - r.q_len;  // the sequence's new tokens, which the qq-bias spans
  if (f.qq_bias && j >= new_from) s += f.qq_bias[static_cast<int64_t>(r.qi) * f.qq_bias_len + (j - new_from)];
  return s;
}

__global__ void __launch_bounds__(kWarps * 32) reference_rows(const AttentionParams p, float* out, float* lse) {
  extern __shared__ float smem[];
  float* q = smem;                       // [head_size]
  float* acc_w = smem + p.head_size;     // [kWarps][head_size]
  __shared__ float max_w[kWarps], sum_w[kWarps];
  const int64_t row = blockIdx.x;  // token * heads + head
  const int64_t token = row / p.heads;
  const int head = static_cast<int>(row % p.heads), d = p.head_size;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const RowSpan r = row_span(p, token);
  const int kvh = head / (p.heads / p.kv_heads);
  const int64_t q0 = token * p.q_stride_token + static_cast<int64_t>(head) * p.q_stride_head;
  for (int x = threadIdx.x; x < d; x += blockDim.x) q[x] = element(p.q, q0 + x, p.types.q) * p.features.q_scale;
  __syncthreads();

  const float* sinks = p.features.sinks;
  float m = sinks ? sinks[head] : -INFINITY;
  for (int j = r.begin + warp; j < r.end; j += kWarps) m = fmaxf(m, score(p, q, r, head, kvh, j, lane));
  if (lane == 0) max_w[warp] = m;
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, max_w[w]);

  float l = 0.f, acc[kLaneElems] = {};
  for (int j = r.begin + warp; j < r.end; j += kWarps) {
    const float wgt = expf(score(p, q, r, head, kvh, j, lane) - m);
    l += wgt;
    const int64_t v0 = key_offset(p, r, j, kvh);
#pragma unroll
    for (int i = 0; i < kLaneElems; ++i) {
      const int x = lane + 32 * i;
      if (x < d) acc[i] += wgt * (element(p.v_cache, v0 + x, p.types.kv) * p.features.v_scale);
    }
  }
#pragma unroll
  for (int i = 0; i < kLaneElems; ++i)
    if (lane + 32 * i < d) acc_w[warp * d + lane + 32 * i] = acc[i];
  if (lane == 0) sum_w[warp] = l;
  __syncthreads();
  float total = sinks ? expf(sinks[head] - m) : 0.f;  // the sink weighs the denominator only
  for (int w = 0; w < kWarps; ++w) total += sum_w[w];
  for (int x = threadIdx.x; x < d; x += blockDim.x) {
    float o = 0.f;
    for (int w = 0; w < kWarps; ++w) o += acc_w[w * d + x];
    out[row * d + x] = total > 0.f ? o / total : 0.f;
  }
  if (lse && threadIdx.x == 0) lse[row] = total > 0.f || total != total ? m + logf(total) : -INFINITY;
}

}  // namespace

bool gpu_reference_built() { return true; }

std::string gpu_reference_conflict(const AttentionProblem& p) {
  if (p.fusion.output_gate || p.fusion.has_q_prologue()) return "the GPU reference takes no gated-block fusion";
  if (p.head_size > kMaxHeadSize) return "the GPU reference takes head sizes up to " + std::to_string(kMaxHeadSize);
  return "";
}

void paged_attention_gpu(const AttentionParams& p, float* out, float* lse, void* stream) {
  const int64_t rows = p.total_q * p.heads;
  if (rows <= 0) return;
  if (p.head_size <= 0 || p.head_size > kMaxHeadSize || p.kv_heads <= 0 || p.heads % p.kv_heads != 0)
    throw std::invalid_argument("reference::paged_attention_gpu: head_size " + std::to_string(p.head_size) +
                                ", heads " + std::to_string(p.heads) + ", kv_heads " + std::to_string(p.kv_heads));
  const std::size_t smem = sizeof(float) * (1 + kWarps) * p.head_size;
  reference_rows<<<static_cast<unsigned>(rows), kWarps * 32, smem, static_cast<cudaStream_t>(stream)>>>(p, out, lse);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("reference::paged_attention_gpu: launch failed: ") + cudaGetErrorName(e) +
                             " (" + cudaGetErrorString(e) + ")");
}

}  // namespace attnbench::reference
