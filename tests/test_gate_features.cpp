// The planted-bug matrix of the attention features: on shapes after the models that use them (Mistral's window,
// Gemma-2's softcap + window, MPT's ALiBi, gpt-oss's sinks + window, an 8-bit K/V cache, speculative qq-bias, the
// FP8 SDPA's 8-bit Q), the
// bug-free planted kernel and cpu.unified pass the gate and each feature's planted defect fails it, in both dtypes;
// the same for rows aligned top-left with their keys.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attnbench/attention.hpp"
#include "cases/gate.hpp"
#include "cases/inputs.hpp"
#include "planted_attention.hpp"
#include "planted_gate.hpp"

namespace attnbench {
namespace {

using testing::Bug;

struct FeatureShape {
  const char* name;
  std::vector<int> q_lens, kv_lens;
  int heads, kv_heads, head_size, block_size;
  DType kv;  // the cache's storage (bf16: the dtype of Q)
  AttentionFeatures f;
  bool top_left = false;  // AttentionProblem::top_left
  DType q = DType::bf16;  // Q's storage (bf16: the dtype; 8-bit: the FP8 SDPA, Q in the cache's codes)
};

std::vector<float> alibi(int heads) {  // the ALiBi paper's slopes: 2^(-8 (h + 1) / heads)
  std::vector<float> s(heads);
  for (int h = 0; h < heads; ++h) s[h] = std::exp2(-8.f * (h + 1) / heads);
  return s;
}

std::vector<FeatureShape> feature_shapes() {
  AttentionFeatures mistral, gemma, mpt, gptoss, fp8, spec, padded, sdpa8;
  mistral.window_left = 256;
  gemma.softcap = 5.f, gemma.window_left = 300;  // a small cap: softcap_after_mask's masked weight is e^-5
  mpt.alibi_slopes = alibi(8);
  gptoss.window_left = 128;
  for (int h = 0; h < 16; ++h) gptoss.sinks.push_back(1.f + 0.2f * h);  // as large as the scores' maxima
  fp8.k_scale = 0.05f, fp8.v_scale = 0.2f;
  sdpa8 = fp8;
  sdpa8.q_scale = 0.3f;
  spec.qq_bias_len = 8;
  for (int i = 0; i < 64; ++i) spec.qq_bias.push_back(std::sin(1.7f * i) * 2.f);
  padded.window_left = 100, padded.alibi_slopes = alibi(8);  // the window and ALiBi's distance follow the alignment
  return {
      {"mistral_window", {1, 300, 1}, {3000, 300, 1500}, 8, 2, 128, 16, DType::bf16, mistral},
      {"gemma_softcap_window", {200, 1}, {700, 2000}, 4, 2, 256, 64, DType::bf16, gemma},
      {"mpt_alibi", {300, 1}, {300, 900}, 8, 8, 128, 64, DType::bf16, mpt},
      {"gptoss_sinks_window", {1, 160}, {2000, 160}, 16, 2, 64, 16, DType::bf16, gptoss},
      {"fp8_e4m3_kv", {1, 100}, {1500, 400}, 8, 2, 128, 16, DType::e4m3, fp8},
      {"fp8_e5m2_kv", {1, 100}, {1500, 400}, 8, 2, 128, 16, DType::e5m2, fp8},
      {"spec_qq_bias", {8, 5}, {900, 400}, 8, 2, 128, 64, DType::bf16, spec},
      {"top_left_causal", {150, 1, 64}, {400, 90, 64}, 8, 2, 128, 16, DType::bf16, {}, true},
      {"top_left_window_alibi", {300, 40}, {700, 200}, 8, 8, 64, 32, DType::bf16, padded, true},
      {"fp8_sdpa_e4m3", {300, 64}, {1500, 700}, 8, 2, 128, 64, DType::e4m3, sdpa8, false, DType::e4m3},
      {"fp8_sdpa_e5m2", {1, 200}, {900, 200}, 8, 8, 128, 64, DType::e5m2, sdpa8, false, DType::e5m2},
  };
}

AttentionProblem problem_of(const FeatureShape& s, DType dt) {
  AttentionProblem p;
  p.q_lens = s.q_lens;
  p.kv_lens = s.kv_lens;
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.head_size = s.head_size;
  p.block_size = s.block_size;
  p.types = AttentionTypes::all(dt);
  if (!is_16bit(s.kv)) p.types.kv = s.kv;
  if (!is_16bit(s.q)) p.types.q = s.q;
  p.features = s.f;
  p.top_left = s.top_left;
  return p;
}

// Whether the shape carries the feature a bug needs (by the field name features.first_set() reports; top_left for
// the alignment).
bool has_feature(const FeatureShape& s, const std::string& name) {
  const AttentionFeatures& f = s.f;
  if (name == "top_left") return s.top_left;
  if (name == "window_left") return f.window_left >= 0;
  if (name == "softcap") return f.softcap > 0.f;
  if (name == "alibi_slopes") return !f.alibi_slopes.empty();
  if (name == "sinks") return !f.sinks.empty();
  if (name == "k_scale") return f.k_scale != 1.f;
  if (name == "q_scale") return f.q_scale != 1.f;
  if (name == "qq_bias") return !f.qq_bias.empty();
  return false;
}

class GateFeatures : public ::testing::TestWithParam<int> {};

TEST_P(GateFeatures, EachFeatureBugFailsAndTheCorrectKernelPasses) {
  const FeatureShape sh = feature_shapes()[GetParam()];
  for (DType dt : {DType::bf16, DType::f16}) {
    const HostInputs in = build_inputs(problem_of(sh, dt), 23, BlockOrder::shuffled);
    const testing::Checked c = testing::reference_rows(in);
    const testing::PlantedKernel kernel(in);
    const GateResult good = testing::gate(in, c, kernel.run(Bug::none));
    EXPECT_TRUE(good.passed) << sh.name << " " << dtype_name(dt) << ": " << gate_failure_reason(good);
    const double rtol = attention_tolerance(problem_of(sh, dt).types, default_tolerance(dt)).rtol;
    EXPECT_LT(good.max_row_rel, 0.6 * rtol) << sh.name << " " << dtype_name(dt);  // an e4m3 P: 0.54
    const GateResult cpu = testing::gate(in, c, testing::run_cpu_unified(in));
    EXPECT_TRUE(cpu.passed) << sh.name << " " << dtype_name(dt) << " cpu.unified: " << gate_failure_reason(cpu);
    EXPECT_LT(cpu.max_row_rel, 0.5 * default_rtol(dt)) << sh.name << " " << dtype_name(dt) << " cpu.unified";
    int planted = 0;
    for (Bug b : testing::every_feature_bug()) {
      if (!has_feature(sh, testing::bug_feature(b))) continue;
      ++planted;
      const GateResult g = testing::gate(in, c, kernel.run(b));
      EXPECT_FALSE(g.passed) << sh.name << " " << dtype_name(dt) << ": planted bug " << testing::bug_name(b)
                             << " passed (row_rel " << g.max_row_rel << ")";
      EXPECT_GT(g.max_row_rel, 2 * rtol) << sh.name << " " << testing::bug_name(b) << ": too close";
      std::printf("%-22s %-4s %-19s row_rel %.2e max_abs %.2e (correct: %.2e)\n", sh.name, dtype_name(dt),
                  testing::bug_name(b), g.max_row_rel, g.max_abs, good.max_row_rel);
    }
    EXPECT_GT(planted, 0) << sh.name << ": no feature bug applies";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GateFeatures, ::testing::Range(0, static_cast<int>(feature_shapes().size())),
                         [](const ::testing::TestParamInfo<int>& i) { return feature_shapes()[i.param].name; });

}  // namespace
}  // namespace attnbench
