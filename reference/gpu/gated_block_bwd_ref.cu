// The gated block backward's GPU fp32 reference (gated_block_bwd_ref.hpp): the host reference's stages, in its
// order and at its rounding points, as plain kernels over the caller's workspace. The 16-bit inputs are widened to
// fp32 once; every GEMM is one tiled SGEMM of fp32 FMAs (64x64 tiles, 4x4 a thread: no tensor cores, no TF32, one
// fp32 accumulator per output summed over k in order); norm + RoPE and its backward take one warp per head row, the
// norm's sums in double as the host's, the weight's gradient summed per thread block and then over the blocks; the
// SDPA is attention_backward_gpu. Apart from the kernels under test: it includes nothing of kernels/ but the API.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>

#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/gated_block_bwd_ref.hpp"
#include "attnbench/reference_bwd.hpp"

namespace attnbench::reference {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxHead = 256;     // gated_head_size_supported: 64, 128, 256
constexpr int kNormBlocks = 512;  // the norm backward's thread blocks: its dw's partial sums
constexpr int kTile = 64, kDepth = 16;

__device__ float widen(uint16_t h, DType dt) {
  return dt == DType::bf16 ? __uint_as_float(static_cast<uint32_t>(h) << 16) : __half2float(__ushort_as_half(h));
}
__device__ uint16_t narrow(float x, DType dt) {
  return dt == DType::bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}
__device__ double warp_sum(double x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
// 1 / (1 + exp(-g)), as the host's Eigen expression states it.
__device__ float sigmoid(float g) { return 1.f / (1.f + expf(-g)); }

__global__ void widen_kernel(const uint16_t* src, float* dst, int64_t n, DType dt) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads)
    dst[i] = widen(src[i], dt);
}

__global__ void narrow_kernel(const float* src, uint16_t* dst, int64_t n, DType dt) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads)
    dst[i] = narrow(src[i], dt);
}

// The SDPA's dO = dY s, rounded to the dtype.
__global__ void gate_do_kernel(const float* gate, const float* dY, uint16_t* d_o, int64_t n, DType dt) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads)
    d_o[i] = narrow(dY[i] * sigmoid(gate[i]), dt);
}

// Y = O s and dGATE = dY O s (1 - s), the latter over dY.
__global__ void gate_post_kernel(const float* gate, const float* o, float* dY, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    const float s = sigmoid(gate[i]);
    y[i] = o[i] * s;
    dY[i] = dY[i] * o[i] * s * (1.f - s);
  }
}

__global__ void cu_seqlens_kernel(int32_t* cu, int batch, int seqlen) {
  for (int b = threadIdx.x; b <= batch; b += blockDim.x) cu[b] = b * seqlen;
}

// C [m, n] (ldc) = op(A) op(B), plus C's old value when `accumulate`: op(A) [m, k] is A [m, k] (lda), or A^T of
// A [k, m] when ta; op(B) [k, n] is B [k, n] (ldb), or B^T of B [n, k] when tb. Row-major, strides in elements.
struct Gemm {
  const float *a = nullptr, *b = nullptr;
  float* c = nullptr;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  bool ta = false, tb = false, accumulate = false;
};

