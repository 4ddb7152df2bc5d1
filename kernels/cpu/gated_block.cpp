// cpu.gated_block's provider: the gated block's pieces on the host, each stage's output rounded to the storage
// dtype: the projections (fp32-accumulated GEMM), norm + RoPE in place (fp32), the sigmoid gate and the tables;
// the SDPA is cpu.unified on the projection's strides (no repacking). OpenMP. The stages: gated_orchestrator.hpp.
#include "cpu/gated_block.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/mx_quant.hpp"
#include "common/device/mx_rules.hpp"
#include "common/gated_orchestrator.hpp"
#include "cpu/work_limit.hpp"

namespace attnbench {
namespace cpu {

namespace {
constexpr int kMT = 32;  // GEMM tile: rows of A
constexpr int kNT = 64;  // GEMM tile: rows of B (columns of C)

using f32x4 = float __attribute__((vector_size(16)));

inline f32x4 load4(const float* p) {
  f32x4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void to_float(DType dt, const uint16_t* src, float* dst, int64_t n) {
  if (dt == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  } else {
    const float* t = f16_table();
    for (int64_t i = 0; i < n; ++i) dst[i] = t[src[i]];
  }
}

// Rows [r0, r0 + rows) of a [n_rows, K] matrix into dst [tile, K] fp32; rows past n_rows are zeros.
void load_tile(DType dt, const uint16_t* src, int64_t ld, int64_t r0, int tile, int64_t n_rows, int K, float* dst) {
  for (int r = 0; r < tile; ++r) {
    if (r0 + r < n_rows) to_float(dt, src + (r0 + r) * ld, dst + static_cast<int64_t>(r) * K, K);
    else std::fill_n(dst + static_cast<int64_t>(r) * K, K, 0.f);
  }
}

// acc[r][c] = dot(a row r, b row c), 4 x 2 rows, K a multiple of 4: 8 vector accumulators stay in registers.
inline void micro_4x2(const float* a, const float* b, int K, float out[4][2]) {
  f32x4 acc[4][2] = {};
  for (int k = 0; k < K; k += 4) {
    const f32x4 b0 = load4(b + k), b1 = load4(b + K + k);
    for (int r = 0; r < 4; ++r) {
      const f32x4 av = load4(a + static_cast<int64_t>(r) * K + k);
      acc[r][0] += av * b0;
      acc[r][1] += av * b1;
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) out[r][c] = (acc[r][c][0] + acc[r][c][1]) + (acc[r][c][2] + acc[r][c][3]);
}

// The gated O element in the dtype: round(o * sigmoid(g)), the gate pass's and the fused gate + quantisation's.
uint16_t gated_value(DType dt, uint16_t o, uint16_t g) {
  return float_to_half(half_to_float(o, dt) * (1.f / (1.f + std::exp(-half_to_float(g, dt)))), dt);
}
}  // namespace

std::size_t gemm_scratch_floats(int K) { return static_cast<std::size_t>(kMT + kNT) * K; }

namespace {
// C[M, N] = alpha * sum_k A[m, k] B[n, k] over tiles: load_a / load_b (r0, tile, dst) fill a tile's fp32 rows
// (zeros past the matrix), each output rounded to dtype once.
template <class LoadA, class LoadB>
void gemm_tiles(DType dt, int64_t M, int64_t N, int K, LoadA load_a, LoadB load_b, uint16_t* C, int64_t ldc,
                float* scratch, int threads, float alpha = 1.f) {
  const int64_t mt = (M + kMT - 1) / kMT, nt = (N + kNT - 1) / kNT;
#pragma omp parallel num_threads(threads)
  {
    float* a = scratch + omp_get_thread_num() * gemm_scratch_floats(K);
    float* b = a + static_cast<int64_t>(kMT) * K;
    int64_t a_tile = -1;  // static schedule: a thread's tasks walk one A tile's columns before the next
#pragma omp for schedule(static)
    for (int64_t task = 0; task < mt * nt; ++task) {
      const int64_t i = task / nt, j = task % nt;
      if (i != a_tile) {
        load_a(i * kMT, kMT, a);
        a_tile = i;
      }
      load_b(j * kNT, kNT, b);
      for (int r = 0; r < kMT; r += 4) {
        const int64_t row = i * kMT + r;
        if (row >= M) break;
        for (int c = 0; c < kNT; c += 2) {
          const int64_t col = j * kNT + c;
          if (col >= N) break;
          float o[4][2];
          micro_4x2(a + static_cast<int64_t>(r) * K, b + static_cast<int64_t>(c) * K, K, o);
          for (int rr = 0; rr < 4 && row + rr < M; ++rr)
            for (int cc = 0; cc < 2 && col + cc < N; ++cc)
              C[(row + rr) * ldc + col + cc] = float_to_half(alpha * o[rr][cc], dt);
        }
      }
    }
  }
}

// Rows [r0, r0 + tile) of an MX tensor [n_rows, K] as fp32 values times descale; rows past n_rows are zeros.
void load_mx_tile(mx::MxFormat f, const uint8_t* codes, const uint8_t* scales, float descale, int64_t r0, int tile,
                  int64_t n_rows, int K, float* dst) {
  const int64_t code_row = mx::mx_code_bytes(f, 1, K), scale_row = mx::mx_scale_bytes(f, 1, K);
  for (int r = 0; r < tile; ++r) {
    float* d = dst + static_cast<int64_t>(r) * K;
    if (r0 + r < n_rows) mx::dequantize_row(f, codes + (r0 + r) * code_row, scales + (r0 + r) * scale_row, K, descale, d);
    else std::fill_n(d, K, 0.f);
  }
}
}  // namespace

void gemm_abt(DType dt, int64_t M, int64_t N, int K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
              uint16_t* C, int64_t ldc, float* scratch, int threads) {
  gemm_tiles(
      dt, M, N, K, [&](int64_t r0, int tile, float* d) { load_tile(dt, A, lda, r0, tile, M, K, d); },
      [&](int64_t r0, int tile, float* d) { load_tile(dt, B, ldb, r0, tile, N, K, d); }, C, ldc, scratch, threads);
}

// Rows [r0, r0 + tile) of op(X) as fp32 [tile, kp] (zeros past `rows` and past k): X [rows, k] at ld, or with
// trans its transpose, X stored [k, rows] (read a stored row at a time: contiguous runs of `tile`).
void load_op_tile(DType dt, const uint16_t* x, int64_t ld, bool trans, int64_t r0, int tile, int64_t rows, int64_t k,
                  int kp, float* dst) {
  std::fill_n(dst, static_cast<int64_t>(tile) * kp, 0.f);
  const int live = static_cast<int>(std::clamp<int64_t>(rows - r0, 0, tile));
  if (!trans) {
    for (int r = 0; r < live; ++r) to_float(dt, x + (r0 + r) * ld, dst + static_cast<int64_t>(r) * kp, k);
    return;
  }
  float run[kNT];
  for (int64_t kk = 0; kk < k; ++kk) {
    to_float(dt, x + kk * ld + r0, run, live);
    for (int r = 0; r < live; ++r) dst[static_cast<int64_t>(r) * kp + kk] = run[r];
  }
}

void gemm_op(const GatedGemmShape& s, const uint16_t* A, const uint16_t* B, uint16_t* C, float* scratch,
             int threads) {
  const int kp = static_cast<int>((s.k + 3) / 4 * 4);
  // Rows of op(B)^T: B's own rows with trans_b, else its columns.
  gemm_tiles(
      s.dt, s.m, s.n, kp,
      [&](int64_t r0, int tile, float* d) { load_op_tile(s.dt, A, s.lda, s.trans_a, r0, tile, s.m, s.k, kp, d); },
      [&](int64_t r0, int tile, float* d) { load_op_tile(s.dt, B, s.ldb, !s.trans_b, r0, tile, s.n, s.k, kp, d); },
      C, s.ldc, scratch, threads);
}

void gemm_fp8_abt(DType dt, int64_t M, int64_t N, int K, float alpha, const float* value, const uint8_t* A,
                  const uint8_t* B, uint16_t* C, float* scratch, int threads) {
  auto load = [&](const uint8_t* x, int64_t rows) {
    return [&, x, rows](int64_t r0, int tile, float* d) {
      for (int r = 0; r < tile; ++r)
        for (int k = 0; k < K; ++k)
          d[static_cast<int64_t>(r) * K + k] = r0 + r < rows ? value[x[(r0 + r) * K + k]] : 0.f;
    };
  };
  gemm_tiles(dt, M, N, K, load(A, M), load(B, N), C, N, scratch, threads, alpha);
}

void gemm_mx_abt(const GatedMxGemmDesc& g, const uint16_t* A, const uint8_t* b_codes, const uint8_t* b_scales,
                 uint16_t* C, float* scratch, int threads) {
  const int K = static_cast<int>(g.k);
  auto load_a = [&](int64_t r0, int tile, float* d) {
    load_tile(g.dt, A, K, r0, tile, g.m, K, d);
    for (int r = 0; r < tile && r0 + r < g.m; ++r) mx::fake_quantize_row(g.a_format, d + static_cast<int64_t>(r) * K, K, g.a_scale);
  };
  auto load_b = [&](int64_t r0, int tile, float* d) {
    load_mx_tile(g.b_format, b_codes, b_scales, g.b_descale, r0, tile, g.n, K, d);
  };
  gemm_tiles(g.dt, g.m, g.n, K, load_a, load_b, C, g.n, scratch, threads);
}

}  // namespace cpu

namespace {

// The projection GEMM with its per-thread tiles, allocated here so that run() allocates nothing: A and B in the
// dtype, or (fp8) e4m3 codes read through a table built here, alpha (the FP8 descales) on the fp32 sums.
class CpuGemm final : public GatedGemm {
 public:
  CpuGemm(DType dt, int64_t m, int64_t n, int64_t k, bool fp8 = false, float alpha = 1.f)
      : dt_(dt), m_(m), n_(n), k_(static_cast<int>(k)), fp8_(fp8), alpha_(alpha),
        threads_(std::max(1, omp_get_max_threads())), scratch_(cpu::gemm_scratch_floats(k_) * threads_, 0.f) {
    for (int c = 0; c < 256; ++c) e4m3_[c] = device::e4m3_value(static_cast<unsigned char>(c));
  }

