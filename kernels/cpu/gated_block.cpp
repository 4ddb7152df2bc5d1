// cpu.gated_block: the gated block on the host, stage by stage like the CUDA pipeline, each stage's output
// rounded to the storage dtype: projection (fp32-accumulated GEMM) -> norm + RoPE in place (fp32) -> SDPA through
// cpu.unified on the projection's strides (no repacking) -> O * sigmoid(GATE) -> output projection. OpenMP.
#include "cpu/gated_block.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cpu/work_limit.hpp"
#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"

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

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
}  // namespace

std::size_t gemm_scratch_floats(int K) { return static_cast<std::size_t>(kMT + kNT) * K; }

void gemm_abt(DType dt, int64_t M, int64_t N, int K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
              uint16_t* C, int64_t ldc, float* scratch, int threads) {
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
        load_tile(dt, A, lda, i * kMT, kMT, M, K, a);
        a_tile = i;
      }
      load_tile(dt, B, ldb, j * kNT, kNT, N, K, b);
      for (int r = 0; r < kMT; r += 4) {
        const int64_t row = i * kMT + r;
        if (row >= M) break;
        for (int c = 0; c < kNT; c += 2) {
          const int64_t col = j * kNT + c;
          if (col >= N) break;
          float o[4][2];
          micro_4x2(a + static_cast<int64_t>(r) * K, b + static_cast<int64_t>(c) * K, K, o);
          for (int rr = 0; rr < 4 && row + rr < M; ++rr)
            for (int cc = 0; cc < 2 && col + cc < N; ++cc) C[(row + rr) * ldc + col + cc] = float_to_half(o[rr][cc], dt);
        }
      }
    }
  }
}

}  // namespace cpu

namespace {

class CpuGatedBlock final : public GatedBlock {
 public:
  CpuGatedBlock(const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs)
      : g_(g), o_(o), cols_(gated_columns(g, o.q_gate_layout)), sdpa_(make_cpu_unified()) {
    const int bs = gated_block_size(g);
    prob_ = gated_sdpa_problem(g, o, bs);
    plan_ = sdpa_->plan(prob_, knobs);
    layout_ = gated_workspace_layout(g, bs, plan_->workspace_bytes, 0);
    threads_ = std::max(1, omp_get_max_threads());
    scratch_.assign(cpu::gemm_scratch_floats(std::max<int>(g.d_model(), static_cast<int>(g.attn_width()))) * threads_,
                    0.f);
    stages_ = gated_stages(g, o);  // fuse_gate / fuse_norm_rope: cpu.unified's epilogue / Q prologue
  }

  const GatedGeometry& geometry() const override { return g_; }
  const GatedOptions& options() const override { return o_; }
  std::size_t workspace_size() const override { return layout_.total; }

  void prepare_workspace(void* workspace, void* /*stream*/) override {
    if (!workspace) throw std::invalid_argument("cpu.gated_block: prepare_workspace: workspace is null");
    auto* ws = static_cast<unsigned char*>(workspace);
    auto* cu = reinterpret_cast<int32_t*>(ws + layout_.cu_seqlens_q);
    auto* su = reinterpret_cast<int32_t*>(ws + layout_.seqused_k);
    auto* bt = reinterpret_cast<int32_t*>(ws + layout_.block_table);
    const int S = g_.seqlen(), bs = layout_.block_size, nb = layout_.blocks_per_seq;
    for (int b = 0; b <= g_.batch(); ++b) cu[b] = b * S;
    for (int b = 0; b < g_.batch(); ++b) {
      su[b] = S;
      for (int j = 0; j < nb; ++j) bt[b * nb + j] = b * S / bs + j;  // bs divides S when batch > 1
    }
    prepared_ = workspace;
  }

  void execute(const GatedBlockParams& p, void* stream) const override {
    for (int s = 0; s < static_cast<int>(stages_.size()); ++s) execute_stage(s, p, stream);
  }

  std::vector<std::string> stage_names() const override {
    std::vector<std::string> out;
    for (GatedStage s : stages_) out.push_back(gated_stage_name(s, g_, o_));
    return out;
  }

