// cudnn.sdpa where no device is needed: the declines it gives before asking cuDNN (types, features, the gate
// epilogue, the Q prologue, int32 ragged offsets), "no CUDA device" without one (a decline, never a throw), the
// derived tables' arithmetic and workspace layout, the plan-choice knobs and the graph cache's key, and its
// registry entry. Built only with cudnn.sdpa.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "cases/registry.hpp"
#include "cli_helpers.hpp"
#include "cuda/runtime.hpp"
#include "cudnn/derived.hpp"
#include "cudnn/plan_key.hpp"

using namespace attnbench;

namespace {

AttentionProblem small_problem(DType dt = DType::bf16) {
  AttentionProblem p;
  p.q_lens = {1, 5};
  p.kv_lens = {100, 37};
  p.heads = 4;
  p.kv_heads = 2;
  p.head_size = 64;
  p.types = AttentionTypes::all(dt);
  return p;
}

const KnobValues& knobs() {
  static const KnobValues k = KnobValues::resolve({}, false);
  return k;
}

// supports() declines with `want` in the reason and does not throw; plan() refuses it with the same reason.
void expect_declined(const AttentionProblem& p, const std::string& want) {
  const auto k = make_cudnn_sdpa();
  Support s;
  EXPECT_NO_THROW(s = k->supports(p, knobs()));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find(want), std::string::npos) << s.reason;
  try {
    k->plan(p, knobs());
    ADD_FAILURE() << "plan() took a problem supports() declines: " << want;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(CudnnSdpa, DeclinesTypesFeaturesGateAndQPrologueWithoutADevice) {
  AttentionProblem p = small_problem();
  p.types = AttentionTypes::all(DType::e4m3);
  expect_declined(p, "dtype e4m3: this kernel stores Q, K/V and O in fp16 or bf16 only");
  p.types = {DType::bf16, DType::e4m3, DType::bf16};
  expect_declined(p, "types bf16-e4m3-bf16 (q-kv-o)");

  p = small_problem();
  p.features.softcap = 30.f;
  expect_declined(p, "feature 'softcap': cuDNN's SDPA node has none");
  p = small_problem();
  p.return_lse = true;
  expect_declined(p, "return_lse: not written by cudnn.sdpa");
  p = small_problem();
  p.features.qq_bias_len = 5;
  p.features.qq_bias.assign(25, 0.5f);
  expect_declined(p, "feature 'qq_bias': cuDNN's SDPA node takes no such bias");

  p = small_problem();
  p.fusion.output_gate = true;
  expect_declined(p, "output_gate: cudnn.sdpa has no gate epilogue");
  p = small_problem();
  p.fusion.q_norm = true;
  expect_declined(p, "Q prologue");
  p = small_problem();
  p.fusion.q_rope_dim = 16;
  expect_declined(p, "Q prologue");

  // Ragged offsets are int32 elements: total_q * heads * head_size must fit (70001 * 128 * 256 does not).
  p = small_problem();
  p.q_lens = {70000, 1};
  p.kv_lens = {70000, 1};
  p.heads = p.kv_heads = 128;
  p.head_size = 256;
  expect_declined(p, "ragged Q/O offsets are int32 elements");
}

TEST(CudnnSdpa, NoDeviceIsADeclineNeverAThrow) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible (the GPU tests run cudnn.sdpa)";
  for (DType dt : {DType::f16, DType::bf16}) {
    AttentionProblem decode = small_problem(dt);
    decode.q_lens = {1, 1};
    AttentionProblem prefill = small_problem(dt);
    prefill.q_lens = {100, 37};
    AttentionProblem noncausal = prefill;
    noncausal.causal = false;
    for (const AttentionProblem& p : {decode, prefill, noncausal}) {
      const Support s = make_cudnn_sdpa()->supports(p, knobs());
      EXPECT_FALSE(s.ok);
      EXPECT_EQ(s.reason, "no CUDA device");
    }
    EXPECT_THROW(make_cudnn_sdpa()->plan(decode, knobs()), std::invalid_argument);
  }
}

TEST(CudnnSdpa, DerivedTablesFromCuSeqlens) {
  const std::vector<int32_t> cu = {0, 100, 164, 165};
  const int n = 3;
  const int64_t q_st = 8 * 128, o_st = 8 * 136 + 16;  // O on padded strides: its offsets differ from Q's
  std::vector<int32_t> seq(n, -1), qo(n + 1, -1), oo(n + 1, -1);
  cudnn::DerivedTables t{seq.data(), qo.data(), oo.data()};
  for (int i = 0; i <= n; ++i) cudnn::derive_entry(cu.data(), n, i, q_st, o_st, t);
  EXPECT_EQ(seq, (std::vector<int32_t>{100, 64, 1}));
  EXPECT_EQ(qo, (std::vector<int32_t>{0, 100 * 1024, 164 * 1024, 165 * 1024}));
  EXPECT_EQ(oo, (std::vector<int32_t>{0, 100 * 1104, 164 * 1104, 165 * 1104}));

  // Not ragged: only the lengths.
  std::vector<int32_t> seq2(n, -1);
  cudnn::DerivedTables lengths_only{seq2.data(), nullptr, nullptr};
  for (int i = 0; i <= n; ++i) cudnn::derive_entry(cu.data(), n, i, q_st, o_st, lengths_only);
  EXPECT_EQ(seq2, seq);
}

TEST(CudnnSdpa, WorkspaceHoldsCudnnsBytesThenAlignedTables) {
  const cudnn::WorkspaceLayout r = cudnn::workspace_layout(1000, 3, /*ragged=*/true);
  EXPECT_EQ(r.seq_len_q, 1024u);
  EXPECT_EQ(r.q_offsets, 1280u);
  EXPECT_EQ(r.o_offsets, 1536u);
  EXPECT_EQ(r.total, 1792u);
  const cudnn::WorkspaceLayout d = cudnn::workspace_layout(0, 100, /*ragged=*/false);
  EXPECT_EQ(d.seq_len_q, 0u);
  EXPECT_EQ(d.total, 512u);  // 100 int32 lengths, rounded up to 256 bytes
  const cudnn::WorkspaceLayout big = cudnn::workspace_layout(256, 64, true);
  EXPECT_EQ(big.q_offsets, 512u);
  EXPECT_EQ(big.o_offsets, 512u + 512u);  // 65 offsets: 260 bytes, rounded to 512
  char base[4096];
  const cudnn::DerivedTables t = cudnn::tables_in(base, r, true);
  EXPECT_EQ(reinterpret_cast<char*>(t.seq_len_q), base + 1024);
  EXPECT_EQ(reinterpret_cast<char*>(t.o_offsets), base + 1536);
  EXPECT_EQ(cudnn::tables_in(base, d, false).q_offsets, nullptr);
}

// The FP8 SDPA: which types take it, its scalars, its top-left band where q_len == kv_len (cuDNN on SM90 has no
// other FP8 diagonal), its workspace (scalars, then the e4m3 O) and its own graph key per type.
TEST(CudnnSdpaFp8, TypesScalarsBandWorkspaceAndKey) {
  const auto with = [](AttentionTypes t) {
    AttentionProblem p = small_problem();
    p.types = t;
    return p;
  };
  EXPECT_TRUE(cudnn::fp8_graph(with({DType::e4m3, DType::e4m3, DType::bf16})));
  EXPECT_TRUE(cudnn::fp8_graph(with({DType::e5m2, DType::e5m2, DType::f16})));
  EXPECT_FALSE(cudnn::fp8_graph(with({DType::e4m3, DType::e5m2, DType::bf16})));
  EXPECT_FALSE(cudnn::fp8_graph(with({DType::bf16, DType::e4m3, DType::bf16})));
  EXPECT_FALSE(cudnn::fp8_graph(with(AttentionTypes::all(DType::e4m3))));
  EXPECT_FALSE(cudnn::fp8_graph(with(AttentionTypes::all(DType::bf16))));
  expect_declined(with({DType::e4m3, DType::e5m2, DType::bf16}), "or Q and K/V in one 8-bit format");

  AttentionProblem p = with({DType::e4m3, DType::e4m3, DType::bf16});
  p.features.q_scale = 0.25f, p.features.k_scale = 0.0625f, p.features.v_scale = 0.03125f;
  const cudnn::Fp8Scalars s = cudnn::fp8_scalars_of(p);
  EXPECT_EQ(s.descale_q, 0.25f);
  EXPECT_EQ(s.descale_k, 0.0625f);
  EXPECT_EQ(s.descale_v, 0.03125f);
  EXPECT_EQ(s.scale_s * s.descale_s, 1.f);
  EXPECT_EQ(s.scale_s, 256.f);  // P <= 1 lands at most on 256, under e4m3's 448
  EXPECT_EQ(s.scale_o, 32.f);   // O's codes of V's size
  EXPECT_EQ(cudnn::kFp8Scalars, 8);

  EXPECT_FALSE(cudnn::band_of(p).top_left);  // q 1 and 5 of kv 100 and 37: cuDNN's own decline
  p.q_lens = p.kv_lens = {64, 64};
  EXPECT_TRUE(cudnn::band_of(p).top_left);
  EXPECT_EQ(cudnn::band_of(p).right, std::optional<int64_t>(0));
  AttentionProblem sixteen = p;
  sixteen.types = AttentionTypes::all(DType::bf16);
  EXPECT_FALSE(cudnn::band_of(sixteen).top_left);  // 16-bit graphs keep the bottom-right diagonal

  p.head_size = 72;
  expect_declined(p, "head_size 72: cuDNN's FP8 SDPA needs a multiple of 16");
  p.head_size = 64;

  const cudnn::WorkspaceLayout w = cudnn::workspace_layout(1000, 3, /*ragged=*/false, /*o_code_bytes=*/1000);
  EXPECT_EQ(w.seq_len_q, 1024u);
  EXPECT_EQ(w.fp8, 1280u);
  EXPECT_EQ(w.o_codes, 1536u);
  EXPECT_EQ(w.total, 2560u);
  char base[4096];
  const cudnn::DerivedTables t = cudnn::tables_in(base, w, false);
  EXPECT_EQ(reinterpret_cast<char*>(t.fp8), base + 1280);
  EXPECT_EQ(t.o_codes, reinterpret_cast<unsigned char*>(base + 1536));
  EXPECT_EQ(cudnn::tables_in(base, cudnn::workspace_layout(1000, 3, false), false).o_codes, nullptr);

  const cudnn::Layout l = cudnn::planned_layout(p);
  const cudnn::PlanChoice c = cudnn::plan_choice(knobs());
  AttentionProblem f16 = p, e5m2 = p;
  f16.types.o = DType::f16;
  e5m2.types.q = e5m2.types.kv = DType::e5m2;
  EXPECT_NE(cudnn::graph_key(p, l, c), cudnn::graph_key(f16, l, c));
  EXPECT_NE(cudnn::graph_key(p, l, c), cudnn::graph_key(e5m2, l, c));
}

TEST(CudnnSdpaKnobs, HeuristicsAndPlanParse) {
  using cudnn::Heuristic;
  using Pick = cudnn::PlanChoice::Pick;
  EXPECT_EQ(cudnn::parse_heuristics("a"), std::vector<Heuristic>{Heuristic::a});
  EXPECT_EQ(cudnn::parse_heuristics("b,a,fallback"),
            (std::vector<Heuristic>{Heuristic::b, Heuristic::a, Heuristic::fallback}));
  const cudnn::PlanChoice def = cudnn::plan_choice(knobs());
  EXPECT_EQ(def.heuristics, std::vector<Heuristic>{Heuristic::a});
  EXPECT_EQ(def.pick, Pick::first);
  EXPECT_FALSE(def.builds_all());
  const cudnn::PlanChoice n = cudnn::parse_plan_choice("fallback", "7");
  EXPECT_EQ(n.pick, Pick::index);
  EXPECT_EQ(n.index, 7);
  EXPECT_EQ(cudnn::pick_text(n), "7");
  const cudnn::PlanChoice tune =
      cudnn::plan_choice(KnobValues::resolve({{"ATTNBENCH_CUDNN_HEURISTICS", "a,fallback"},
                                              {"ATTNBENCH_CUDNN_PLAN", "autotune"}}, false));
  EXPECT_EQ(tune.pick, Pick::autotune);
  EXPECT_TRUE(tune.builds_all());
  EXPECT_EQ(cudnn::heuristics_text(tune.heuristics), "a,fallback");
  EXPECT_EQ(cudnn::pick_text(tune), "autotune");
  EXPECT_EQ(def.implementation, cudnn::Implementation::automatic);
  EXPECT_EQ(cudnn::parse_plan_choice("a", "first", "unified").implementation, cudnn::Implementation::unified);
  EXPECT_EQ(cudnn::parse_plan_choice("a", "first", "composite").implementation, cudnn::Implementation::composite);
  EXPECT_EQ(cudnn::implementation_text(cudnn::Implementation::automatic), "auto");
}

TEST(CudnnSdpaKnobs, BadValuesNameTheKnobAndTheValue) {
  const auto message = [](const std::string& heuristics, const std::string& plan, const std::string& node = "auto") {
    try {
      cudnn::parse_plan_choice(heuristics, plan, node);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message("a,c", "first"), "knob ATTNBENCH_CUDNN_HEURISTICS: value 'a,c' has 'c', not in a|b|fallback "
                                     "(a comma list of a|b|fallback)");
  EXPECT_NE(message("b,b", "first").find("value 'b,b' lists 'b' twice"), std::string::npos);
  EXPECT_NE(message("", "first").find("value '' has an empty item"), std::string::npos);
  EXPECT_EQ(message("a", "fast"),
            "knob ATTNBENCH_CUDNN_PLAN: value 'fast' is neither first|autotune nor a non-negative integer");
  EXPECT_NE(message("a", "-2").find("value '-2'"), std::string::npos);
  EXPECT_EQ(message("a", "first", "fused"), "knob ATTNBENCH_CUDNN_IMPL: value 'fused' not in auto|composite|unified");
  EXPECT_EQ(message("a,b,fallback", "autotune", "unified"), "");
}

TEST(CudnnSdpaKnobs, GraphKeyHoldsTheChoice) {
  const AttentionProblem p = small_problem();
  const cudnn::Layout l = cudnn::planned_layout(p);
  const auto key = [&](const char* heuristics, const char* plan, const AttentionProblem& q,
                       const char* node = "auto") {
    return cudnn::graph_key(q, l, cudnn::parse_plan_choice(heuristics, plan, node));
  };
  const std::string base = key("a", "first", p);
  EXPECT_EQ(base, cudnn::graph_key(p, l, cudnn::plan_choice(knobs())));
  EXPECT_EQ(base, key("a", "first", p));
  const std::vector<std::string> others = {key("b", "first", p),        key("a,fallback", "first", p),
                                           key("fallback,a", "first", p), key("a", "0", p),
                                           key("a", "1", p),              key("a", "autotune", p),
                                           key("a", "first", p, "composite"), key("a", "first", p, "unified")};
  for (std::size_t i = 0; i < others.size(); ++i) {
    EXPECT_NE(others[i], base) << others[i];
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(others[i], others[j]) << others[i];
  }
  // Lengths under the same dims share a graph; autotune's pick is timed on the lengths, so it keys them too.
  AttentionProblem shorter = p;
  shorter.kv_lens = {100, 20};
  EXPECT_EQ(key("a", "first", shorter), base);
  EXPECT_EQ(key("a", "3", shorter), key("a", "3", p));
  EXPECT_NE(key("a", "autotune", shorter), key("a", "autotune", p));
  EXPECT_EQ(key("a", "autotune", p), key("a", "autotune", p));
}

// The features cuDNN's node takes and how: a window as the diagonal band (left bound window_left + 1), ALiBi only
// with its own slopes on causal q_len == kv_len problems (top-left), sinks; the rest declined by name.
TEST(CudnnSdpaFeatures, BandAlibiAndSinks) {
  AttentionProblem p = small_problem();  // causal, q 1 and 5 of kv 100 and 37
  cudnn::Band b = cudnn::band_of(p);
  EXPECT_FALSE(b.top_left);
  EXPECT_EQ(b.right, std::optional<int64_t>(0));  // bottom-right causal
  EXPECT_FALSE(b.left);
  p.features.window_left = 16;
  b = cudnn::band_of(p);
  EXPECT_EQ(b.left, std::optional<int64_t>(17));  // cuDNN keeps j > i' - bound; ours j >= i' - window_left
  EXPECT_EQ(b.right, std::optional<int64_t>(0));
  EXPECT_EQ(cudnn::feature_conflict(p), "");
  p.causal = false;
  p.features.window_right = 3;
  b = cudnn::band_of(p);
  EXPECT_EQ(b.right, std::optional<int64_t>(3));
  p.features.window_left = -1;
  EXPECT_FALSE(cudnn::band_of(p).left);
  p = small_problem();
  p.q_lens = {1, 1};
  EXPECT_FALSE(cudnn::band_of(p).right);  // causal decode: no mask
  p.features.window_left = 8;
  EXPECT_EQ(cudnn::band_of(p).right, std::optional<int64_t>(0));

  std::vector<float> slopes;
  for (int h = 0; h < 4; ++h) slopes.push_back(std::exp2(-8.f * (h + 1) / 4));
  EXPECT_TRUE(cudnn::cudnn_alibi_slopes(slopes));
  EXPECT_FALSE(cudnn::cudnn_alibi_slopes({0.5f, 0.25f, 0.125f}));  // three heads: cuDNN's formula differs
  p = small_problem();
  p.q_lens = p.kv_lens = {64, 64};
  p.features.alibi_slopes = slopes;
  EXPECT_EQ(cudnn::feature_conflict(p), "");
  EXPECT_TRUE(cudnn::band_of(p).top_left);
  p.features.alibi_slopes[1] *= 1.0004f;  // a shape file's rounding: cuDNN's slopes still
  EXPECT_EQ(cudnn::feature_conflict(p), "");
  p.features.alibi_slopes[1] *= 1.01f;
  EXPECT_NE(cudnn::feature_conflict(p).find("has its own slopes"), std::string::npos) << cudnn::feature_conflict(p);
  p.features.alibi_slopes = slopes;
  p.kv_lens = {64, 100};
  EXPECT_NE(cudnn::feature_conflict(p).find("q_len must equal kv_len (64 vs 100)"), std::string::npos);
  p.kv_lens = {64, 64};
  p.causal = false;
  EXPECT_NE(cudnn::feature_conflict(p).find("needs the causal mask"), std::string::npos);

  p = small_problem();
  p.features.sinks = {1.f, 2.f, 3.f, 4.f};
  AttentionProblem sink_prefill = p;
  sink_prefill.q_lens = {5, 5};
  EXPECT_EQ(cudnn::feature_conflict(sink_prefill), "");
  sink_prefill.q_lens = {5, 1};  // one sequence of one query: cuDNN's sink is wrong there
  EXPECT_NE(cudnn::feature_conflict(sink_prefill).find("wrong on a sequence of one query"), std::string::npos);
  const cudnn::Layout l = cudnn::planned_layout(p);
  const cudnn::PlanChoice c = cudnn::plan_choice(knobs());
  AttentionProblem windowed = small_problem();
  windowed.features.window_left = 16;
  EXPECT_NE(cudnn::graph_key(p, l, c), cudnn::graph_key(small_problem(), l, c));  // sinks are an input
  EXPECT_NE(cudnn::feature_conflict(p), "");  // small_problem's first sequence is a decode
  EXPECT_NE(cudnn::graph_key(windowed, l, c), cudnn::graph_key(small_problem(), l, c));
}

// cuDNN is told of a spare block only where the table has a slot no token needs (the harness's inputs name it
// there): a table whose every slot is used, the gated block's view of its projection, names only the caller's.
// ATTNBENCH_CUDNN_DIAGONAL=auto gives cuDNN the top-left diagonal only where it is the declared mask (every q_len
// == kv_len), with a window too; declared keeps the problem's; the choice is in the graph key and the summary's text.
TEST(CudnnSdpaKnobs, AutoDiagonalIsTopLeftOnlyWhereItIsTheSameMask) {
  using cudnn::Diagonal;
  AttentionProblem p = small_problem();  // causal, q 1 and 5 of kv 100 and 37
  EXPECT_FALSE(cudnn::band_of(p, Diagonal::automatic).top_left);
  EXPECT_EQ(cudnn::band_text(p, Diagonal::automatic), ", bottom-right causal");
  p.q_lens = p.kv_lens = {64, 32};
  EXPECT_TRUE(cudnn::band_of(p, Diagonal::automatic).top_left);
  EXPECT_EQ(cudnn::band_of(p, Diagonal::automatic).right, std::optional<int64_t>(0));
  EXPECT_FALSE(cudnn::band_of(p, Diagonal::declared).top_left);
  EXPECT_EQ(cudnn::band_text(p, Diagonal::automatic), ", top-left causal");
  EXPECT_EQ(cudnn::band_text(p, Diagonal::declared), ", bottom-right causal");
  p.features.window_left = 16;
  EXPECT_TRUE(cudnn::band_of(p, Diagonal::automatic).top_left);
  EXPECT_EQ(cudnn::band_of(p, Diagonal::automatic).left, std::optional<int64_t>(17));
  p.features.window_left = -1;

  EXPECT_EQ(cudnn::plan_choice(knobs()).diagonal, Diagonal::automatic);
  const cudnn::PlanChoice declared =
      cudnn::plan_choice(KnobValues::resolve({{"ATTNBENCH_CUDNN_DIAGONAL", "declared"}}, false));
  EXPECT_EQ(declared.diagonal, Diagonal::declared);
  const cudnn::Layout l = cudnn::planned_layout(p);
  EXPECT_NE(cudnn::graph_key(p, l, declared), cudnn::graph_key(p, l, cudnn::plan_choice(knobs())));
  EXPECT_THROW(KnobValues::resolve({{"ATTNBENCH_CUDNN_DIAGONAL", "top_left"}}, false), std::invalid_argument);
  EXPECT_THROW(KnobValues::resolve({{"ATTNBENCH_CUDNN_BWD_LAYOUT", "dense"}}, false), std::invalid_argument);
}

TEST(CudnnSdpaLayouts, TheContainerHasASpareBlockOnlyForUnusedSlots) {
  AttentionProblem p = small_problem();  // kv 100 and 37 in blocks of 64: 2 + 1 blocks, ragged
  const cudnn::Layout planned = cudnn::planned_layout(p);
  EXPECT_EQ(planned.table_stride, 3);
  EXPECT_EQ(cudnn::container_blocks(p, planned), 4);
  cudnn::Layout exact = planned;
  exact.table_stride = p.max_blocks_per_seq();
  EXPECT_EQ(cudnn::container_blocks(p, exact), 4);  // the second sequence leaves a slot
  p.kv_lens = {100, 100};
  EXPECT_EQ(cudnn::container_blocks(p, exact), 4);  // every slot used: no spare
  EXPECT_EQ(cudnn::container_blocks(p, cudnn::planned_layout(p)), 5);
  const cudnn::PlanChoice c = cudnn::plan_choice(knobs());
  EXPECT_NE(cudnn::graph_key(p, exact, c), cudnn::graph_key(p, cudnn::planned_layout(p), c));
}

TEST(CudnnSdpaKnobs, NoDeviceDeclinesUnderEveryChoice) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible (the GPU tests run the choices)";
  const KnobValues tune = KnobValues::resolve({{"ATTNBENCH_CUDNN_HEURISTICS", "b,fallback"},
                                               {"ATTNBENCH_CUDNN_PLAN", "autotune"}}, false);
  const KnobValues index = KnobValues::resolve({{"ATTNBENCH_CUDNN_PLAN", "2"}}, false);
  for (const KnobValues* k : {&tune, &index}) {
    const Support s = make_cudnn_sdpa()->supports(small_problem(), *k);
    EXPECT_FALSE(s.ok);
    EXPECT_EQ(s.reason, "no CUDA device");
  }
}

TEST(CudnnSdpa, IsRegisteredAndListedWithItsDescription) {
  const KernelEntry* entry = nullptr;
  for (const auto& k : kernel_registry())
    if (k.name == "cudnn.sdpa") entry = &k;
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->backend, Backend::cuda);
  EXPECT_EQ(entry->op, Op::attention);
  EXPECT_NE(entry->description.find("cuDNN SDPA"), std::string::npos) << entry->description;
  const testcli::Result r = testcli::run_cli("list --kernels");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("cudnn.sdpa"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(entry->description), std::string::npos) << r.output;
}

TEST(CudnnSdpa, RunRowsWithoutADeviceAreDeclined) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  const std::string out = testcli::tmp_path("cudnn_decode.json");
  const auto r = testcli::run_cli("run --group decode --kernel cudnn.sdpa --backend cuda --mode eager --gate-only -o " +
                                  out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto doc = testcli::read_json(out);
  ASSERT_FALSE(doc["rows"].empty());
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["kernel"], "cudnn.sdpa") << row.dump();
    EXPECT_EQ(row["status"], "declined") << row.dump();
    EXPECT_NE(row["reason"].get<std::string>().find("no CUDA device"), std::string::npos) << row.dump();
  }
}
