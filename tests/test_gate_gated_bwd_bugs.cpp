// The gated block backward's planted-bug matrix: cpu.gated_block_bwd with one of the block's own bugs planted in its
// provider (dW_o transposed, the norm's backward without its rstd factor, RoPE's backward rotating the wrong way)
// fails the gradient gate on every shape of a matrix that spans 16k tokens, d256 with a GQA group of 16, a batch
// of two, the interleaved layout, save_all and the Gemma offset, in both dtypes; the unplanted block passes everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "attnbench/gated_block_bwd.hpp"
#include "common/gated_bwd_provider.hpp"
#include "cpu/gated_block.hpp"
#include "gated_bwd_run.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

enum class BlockBug { none, dw_o_transposed, norm_without_rstd, rope_wrong_way };
const char* bug_name(BlockBug b) {
  switch (b) {
    case BlockBug::none: return "none";
    case BlockBug::dw_o_transposed: return "dw_o_transposed";
    case BlockBug::norm_without_rstd: return "norm_without_rstd";
    case BlockBug::rope_wrong_way: return "rope_wrong_way";
  }
  return "?";
}

// C^T laid out as C: the other operand order of the same product, written [n, m] over the [m, n] buffer.
class TransposedGemm final : public GatedBwdGemm {
 public:
  explicit TransposedGemm(std::unique_ptr<GatedBwdGemm> g) : g_(std::move(g)) {}
  std::size_t workspace_bytes() const override { return g_->workspace_bytes(); }
  std::string summary() const override { return g_->summary(); }
  void run(const void* a, const void* b, void* c, void* ws, void* st) const override { g_->run(b, a, c, ws, st); }

 private:
  std::unique_ptr<GatedBwdGemm> g_;
};

// The CPU provider with one bug planted; everything else delegated.
class PlantedProvider final : public GatedBwdProvider {
 public:
  PlantedProvider(BlockBug bug, int64_t d_model, int64_t attn_width)
      : base_(cpu::make_cpu_gated_bwd_provider()), bug_(bug), dm_(d_model), aw_(attn_width) {}
  std::string name() const override { return "planted.gated_block_bwd"; }
  Backend backend() const override { return Backend::cpu; }
  std::unique_ptr<AttentionBwdKernel> make_sdpa_bwd() const override { return base_->make_sdpa_bwd(); }

  std::unique_ptr<GatedBwdGemm> make_gemm(const GatedGemmShape& s) const override {
    const bool dw_o = s.trans_a && !s.trans_b && s.m == dm_ && s.n == aw_ && s.lda == dm_;
    if (bug_ != BlockBug::dw_o_transposed || !dw_o) return base_->make_gemm(s);
    GatedGemmShape t = s;  // Y^T dy: [aw, dm]
    t.m = aw_;
    t.n = dm_;
    t.lda = aw_;
    t.ldb = dm_;
    t.ldc = dm_;
    return std::make_unique<TransposedGemm>(base_->make_gemm(t));
  }

  void norm_rope_bwd(DType dt, int d, const GatedNormRopeBwdParams& p, void* st) const override {
    if (bug_ == BlockBug::rope_wrong_way && p.rope_dim > 0) {  // R instead of R^T: the sine's sign flipped
      std::vector<uint16_t> neg(static_cast<std::size_t>(p.tokens) * p.rope_dim);
      for (std::size_t i = 0; i < neg.size(); ++i) neg[i] = static_cast<const uint16_t*>(p.sin)[i] ^ 0x8000;
      GatedNormRopeBwdParams q = p;
      q.sin = neg.data();
      return base_->norm_rope_bwd(dt, d, q, st);
    }
    base_->norm_rope_bwd(dt, d, p, st);
    if (bug_ != BlockBug::norm_without_rstd || !p.norm) return;
    for (const GatedNormRopeBwdTensor* t : {&p.q, &p.k})  // dx / rstd: the leading factor dropped
      for (int64_t tok = 0; tok < p.tokens; ++tok)
        for (int h = 0; h < t->heads; ++h) {
          auto* x = static_cast<uint16_t*>(t->dst) + tok * t->dst_stride_token + h * t->dst_stride_head;
          const float r = t->rstd[tok * t->heads + h];
          for (int i = 0; i < d; ++i) x[i] = float_to_half(half_to_float(x[i], dt) / r, dt);
        }
  }