  void execute_stage(int stage, const GatedBlockParams& p, void* /*stream*/) const override {
    if (stage < 0 || stage >= static_cast<int>(stages_.size()))
      throw std::invalid_argument("cpu.gated_block: no stage " + std::to_string(stage));
    check(p);
    switch (stages_[stage]) {
      case GatedStage::proj: return project(p);
      case GatedStage::norm_rope: return norm_rope(p);
      case GatedStage::sdpa: return sdpa(p);
      case GatedStage::gate: return gate(p);
      case GatedStage::out_proj: return out_project(p);
    }
  }

  std::string summary() const override {
    return std::string("qkvg ") + q_gate_layout_name(o_.q_gate_layout) + ", sdpa cpu.unified " + plan_->summary +
            " block_size=" + std::to_string(layout_.block_size) + ", norm+rope " +
           (gated_fuses_norm_rope(g_, o_) ? "K pass, Q in the SDPA" : "separate") + ", gate " + (o_.fuse_gate ? "fused" : "separate") +
           ", threads=" + std::to_string(threads_);
  }

 private:
  void check(const GatedBlockParams& p) const {
    const GatedDims& d = g_.dims();
    if (p.batch != d.batch || p.seqlen != d.seqlen || p.d_model != d.d_model || p.h_q != d.h_q || p.h_kv != d.h_kv ||
        p.d_head != d.d_head || p.rope_dim != d.rope_dim || p.dtype != d.dtype)
      throw std::invalid_argument("cpu.gated_block: params dims do not match the block's geometry");
    if (!p.h || !p.w_qkvg || !p.w_o || !p.out || !p.workspace ||
        (o_.qk_norm && (!p.q_norm_weight || !p.k_norm_weight)) || (g_.rope_dim() > 0 && (!p.cos || !p.sin)))
      throw std::invalid_argument("cpu.gated_block: a params pointer is null");
    if (p.workspace != prepared_)
      throw std::invalid_argument("cpu.gated_block: workspace not prepared (call prepare_workspace once first)");
  }

  uint16_t* ws16(const GatedBlockParams& p, std::size_t off) const {
    return reinterpret_cast<uint16_t*>(static_cast<unsigned char*>(p.workspace) + off);
  }

  void project(const GatedBlockParams& p) const {
    cpu::gemm_abt(g_.dtype(), g_.tokens(), g_.n_qkvg(), g_.d_model(), static_cast<const uint16_t*>(p.h), g_.d_model(),
                  static_cast<const uint16_t*>(p.w_qkvg), g_.d_model(), ws16(p, layout_.proj), g_.n_qkvg(),
                  scratch_.data(), threads_);
  }

  void norm_rope(const GatedBlockParams& p) const {
    const DType dt = g_.dtype();
    // fuse_norm_rope: the K heads only (cpu.unified normalises and rotates Q as it reads it)
    const int hq = gated_fuses_norm_rope(g_, o_) ? 0 : g_.h_q();
    const int d = g_.d_head(), rd = g_.rope_dim(), heads = hq + g_.h_kv();
    const int64_t N = g_.n_qkvg(), rows = g_.tokens() * heads;
    float wq[256] = {}, wk[256] = {};  // d_head <= 256 (the geometry's rule); nothing allocated per call
    if (o_.qk_norm) {
      cpu::to_float(dt, static_cast<const uint16_t*>(p.q_norm_weight), wq, d);
      cpu::to_float(dt, static_cast<const uint16_t*>(p.k_norm_weight), wk, d);
    }
    uint16_t* proj = ws16(p, layout_.proj);
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = r / heads;
      const int hh = static_cast<int>(r % heads);
      const bool is_q = hh < hq;
      uint16_t* x = proj + t * N + (is_q ? cols_.q0 + hh * cols_.q_head_stride : cols_.k0 + (hh - hq) * d);
      float v[256], c[256], s[256];
      cpu::to_float(dt, x, v, d);
      if (rd > 0) {
        cpu::to_float(dt, static_cast<const uint16_t*>(p.cos) + t * rd, c, rd);
        cpu::to_float(dt, static_cast<const uint16_t*>(p.sin) + t * rd, s, rd);
      }
      cpu::norm_rope_row(v, d, o_.qk_norm, is_q ? wq : wk, o_.norm_weight_offset, kGatedNormEps, rd, c, s);
      for (int i = 0; i < d; ++i) x[i] = float_to_half(v[i], dt);
    }
  }