// Thread (tx, ty) of 16 x 16 owns rows ty*4.. and columns tx*4.. of the block's 64 x 64 tile of C; the tiles of
// op(A) and op(B) are staged k-major in shared memory, each loaded along its source's contiguous dimension.
__global__ void __launch_bounds__(kThreads) sgemm_kernel(const __grid_constant__ Gemm p) {
  __shared__ __align__(16) float as[kDepth][kTile + 4];
  __shared__ __align__(16) float bs[kDepth][kTile + 4];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t{blockIdx.x} * kTile, n0 = int64_t{blockIdx.y} * kTile;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < p.k; k0 += kDepth) {
    for (int e = tid; e < kTile * kDepth; e += kThreads) {
      const int ai = p.ta ? e % kTile : e / kDepth, ak = p.ta ? e / kTile : e % kDepth;
      const int64_t am = m0 + ai, akk = k0 + ak;
      as[ak][ai] = am < p.m && akk < p.k ? p.a[p.ta ? akk * p.lda + am : am * p.lda + akk] : 0.f;
      const int bi = p.tb ? e / kDepth : e % kTile, bk = p.tb ? e % kDepth : e / kTile;
      const int64_t bn = n0 + bi, bkk = k0 + bk;
      bs[bk][bi] = bn < p.n && bkk < p.k ? p.b[p.tb ? bn * p.ldb + bkk : bkk * p.ldb + bn] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kDepth; ++kk) {
      const float4 a4 = *reinterpret_cast<const float4*>(&as[kk][ty * 4]);
      const float4 b4 = *reinterpret_cast<const float4*>(&bs[kk][tx * 4]);
      const float a[4] = {a4.x, a4.y, a4.z, a4.w}, b[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty * 4 + i;
    if (m >= p.m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx * 4 + j;
      if (n >= p.n) continue;
      float* c = p.c + m * p.ldc + n;
      *c = p.accumulate ? *c + acc[i][j] : acc[i][j];
    }
  }
}

// The norm + RoPE of the head rows of one tensor [T, heads d] (row r = t heads + h at r d): the norm weight w [d]
// (read under `norm`), cos and sin [T, rope_dim].
struct NormRope {
  const uint16_t *w = nullptr, *cos = nullptr, *sin = nullptr;
  int64_t rows = 0;
  int heads = 0, d = 0, rope_dim = 0;
  bool norm = false;
  float offset = 0.f;
  DType dtype = DType::bf16;
};

__device__ float table(const uint16_t* p, const NormRope& nr, int64_t t, int i) {
  return widen(p[t * nr.rope_dim + i], nr.dtype);
}

// y = RoPE(norm(x)) and rstd per row (1 without the norm), a warp per row through shared memory (RoPE pairs
// element i with i + rope_dim / 2, another lane's).
__global__ void __launch_bounds__(kThreads) norm_rope_fwd_kernel(const __grid_constant__ NormRope p, const float* x,
                                                                 float* y, float* rstd) {
  __shared__ float rows[kWarps][kMaxHead];
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, hh = p.rope_dim / 2;
  float* v = rows[w];
  for (int64_t r = int64_t{blockIdx.x} * kWarps + w; r < p.rows; r += int64_t{gridDim.x} * kWarps) {
    const int64_t t = r / p.heads;
    const float* xr = x + r * p.d;
    float scale = 1.f;
    if (p.norm) {
      double ss = 0;
      for (int c = lane; c < p.d; c += 32) ss += static_cast<double>(xr[c]) * xr[c];
      scale = static_cast<float>(1.0 / sqrt(warp_sum(ss) / p.d + static_cast<double>(kGatedNormEps)));
    }
    for (int c = lane; c < p.d; c += 32) v[c] = p.norm ? xr[c] * (scale * (p.offset + widen(p.w[c], p.dtype))) : xr[c];
    __syncwarp();
    for (int c = lane; c < p.d; c += 32) {
      float out = v[c];
      if (c < hh) out = v[c] * table(p.cos, p, t, c) - v[c + hh] * table(p.sin, p, t, c);
      else if (c < 2 * hh) out = v[c] * table(p.cos, p, t, c) + v[c - hh] * table(p.sin, p, t, c);
      y[r * p.d + c] = out;
    }
    if (lane == 0) rstd[r] = scale;
    __syncwarp();  // the row's reads are done before the next row's writes
  }
}

// In place over dg (the SDPA's dQ or dK): RoPE's transpose, then under the norm dx = rstd (dn - n mean(dn n)) with
// n = x rstd and dn = dg (offset + w). The block's sum of dg n per element (the weight's gradient) into
// partial[blockIdx.x d ..] (double), under the norm.
__global__ void __launch_bounds__(kThreads) norm_rope_bwd_kernel(const __grid_constant__ NormRope p, float* dg,
                                                                 const float* x, const float* rstd, double* partial) {
  constexpr int kPerLane = kMaxHead / 32;
  __shared__ float rows[kWarps][kMaxHead];
  __shared__ double sums[kWarps][kMaxHead];
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, hh = p.rope_dim / 2;
  float* v = rows[w];
  double mine[kPerLane] = {};
  for (int64_t r = int64_t{blockIdx.x} * kWarps + w; r < p.rows; r += int64_t{gridDim.x} * kWarps) {
    const int64_t t = r / p.heads;
    float* gr = dg + r * p.d;
    const float* xr = x + r * p.d;
    for (int c = lane; c < p.d; c += 32) v[c] = gr[c];
    __syncwarp();
    float u[kPerLane] = {};
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int c = lane + 32 * j;
      if (c >= p.d) break;
      u[j] = v[c];
      if (c < hh) u[j] = v[c] * table(p.cos, p, t, c) + v[c + hh] * table(p.sin, p, t, c + hh);
      else if (c < 2 * hh) u[j] = v[c] * table(p.cos, p, t, c) - v[c - hh] * table(p.sin, p, t, c - hh);
    }
    __syncwarp();  // the row's reads are done before the next row's writes
    if (!p.norm) {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + 32 * j < p.d) gr[lane + 32 * j] = u[j];
      continue;
    }
    const float s = rstd[r];
    double dot = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int c = lane + 32 * j;
      if (c >= p.d) break;
      const float n = xr[c] * s;
      mine[j] += static_cast<double>(u[j]) * n;
      u[j] *= p.offset + widen(p.w[c], p.dtype);
      dot += static_cast<double>(u[j]) * n;
    }
    const float mean = static_cast<float>(warp_sum(dot) / p.d);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int c = lane + 32 * j;
      if (c < p.d) gr[c] = s * (u[j] - xr[c] * s * mean);
    }
  }
  if (!p.norm) return;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (lane + 32 * j < p.d) sums[w][lane + 32 * j] = mine[j];
  __syncthreads();
  for (int c = threadIdx.x; c < p.d; c += kThreads) {
    double s = 0;
    for (int i = 0; i < kWarps; ++i) s += sums[i][c];
    partial[int64_t{blockIdx.x} * p.d + c] = s;
  }
}