  std::size_t workspace_bytes() const override { return 0; }
  std::string summary() const override {
    return std::string(fp8_ ? "e4m3 " : "") + "fp32-acc threads=" + std::to_string(threads_);
  }

  void run(const void* a, const void* b, void* c, void* /*workspace*/, void* /*stream*/) const override {
    if (fp8_)
      cpu::gemm_fp8_abt(dt_, m_, n_, k_, alpha_, e4m3_, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),
                        static_cast<uint16_t*>(c), scratch_.data(), threads_);
    else
      cpu::gemm_abt(dt_, m_, n_, k_, static_cast<const uint16_t*>(a), k_, static_cast<const uint16_t*>(b), k_,
                    static_cast<uint16_t*>(c), n_, scratch_.data(), threads_);
  }

 private:
  DType dt_;
  int64_t m_, n_;
  int k_;
  bool fp8_;
  float alpha_;
  int threads_;
  float e4m3_[256];                     // fp8: each code's value
  mutable std::vector<float> scratch_;  // one call at a time per block
};

// The MX modes' projection (GatedMxGemmDesc): A's blocks quantised and dequantised as tiles load, B's codes
// dequantised as tiles load, so nothing is allocated per call.
class CpuMxGemm final : public GatedMxGemm {
 public:
  explicit CpuMxGemm(const GatedMxGemmDesc& d)
      : d_(d), threads_(std::max(1, omp_get_max_threads())),
        scratch_(cpu::gemm_scratch_floats(static_cast<int>(d.k)) * threads_, 0.f) {}