  void sdpa(const GatedBlockParams& p) const {
    const int64_t N = g_.n_qkvg();
    const uint16_t* proj = ws16(p, layout_.proj);
    auto* ws = static_cast<unsigned char*>(p.workspace);
    AttentionParams a = make_attention_params(prob_);
    a.q = proj + cols_.q0;
    a.q_stride_token = N;
    a.q_stride_head = cols_.q_head_stride;
    a.k_cache = proj + cols_.k0;
    a.v_cache = proj + cols_.v0;
    a.kv_stride_block = N * layout_.block_size;
    a.kv_stride_token = N;
    a.kv_stride_head = g_.d_head();
    a.out = ws16(p, layout_.attn);
    a.cu_seqlens_q = reinterpret_cast<const int32_t*>(ws + layout_.cu_seqlens_q);
    a.seqused_k = reinterpret_cast<const int32_t*>(ws + layout_.seqused_k);
    a.block_table = reinterpret_cast<const int32_t*>(ws + layout_.block_table);
    a.block_table_stride = layout_.blocks_per_seq;
    a.workspace = layout_.sdpa_bytes ? ws + layout_.sdpa : nullptr;
    set_gated_q_prologue(g_, o_, p, a);
    if (o_.fuse_gate) {
      a.gate = proj + cols_.g0;
      a.gate_stride_token = N;
      a.gate_stride_head = cols_.g_head_stride;
    }
    sdpa_->run(*plan_, a, nullptr);
  }

  void gate(const GatedBlockParams& p) const {
    const DType dt = g_.dtype();
    const int d = g_.d_head(), hq = g_.h_q();
    const int64_t N = g_.n_qkvg(), aw = g_.attn_width(), T = g_.tokens();
    const uint16_t* proj = ws16(p, layout_.proj);
    uint16_t* o = ws16(p, layout_.attn);
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t t = 0; t < T; ++t)
      for (int h = 0; h < hq; ++h) {
        const uint16_t* gp = proj + t * N + cols_.g0 + h * cols_.g_head_stride;
        uint16_t* op = o + t * aw + static_cast<int64_t>(h) * d;
        for (int i = 0; i < d; ++i)
          op[i] = float_to_half(half_to_float(op[i], dt) * cpu::sigmoid(half_to_float(gp[i], dt)), dt);
      }
  }

  void out_project(const GatedBlockParams& p) const {
    cpu::gemm_abt(g_.dtype(), g_.tokens(), g_.d_model(), static_cast<int>(g_.attn_width()), ws16(p, layout_.attn),
                  g_.attn_width(), static_cast<const uint16_t*>(p.w_o), g_.attn_width(), static_cast<uint16_t*>(p.out),
                  g_.d_model(), scratch_.data(), threads_);
  }

  GatedGeometry g_;
  GatedOptions o_;
  GatedColumns cols_;
  std::unique_ptr<AttentionKernel> sdpa_;
  AttentionProblem prob_;
  std::unique_ptr<AttentionPlan> plan_;
  GatedWorkspaceLayout layout_;
  int threads_ = 1;
  mutable std::vector<float> scratch_;  // per-thread GEMM tiles: execute() allocates nothing (one call at a time)
  std::vector<GatedStage> stages_;
  const void* prepared_ = nullptr;
};

class CpuGatedBlockKernel final : public GatedBlockKernel {
 public:
  std::string name() const override { return "cpu.gated_block"; }
  Backend backend() const override { return Backend::cpu; }

  Support supports(const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs) const override {
    try {
      check(g, o, knobs);
    } catch (const GatedDecline& e) {
      return Support::no(e.what());
    }
    return Support::yes();
  }

  std::unique_ptr<GatedBlock> create(const GatedGeometry& g, const GatedOptions& o,
                                     const KnobValues& knobs) const override {
    check(g, o, knobs);
    return std::make_unique<CpuGatedBlock>(g, o, knobs);
  }

 private:
  static void check(const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs) {
    validate_gated_options(o);
    if (gated_block_size(g) == 0)
      throw GatedDecline("seqlen", "batch > 1 needs seqlen a multiple of 16 (sequences start on a cache block), got " +
                                       std::to_string(g.seqlen()));
    const std::string over = cpu::over_work_limit(gated_block_work(g, o).flops, knobs);
    if (!over.empty()) throw GatedDecline("work", "the block " + over);
  }
};

}  // namespace

std::unique_ptr<GatedBlockKernel> make_cpu_gated_block() { return std::make_unique<CpuGatedBlockKernel>(); }

}  // namespace attnbench