// dw[c] = the sum over `blocks` partial rows [blocks, d], in double.
__global__ void sum_partials_kernel(const double* partial, int blocks, int d, float* dw) {
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    double s = 0;
    for (int b = 0; b < blocks; ++b) s += partial[int64_t{b} * d + c];
    dw[c] = static_cast<float>(s);
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("GPU gated backward reference ") + what + ": " + cudaGetErrorString(e));
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t{1} << 20));
}

// C = op(A) op(B) over packed row-major operands: A [m, k] ([k, m] when ta), B [k, n] ([n, k] when tb), C [m, n].
void gemm(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t n, int64_t k, bool accumulate,
          cudaStream_t st, const char* what) {
  Gemm p;
  p.a = a;
  p.b = b;
  p.c = c;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = ta ? m : k;
  p.ldb = tb ? k : n;
  p.ldc = n;
  p.ta = ta;
  p.tb = tb;
  p.accumulate = accumulate;
  const dim3 grid(static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
  sgemm_kernel<<<grid, kThreads, 0, st>>>(p);
  check(cudaGetLastError(), what);
}

// The workspace's regions, in order, at 256-byte aligned offsets.
struct Layout {
  std::size_t h = 0, dy = 0, wq = 0, wgate = 0, wk = 0, wv = 0, w_o = 0;  // fp32 copies of the inputs
  std::size_t d_y = 0, y = 0, dq = 0, dk = 0, dv = 0;                    // fp32: dY (then dGATE), Y, the SDPA's
  std::size_t q16 = 0, k16 = 0, v16 = 0, do16 = 0;                       // the SDPA's 16-bit inputs
  std::size_t dsum = 0, cu = 0, partial = 0, total = 0;
};

Layout layout(const GatedGeometry& g) {
  const std::size_t t = static_cast<std::size_t>(g.tokens()), dm = g.d_model(), aw = g.attn_width();
  const std::size_t kw = static_cast<std::size_t>(g.h_kv()) * g.d_head();
  Layout l;
  std::size_t at = 0;
  auto take = [&at](std::size_t bytes) {
    const std::size_t off = at;
    at += (bytes + 255) / 256 * 256;
    return off;
  };
  l.h = take(4 * t * dm);
  l.dy = take(4 * t * dm);
  l.wq = take(4 * aw * dm);
  l.wgate = take(4 * aw * dm);
  l.wk = take(4 * kw * dm);
  l.wv = take(4 * kw * dm);
  l.w_o = take(4 * dm * aw);
  l.d_y = take(4 * t * aw);
  l.y = take(4 * t * aw);
  l.dq = take(4 * t * aw);
  l.dk = take(4 * t * kw);
  l.dv = take(4 * t * kw);
  l.q16 = take(2 * t * aw);
  l.k16 = take(2 * t * kw);
  l.v16 = take(2 * t * kw);
  l.do16 = take(2 * t * aw);
  l.dsum = take(4 * t * g.h_q());
  l.cu = take(4 * (static_cast<std::size_t>(g.batch()) + 1));
  l.partial = take(8 * static_cast<std::size_t>(kNormBlocks) * g.d_head());
  l.total = at;
  return l;
}

unsigned warp_grid(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>((rows + kWarps - 1) / kWarps, 1, kNormBlocks));
}