  std::size_t workspace_bytes() const override { return 0; }
  std::string summary() const override {
    return std::string("mx ") + mx::mx_format_name(d_.a_format) + "x" + mx::mx_format_name(d_.b_format) +
           " fp32-acc threads=" + std::to_string(threads_);
  }

  void run(const void* a, const uint8_t* b_codes, const uint8_t* b_scales, void* c, void* /*workspace*/,
           void* /*stream*/) const override {
    cpu::gemm_mx_abt(d_, static_cast<const uint16_t*>(a), b_codes, b_scales, static_cast<uint16_t*>(c),
                     scratch_.data(), threads_);
  }

 private:
  GatedMxGemmDesc d_;
  int threads_;
  mutable std::vector<float> scratch_;
};

class CpuGatedProvider final : public GatedProvider {
 public:
  std::string name() const override { return "cpu.gated_block"; }
  Backend backend() const override { return Backend::cpu; }
  std::unique_ptr<AttentionKernel> make_sdpa(const AttentionParams& /*layout*/) const override {
    return make_cpu_unified();
  }

  std::unique_ptr<GatedGemm> make_gemm(DType dt, int64_t m, int64_t n, int64_t k) const override {
    return std::make_unique<CpuGemm>(dt, m, n, k);
  }

  std::string mx_conflict() const override { return ""; }
  std::unique_ptr<GatedMxGemm> make_mx_gemm(const GatedMxGemmDesc& d) const override {
    return std::make_unique<CpuMxGemm>(d);
  }

