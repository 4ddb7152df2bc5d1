// The backward's GPU fp32 reference (reference_bwd.hpp): three plain kernels, a thread block of 4 warps per row,
// each warp taking every 4th key (or query) of the row, its lanes splitting the head dimension. Rows: the forward
// (O, LSE; two passes: the maximum, then the weights), dQ per (query, head) with D from the rounded O, then dK and
// dV per (key, kv head) over the queries of every head of its group that see the key. Apart from the kernels under
// test: it includes nothing of kernels/ but the params struct, and states the mask again.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "attnbench/reference_bwd.hpp"

namespace attnbench::reference {

namespace {

constexpr int kWarps = 4, kLanes = 512 / 32;  // head sizes up to 512

__device__ float elem(const void* t, int64_t i, DType dt) {
  const uint16_t h = static_cast<const uint16_t*>(t)[i];
  return dt == DType::bf16 ? __uint_as_float(static_cast<uint32_t>(h) << 16) : __half2float(__ushort_as_half(h));
}
__device__ float rounded(float x, DType dt) {
  return dt == DType::bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : __half2float(__float2half_rn(x));
}
__device__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The sequence of a token of the tensor cut by `cu`: its index, the first token of its own tensor and of the other.
struct Seq {
  int seq;
  int64_t first, other;
};
__device__ Seq seq_of(const int32_t* cu, int n, int64_t token, const int32_t* cu_other) {
  int lo = 0, hi = n;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= token) lo = mid;
    else hi = mid;
  }
  return {lo, cu[lo], cu_other[lo]};
}

__device__ bool visible(const AttentionBwdParams& p, int i, int j, int q_len, int kv_len) {
  const int pos = p.top_left ? i : i + kv_len - q_len;
  return j >= 0 && j < kv_len && (!p.causal || j <= pos) && (p.window_left < 0 || j >= pos - p.window_left) &&
         (p.window_right < 0 || j <= pos + p.window_right);
}

// The final score of (query row qt, head h) and key row kt, with d(final)/d(raw scaled) in *capd.
__device__ float score(const AttentionBwdParams& p, int64_t qt, int h, int64_t kt, int g, float* capd) {
  const int lane = threadIdx.x % 32;
  float acc = 0.f;
  for (int c = lane; c < p.head_size; c += 32)
    acc += elem(p.q, qt * p.q_stride_token + h * p.q_stride_head + c, p.dtype) *
           elem(p.k, kt * p.k_stride_token + g * p.k_stride_head + c, p.dtype);
  float x = warp_sum(acc) * p.scale;
  *capd = 1.f;
  if (p.softcap > 0.f) {
    const float t = tanhf(x / p.softcap);
    *capd = 1.f - t * t;
    x = p.softcap * t;
  }
  return x;
}

__device__ float dot_rows(const void* a, int64_t ia, const void* b, int64_t ib, int d, DType dt) {
  float acc = 0.f;
  for (int c = threadIdx.x % 32; c < d; c += 32) acc += elem(a, ia + c, dt) * elem(b, ib + c, dt);
  return warp_sum(acc);
}

// The warps' partial values (kLanes a lane) summed in shared memory; warp 0's lanes hold the row after.
__device__ void combine(float (&v)[kLanes], float* sm) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  for (int e = 0; e < kLanes; ++e) sm[(w * kLanes + e) * 32 + lane] = v[e];
  __syncthreads();
  if (w == 0)
    for (int e = 0; e < kLanes; ++e)
      for (int o = 1; o < kWarps; ++o) v[e] += sm[(o * kLanes + e) * 32 + lane];
}

__global__ void __launch_bounds__(kWarps * 32) fwd_rows(AttentionBwdParams p, float* o, float* lse) {
  __shared__ float sm[kWarps * kLanes * 32];
  __shared__ float red[kWarps];
  const int64_t row = blockIdx.x, qt = row / p.heads;
  const int h = static_cast<int>(row % p.heads), g = h / (p.heads / p.kv_heads), w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Seq s = seq_of(p.cu_seqlens_q, p.num_seqs, qt, p.cu_seqlens_k);
  const int64_t k0 = s.other;
  const int q_len = p.cu_seqlens_q[s.seq + 1] - s.first, kv_len = p.cu_seqlens_k[s.seq + 1] - k0, i = qt - s.first;
  float m = -INFINITY, capd;
  for (int j = w; j < kv_len; j += kWarps)
    if (visible(p, i, j, q_len, kv_len)) m = fmaxf(m, score(p, qt, h, k0 + j, g, &capd));
  if (lane == 0) red[w] = m;
  __syncthreads();
  m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  __syncthreads();
  float sum = 0.f, acc[kLanes] = {};
  for (int j = w; j < kv_len; j += kWarps) {
    if (!visible(p, i, j, q_len, kv_len)) continue;
    const float e = expf(score(p, qt, h, k0 + j, g, &capd) - m);
    sum += e;
    for (int c = lane, k = 0; c < p.head_size; c += 32, ++k)
      acc[k] += e * elem(p.v, (k0 + j) * p.k_stride_token + g * p.k_stride_head + c, p.dtype);
  }
  if (lane == 0) red[w] = sum;
  combine(acc, sm);
  if (w != 0) return;
  sum = red[0] + red[1] + red[2] + red[3];
  for (int c = lane, k = 0; c < p.head_size; c += 32, ++k) o[row * p.head_size + c] = sum > 0 ? acc[k] / sum : 0.f;
  if (lane == 0) lse[row] = sum > 0 ? m + logf(sum) : -INFINITY;
}