  void gate_bwd(DType dt, const GatedGateBwdParams& p, void* st) const override { base_->gate_bwd(dt, p, st); }
  void cast(DType dt, const float* s, void* d, int64_t n, void* st) const override { base_->cast(dt, s, d, n, st); }
  void zero(void* d, std::size_t n, void* st) const override { base_->zero(d, n, st); }
  void fill_cu_seqlens(int32_t* cu, int b, int s, void* st) const override { base_->fill_cu_seqlens(cu, b, s, st); }

 private:
  std::shared_ptr<const GatedBwdProvider> base_;
  BlockBug bug_;
  int64_t dm_, aw_;
};

struct BugShape {
  const char* name;
  GatedDims dims;
  bool causal;
  int window_left;
  QGateLayout layout;
  RecomputePolicy recompute;
  float offset;
};

GatedDims dims(int batch, int seqlen, int d_model, int h_q, int h_kv, int d, int rope) {
  GatedDims x;
  x.batch = batch;
  x.seqlen = seqlen;
  x.d_model = d_model;
  x.h_q = h_q;
  x.h_kv = h_kv;
  x.d_head = d;
  x.rope_dim = rope;
  return x;
}

std::vector<BugShape> bug_matrix() {
  using L = QGateLayout;
  using R = RecomputePolicy;
  return {{"s16k_window64", dims(1, 16384, 128, 2, 1, 64, 16), true, 63, L::flat, R::recompute_qk_pre, 0.f},
          {"d256_gqa16", dims(1, 128, 256, 16, 1, 256, 64), true, -1, L::flat, R::recompute_qk_pre, 0.f},
          {"b2_full_interleaved_save_all", dims(2, 96, 256, 4, 2, 128, 32), false, -1, L::interleaved, R::save_all, 0.f},
          {"gemma_offset_gqa4", dims(1, 200, 256, 4, 1, 64, 64), true, -1, L::flat, R::save_all, 1.f}};
}

class GatedBwdBugMatrix : public ::testing::TestWithParam<BugShape> {};

TEST_P(GatedBwdBugMatrix, EveryPlantedBugFailsAndTheBlockPasses) {
  const BugShape& m = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    GatedDims dd = m.dims;
    dd.dtype = dt;
    const GatedGeometry g(dd);
    GatedOptions o = gatedtest::plain_options(m.causal);
    o.window_left = m.window_left;
    o.q_gate_layout = m.layout;
    o.norm_weight_offset = m.offset;
    GatedBwdOptions b;
    b.recompute = m.recompute;
    const GatedBwdHost host = build_gated_bwd_host(g, o, 31);
    const KnobValues knobs = gatedtest::knobs({{"ATTNBENCH_CPU_MAX_GFLOP", "0"}});
    for (BlockBug bug : {BlockBug::none, BlockBug::dw_o_transposed, BlockBug::norm_without_rstd,
                         BlockBug::rope_wrong_way}) {
      auto k = make_gated_block_bwd_kernel(std::make_shared<PlantedProvider>(bug, g.d_model(), g.attn_width()));
      auto block = k->create(g, o, b, knobs);
      const GateResult r = gatedtest::run_bwd(*block, host).gate;
      std::string per;
      for (const TensorGate& t : r.tensors) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s %.2e/%.1e", t.name.c_str(), t.max_row_rel, t.rtol);
        per += buf;
      }
      std::printf("%-30s %-4s %-18s%s\n", m.name, dtype_name(dt), bug_name(bug), per.c_str());
      if (bug == BlockBug::none) {
        EXPECT_TRUE(r.passed) << m.name << " " << dtype_name(dt) << ": " << gate_failure_reason(r);
        for (const TensorGate& t : r.tensors) EXPECT_LT(t.max_row_rel, 0.5 * t.rtol) << m.name << " " << t.name;
      } else {
        EXPECT_FALSE(r.passed) << m.name << " " << dtype_name(dt) << ": planted " << bug_name(bug) << " passed";
        double worst = 0, rtol = 0;
        for (const TensorGate& t : r.tensors)
          if (t.max_row_rel / t.rtol > worst / std::max(rtol, 1e-30)) worst = t.max_row_rel, rtol = t.rtol;
        EXPECT_GT(worst, 2 * rtol) << m.name << " " << bug_name(bug) << ": too close to the bound";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedBwdBugMatrix, ::testing::ValuesIn(bug_matrix()),
                         [](const ::testing::TestParamInfo<BugShape>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace attnbench