  std::string fp8_conflict() const override { return ""; }
  std::unique_ptr<GatedGemm> make_fp8_gemm(DType dt, int64_t m, int64_t n, int64_t k, float alpha) const override {
    return std::make_unique<CpuGemm>(dt, m, n, k, true, alpha);
  }

  void quantize(DType dt, const GatedQuantizeParams& q, void* /*stream*/) const override {
    const auto* src = static_cast<const uint16_t*>(q.src);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < q.rows; ++t)
      for (int part = 0; part < q.n_parts; ++part) {
        const GatedQuantizePart& pt = q.parts[part];
        for (int h = 0; h < pt.heads; ++h) {
          const uint16_t* x = src + t * q.src_stride + pt.src0 + h * pt.src_head_stride;
          const auto* g = static_cast<const uint16_t*>(q.gate);
          if (g) g += t * q.gate_stride_token + h * q.gate_stride_head;
          uint8_t* c = q.dst + t * q.dst_stride + pt.dst0 + static_cast<int64_t>(h) * q.d_head;
          for (int i = 0; i < q.d_head; ++i) {
            const float v = half_to_float(g ? cpu::gated_value(dt, x[i], g[i]) : x[i], dt);
            c[i] = device::e4m3_code(device::mul_rn(v, pt.scale));
          }
        }
      }
  }

  void fill_tables(const GatedTablesParams& t, void* /*stream*/) const override {
    const int S = t.seqlen, bs = t.block_size, nb = t.blocks_per_seq;
    for (int b = 0; b <= t.batch; ++b) t.cu_seqlens_q[b] = b * S;
    for (int b = 0; b < t.batch; ++b) {
      t.seqused_k[b] = S;
      for (int j = 0; j < nb; ++j) t.block_table[b * nb + j] = b * S / bs + j;  // bs divides S when batch > 1
    }
  }

  void zero(void* dst, std::size_t bytes, void* /*stream*/) const override { std::memset(dst, 0, bytes); }