// Declines past validate_gated_bwd's: a needed pointer null, a GEMM grid too wide.
void check_io(const GatedGeometry& g, const GatedOptions& o, const GatedBwdGpuIo& io) {
  const bool in_null = !io.h || !io.wq || !io.wgate || !io.wk || !io.wv || !io.w_o || !io.dy ||
                       (o.qk_norm && (!io.q_norm_weight || !io.k_norm_weight)) ||
                       (g.rope_dim() > 0 && (!io.cos || !io.sin));
  const bool out_null = !io.q_pre || !io.k_pre || !io.q || !io.k || !io.v || !io.gate || !io.o || !io.lse ||
                        !io.rstd_q || !io.rstd_k || !io.dh || !io.dwq || !io.dwgate || !io.dwk || !io.dwv ||
                        !io.dw_o || (o.qk_norm && (!io.dw_q_norm || !io.dw_k_norm)) || !io.workspace;
  if (in_null || out_null)
    throw std::invalid_argument("reference::gated_block_backward_gpu: a needed pointer is null");
  if (std::max<int64_t>(g.d_model(), g.attn_width()) > int64_t{65535} * kTile)  // a GEMM grid's y: C's column tiles
    throw std::invalid_argument("reference::gated_block_backward_gpu: d_model or h_q d above 65535 * 64");
}

// The norm + RoPE of Q's head rows (q = true) or K's.
NormRope norm_rope_of(const GatedGeometry& g, const GatedOptions& o, const GatedBwdGpuIo& io, bool q) {
  NormRope nr;
  nr.w = q ? io.q_norm_weight : io.k_norm_weight;
  nr.cos = io.cos;
  nr.sin = io.sin;
  nr.heads = q ? g.h_q() : g.h_kv();
  nr.rows = g.tokens() * nr.heads;
  nr.d = g.d_head();
  nr.rope_dim = g.rope_dim();
  nr.norm = o.qk_norm;
  nr.offset = o.norm_weight_offset;
  nr.dtype = g.dtype();
  return nr;
}

// One call's inputs and outputs, stream, widths and the workspace's regions (the fp32 ones as pointers).
struct Pass {
  Pass(const GatedGeometry& geom, const GatedOptions& opt, const GatedBwdGpuIo& io_, void* stream)
      : g(geom), o(opt), io(io_), st(static_cast<cudaStream_t>(stream)), dt(geom.dtype()), l(layout(geom)),
        T(geom.tokens()), dm(geom.d_model()), aw(geom.attn_width()),
        kw(static_cast<int64_t>(geom.h_kv()) * geom.d_head()), nq(norm_rope_of(geom, opt, io_, true)),
        nk(norm_rope_of(geom, opt, io_, false)) {}