__global__ void __launch_bounds__(kWarps * 32) dq_rows(AttentionBwdParams p, const float* o, const float* lse,
                                                       float* dsum, float* dq) {
  __shared__ float sm[kWarps * kLanes * 32];
  const int64_t row = blockIdx.x, qt = row / p.heads;
  const int h = static_cast<int>(row % p.heads), g = h / (p.heads / p.kv_heads), w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Seq s = seq_of(p.cu_seqlens_q, p.num_seqs, qt, p.cu_seqlens_k);
  const int64_t k0 = s.other;
  const int q_len = p.cu_seqlens_q[s.seq + 1] - s.first, kv_len = p.cu_seqlens_k[s.seq + 1] - k0, i = qt - s.first;
  const int64_t qoff = qt * p.q_stride_token + h * p.q_stride_head;
  float D = 0.f;  // over O as the kernels read it: rounded to the dtype
  for (int c = lane; c < p.head_size; c += 32) D += rounded(o[row * p.head_size + c], p.dtype) * elem(p.d_o, qoff + c, p.dtype);
  D = warp_sum(D);
  const float l = lse[row];
  float acc[kLanes] = {}, capd;
  for (int j = w; j < kv_len; j += kWarps) {
    if (!visible(p, i, j, q_len, kv_len)) continue;
    const int64_t koff = (k0 + j) * p.k_stride_token + g * p.k_stride_head;
    const float pr = expf(score(p, qt, h, k0 + j, g, &capd) - l);
    const float ds = pr * (dot_rows(p.d_o, qoff, p.v, koff, p.head_size, p.dtype) - D) * capd;
    for (int c = lane, k = 0; c < p.head_size; c += 32, ++k) acc[k] += ds * elem(p.k, koff + c, p.dtype);
  }
  combine(acc, sm);
  if (w != 0) return;
  for (int c = lane, k = 0; c < p.head_size; c += 32, ++k) dq[row * p.head_size + c] = acc[k] * p.scale;
  if (lane == 0) dsum[row] = D;
}

__global__ void __launch_bounds__(kWarps * 32) dkv_rows(AttentionBwdParams p, const float* lse, const float* dsum,
                                                        float* dk, float* dv) {
  __shared__ float sm[kWarps * kLanes * 32];
  const int64_t row = blockIdx.x, kt = row / p.kv_heads;
  const int g = static_cast<int>(row % p.kv_heads), group = p.heads / p.kv_heads, w = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const Seq s = seq_of(p.cu_seqlens_k, p.num_seqs, kt, p.cu_seqlens_q);
  const int64_t q0 = s.other, k0 = s.first;
  const int q_len = p.cu_seqlens_q[s.seq + 1] - q0, kv_len = p.cu_seqlens_k[s.seq + 1] - k0, j = kt - k0;
  const int64_t koff = kt * p.k_stride_token + g * p.k_stride_head;
  float ak[kLanes] = {}, av[kLanes] = {}, capd;
  for (int h = g * group; h < (g + 1) * group; ++h)
    for (int i = w; i < q_len; i += kWarps) {
      if (!visible(p, i, j, q_len, kv_len)) continue;
      const int64_t qt = q0 + i, qoff = qt * p.q_stride_token + h * p.q_stride_head, r = qt * p.heads + h;
      const float pr = expf(score(p, qt, h, kt, g, &capd) - lse[r]);
      const float ds = pr * (dot_rows(p.d_o, qoff, p.v, koff, p.head_size, p.dtype) - dsum[r]) * capd;
      for (int c = lane, k = 0; c < p.head_size; c += 32, ++k) {
        ak[k] += ds * elem(p.q, qoff + c, p.dtype);
        av[k] += pr * elem(p.d_o, qoff + c, p.dtype);
      }
    }
  combine(ak, sm);
  __syncthreads();
  combine(av, sm);
  if (w != 0) return;
  for (int c = lane, k = 0; c < p.head_size; c += 32, ++k) {
    dk[row * p.head_size + c] = ak[k] * p.scale;
    dv[row * p.head_size + c] = av[k];
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("GPU backward reference ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace

void attention_backward_gpu(const AttentionBwdParams& p, float* o, float* lse, float* dsum, float* dq, float* dk,
                            float* dv, void* stream) {
  if (p.head_size > 512) throw std::invalid_argument("GPU backward reference: head_size above 512");
  auto* st = static_cast<cudaStream_t>(stream);
  const unsigned qrows = static_cast<unsigned>(p.total_q * p.heads), krows = static_cast<unsigned>(p.total_k * p.kv_heads);
  fwd_rows<<<qrows, kWarps * 32, 0, st>>>(p, o, lse);
  check(cudaGetLastError(), "forward");
  dq_rows<<<qrows, kWarps * 32, 0, st>>>(p, o, lse, dsum, dq);
  check(cudaGetLastError(), "dQ");
  dkv_rows<<<krows, kWarps * 32, 0, st>>>(p, lse, dsum, dk, dv);
  check(cudaGetLastError(), "dK/dV");
}

}  // namespace attnbench::reference