  void norm_rope(DType dt, int d, const GatedNormRopeParams& p, void* /*stream*/) const override {
    const int rd = p.rope_dim, heads = p.row_heads();
    const int64_t rows = p.tokens * heads;
    float wq[256] = {}, wk[256] = {};  // d_head <= 256 (the geometry's rule); nothing allocated per call
    if (p.norm) {
      cpu::to_float(dt, static_cast<const uint16_t*>(p.q_weight), wq, d);
      cpu::to_float(dt, static_cast<const uint16_t*>(p.k_weight), wk, d);
    }
    auto* proj = static_cast<uint16_t*>(p.proj);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = r / heads;
      const int hh = static_cast<int>(r % heads);
      const NormRopeRow row = norm_rope_row_of(p, d, hh);
      uint16_t* x = proj + t * p.row_stride + row.src;
      const NormRopeSaveRow sv = p.save.q ? save_row_of(p, d, hh, t) : NormRopeSaveRow{x, nullptr, nullptr};
      if (sv.pre) std::memcpy(sv.pre, x, sizeof(uint16_t) * d);
      float v[256], c[256], s[256];
      cpu::to_float(dt, x, v, d);
      if (row.kind != NormRopeRow::v) {
        if (rd > 0) {
          cpu::to_float(dt, static_cast<const uint16_t*>(p.cos) + t * rd, c, rd);
          cpu::to_float(dt, static_cast<const uint16_t*>(p.sin) + t * rd, s, rd);
        }
        const float rstd =
            cpu::norm_rope_row(v, d, p.norm, row.kind == NormRopeRow::q ? wq : wk, p.weight_offset, p.eps, rd, c, s);
        if (sv.rstd) *sv.rstd = rstd;
      }
      if (!p.codes) {  // back in place, or to the save set
        auto* out = static_cast<uint16_t*>(sv.out);
        for (int i = 0; i < d; ++i) out[i] = float_to_half(v[i], dt);
        continue;
      }
      uint8_t* code = p.codes + t * p.codes_stride + row.dst;  // rounded to the dtype first, as the unfused passes do
      for (int i = 0; i < d; ++i)
        code[i] = device::e4m3_code(device::mul_rn(half_to_float(float_to_half(v[i], dt), dt), row.scale));
    }
  }

  void sigmoid_gate(DType dt, const GatedSigmoidParams& p, void* /*stream*/) const override {
    const int d = p.d_head;
    const auto* gate = static_cast<const uint16_t*>(p.gate);
    const auto* o = static_cast<const uint16_t*>(p.o);
    auto* out = static_cast<uint16_t*>(p.out);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < p.tokens; ++t)
      for (int h = 0; h < p.heads; ++h) {
        const uint16_t* gp = gate + t * p.gate_stride_token + h * p.gate_stride_head;
        const int64_t at = t * p.o_stride_token + static_cast<int64_t>(h) * d;
        for (int i = 0; i < d; ++i) out[at + i] = cpu::gated_value(dt, o[at + i], gp[i]);
        if (p.gate_save)
          std::memcpy(static_cast<uint16_t*>(p.gate_save) + (t * p.heads + h) * d, gp, sizeof(uint16_t) * d);
      }
  }

  void lse_reorder(const GatedLseReorderParams& p, void* /*stream*/) const override {
    const int S = p.seqlen, H = p.heads;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < static_cast<int64_t>(p.batch) * S; ++t)
      for (int h = 0; h < H; ++h) p.dst[(t / S * H + h) * S + t % S] = p.src[t * H + h];
  }

  std::string save_conflict() const override { return ""; }

  void check_support(const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs) const override {
    const std::string over = cpu::over_work_limit(gated_block_work(g, o).flops, knobs);
    if (!over.empty()) throw GatedDecline("work", "the block " + over);
  }

  // The lengths are in host memory here: out-of-range ones are named instead of read past the keys.
  std::string params_conflict(const GatedGeometry& g, const GatedOptions&, const GatedBlockParams& p) const override {
    return gated_seq_lens_conflict(g, p.seq_lens);
  }
};

}  // namespace

std::unique_ptr<GatedBlockKernel> make_cpu_gated_block() {
  return make_gated_block_kernel(std::make_shared<const CpuGatedProvider>());
}

}  // namespace attnbench