  char* ws(std::size_t off) const { return static_cast<char*>(io.workspace) + off; }
  float* f32(std::size_t off) const { return reinterpret_cast<float*>(ws(off)); }
  uint16_t* u16(std::size_t off) const { return reinterpret_cast<uint16_t*>(ws(off)); }

  const GatedGeometry& g;
  const GatedOptions& o;
  const GatedBwdGpuIo& io;
  cudaStream_t st;
  DType dt;
  Layout l;
  int64_t T, dm, aw, kw;
  NormRope nq, nk;
  float *h = f32(l.h), *dy = f32(l.dy), *wq = f32(l.wq), *wg = f32(l.wgate), *wk = f32(l.wk), *wv = f32(l.wv);
  float *wo = f32(l.w_o), *d_y = f32(l.d_y), *y = f32(l.y), *dq = f32(l.dq), *dk = f32(l.dk), *dv = f32(l.dv);
};

// The 16-bit inputs to their fp32 copies, once.
void widen_inputs(const Pass& p) {
  const GatedBwdGpuIo& io = p.io;
  for (auto [src, dst, n] : {std::tuple{io.h, p.h, p.T * p.dm}, {io.dy, p.dy, p.T * p.dm}, {io.wq, p.wq, p.aw * p.dm},
                             {io.wgate, p.wg, p.aw * p.dm}, {io.wk, p.wk, p.kw * p.dm}, {io.wv, p.wv, p.kw * p.dm},
                             {io.w_o, p.wo, p.dm * p.aw}}) {
    widen_kernel<<<grid_for(n), kThreads, 0, p.st>>>(src, dst, n, p.dt);
    check(cudaGetLastError(), "widen");
  }
}

// Forward: the projections, norm + RoPE (the save set), the SDPA's rounded inputs.
void forward_save_set(const Pass& p) {
  const GatedBwdGpuIo& io = p.io;
  const int64_t T = p.T, aw = p.aw, kw = p.kw, dm = p.dm;
  gemm(p.h, false, p.wq, true, io.q_pre, T, aw, dm, false, p.st, "Q projection");
  gemm(p.h, false, p.wg, true, io.gate, T, aw, dm, false, p.st, "GATE projection");
  gemm(p.h, false, p.wk, true, io.k_pre, T, kw, dm, false, p.st, "K projection");
  gemm(p.h, false, p.wv, true, io.v, T, kw, dm, false, p.st, "V projection");
  norm_rope_fwd_kernel<<<warp_grid(p.nq.rows), kThreads, 0, p.st>>>(p.nq, io.q_pre, io.q, io.rstd_q);
  check(cudaGetLastError(), "Q norm + RoPE");
  norm_rope_fwd_kernel<<<warp_grid(p.nk.rows), kThreads, 0, p.st>>>(p.nk, io.k_pre, io.k, io.rstd_k);
  check(cudaGetLastError(), "K norm + RoPE");
  for (auto [src, dst, n] : {std::tuple{io.q, p.u16(p.l.q16), T * aw}, {io.k, p.u16(p.l.k16), T * kw},
                             {io.v, p.u16(p.l.v16), T * kw}}) {
    narrow_kernel<<<grid_for(n), kThreads, 0, p.st>>>(src, dst, n, p.dt);
    check(cudaGetLastError(), "rounding q, k, v");
  }
}

// dY and the gate's dO; the SDPA's forward and backward.
void sdpa_backward(const Pass& p) {
  gemm(p.dy, false, p.wo, false, p.d_y, p.T, p.aw, p.dm, false, p.st, "dY = dy W_o");
  gate_do_kernel<<<grid_for(p.T * p.aw), kThreads, 0, p.st>>>(p.io.gate, p.d_y, p.u16(p.l.do16), p.T * p.aw, p.dt);
  check(cudaGetLastError(), "gate dO");
  auto* cu = reinterpret_cast<int32_t*>(p.ws(p.l.cu));
  cu_seqlens_kernel<<<1, kThreads, 0, p.st>>>(cu, p.g.batch(), p.g.seqlen());
  check(cudaGetLastError(), "cu_seqlens");
  AttentionBwdParams a = make_attention_bwd_params(gated_bwd_sdpa_problem(p.g, p.o));
  a.q = p.u16(p.l.q16);
  a.k = p.u16(p.l.k16);
  a.v = p.u16(p.l.v16);
  a.d_o = p.u16(p.l.do16);
  a.cu_seqlens_q = a.cu_seqlens_k = cu;
  attention_backward_gpu(a, p.io.o, p.io.lse, p.f32(p.l.dsum), p.dq, p.dk, p.dv, p.st);
}

// Back through RoPE and the norm, in place over d_x (dQ or dK), and the norm weight's gradient. One partial-sums
// region serves Q and K: stream order.
void norm_rope_bwd(const Pass& p, const NormRope& nr, float* d_x, const float* x, const float* rstd, float* dw,
                   const char* what, const char* dw_what) {
  double* partial = reinterpret_cast<double*>(p.ws(p.l.partial));
  const unsigned blocks = warp_grid(nr.rows);
  norm_rope_bwd_kernel<<<blocks, kThreads, 0, p.st>>>(nr, d_x, x, rstd, partial);
  check(cudaGetLastError(), what);
  if (!nr.norm) return;
  sum_partials_kernel<<<1, kThreads, 0, p.st>>>(partial, static_cast<int>(blocks), nr.d, dw);
  check(cudaGetLastError(), dw_what);
}

// The gate's and the output projection's gradients (dGATE over dY); back through RoPE and the norm; to the weights
// and h.
void chain_back(const Pass& p) {
  const GatedBwdGpuIo& io = p.io;
  const int64_t T = p.T, aw = p.aw, kw = p.kw, dm = p.dm;
  gate_post_kernel<<<grid_for(T * aw), kThreads, 0, p.st>>>(io.gate, io.o, p.d_y, p.y, T * aw);
  check(cudaGetLastError(), "gate backward");
  gemm(p.dy, true, p.y, false, io.dw_o, dm, aw, T, false, p.st, "dW_o = dy^T Y");
  norm_rope_bwd(p, p.nq, p.dq, io.q_pre, io.rstd_q, io.dw_q_norm, "Q norm + RoPE backward", "dw_q_norm");
  norm_rope_bwd(p, p.nk, p.dk, io.k_pre, io.rstd_k, io.dw_k_norm, "K norm + RoPE backward", "dw_k_norm");
  const float* dgate = p.d_y;
  gemm(p.dq, true, p.h, false, io.dwq, aw, dm, T, false, p.st, "dWq = dQ^T h");
  gemm(dgate, true, p.h, false, io.dwgate, aw, dm, T, false, p.st, "dWgate = dGATE^T h");
  gemm(p.dk, true, p.h, false, io.dwk, kw, dm, T, false, p.st, "dWk = dK^T h");
  gemm(p.dv, true, p.h, false, io.dwv, kw, dm, T, false, p.st, "dWv = dV^T h");
  gemm(p.dq, false, p.wq, false, io.dh, T, dm, aw, false, p.st, "dh += dQ Wq");
  gemm(dgate, false, p.wg, false, io.dh, T, dm, aw, true, p.st, "dh += dGATE Wgate");
  gemm(p.dk, false, p.wk, false, io.dh, T, dm, kw, true, p.st, "dh += dK Wk");
  gemm(p.dv, false, p.wv, false, io.dh, T, dm, kw, true, p.st, "dh += dV Wv");
}

}  // namespace

std::size_t gated_block_backward_gpu_workspace(const GatedGeometry& g) { return layout(g).total; }

void gated_block_backward_gpu(const GatedGeometry& g, const GatedOptions& o, const GatedBwdGpuIo& io, void* stream) {
  GatedBwdOptions all;
  validate_gated_bwd(g, o, all);
  check_io(g, o, io);
  const Pass p(g, o, io, stream);
  widen_inputs(p);
  forward_save_set(p);
  sdpa_backward(p);
  chain_back(p);
}

}  // namespace attnbench::reference
