// cpu.unified against a naive double-precision loop written here (independent of reference/): prefill and
// split-KV decode paths, masks, GQA groups, head sizes, paging, dtypes, output strides, and the GFLOP decline.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "../kernels/cpu/unified.hpp"
#include "attnbench/backends.hpp"
#include "attnbench/reference.hpp"
#include "cases/gate.hpp"
#include "cases/inputs.hpp"

namespace attnbench {
namespace {

constexpr uint16_t kPoison = 0xFFFF;  // NaN in fp16 and bf16

AttentionProblem make_problem(std::vector<int> q, std::vector<int> kv, int heads, int kv_heads, int d,
                              DType dt = DType::bf16, bool causal = true, int block_size = 64) {
  AttentionProblem p;
  p.q_lens = std::move(q);
  p.kv_lens = std::move(kv);
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_size = d;
  p.types = AttentionTypes::all(dt);
  p.causal = causal;
  p.block_size = block_size;
  return p;
}

// out[t, h, c] in double, straight from the definition: gather K/V through the block table, bottom-right mask.
std::vector<double> naive_attention(const HostInputs& in) {
  const AttentionProblem& p = in.problem;
  const int d = p.head_size, g = p.heads / p.kv_heads, mbps = in.block_table_stride;
  const double scale = p.softmax_scale();
  auto kv_at = [&](const HostTensor& cache, int s, int j, int kvh, int c) {
    const int64_t blk = in.block_table[static_cast<std::size_t>(s) * mbps + j / p.block_size];
    const int64_t idx = ((blk * p.block_size + j % p.block_size) * p.kv_heads + kvh) * d + c;
    return static_cast<double>(cache.get(idx));
  };
  std::vector<double> out(static_cast<std::size_t>(p.total_q()) * p.heads * d, 0.0);
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int ql = p.q_lens[s], kl = p.kv_lens[s];
    for (int i = 0; i < ql; ++i) {
      const int64_t t = in.cu_seqlens_q[s] + i;
      const int visible = p.causal ? std::min(kl, i + kl - ql + 1) : kl;
      for (int h = 0; h < p.heads; ++h) {
        const int kvh = h / g;
        std::vector<double> w(visible);
        double mx = -1e300;
        for (int j = 0; j < visible; ++j) {
          double dot = 0;
          for (int c = 0; c < d; ++c)
            dot += half_to_float(in.q.halves()[(t * p.heads + h) * d + c], p.types.q) * kv_at(in.k_cache, s, j, kvh, c);
          w[j] = dot * scale;
          mx = std::max(mx, w[j]);
        }
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        double* o = &out[(t * p.heads + h) * d];
        for (int j = 0; j < visible; ++j)
          for (int c = 0; c < d; ++c) o[c] += w[j] / sum * kv_at(in.v_cache, s, j, kvh, c);
      }
    }
  }
  return out;
}

struct RunResult {
  std::string summary;
  double max_err = 0;
  bool all_finite = true;
};

// Runs cpu.unified on host buffers (output and workspace poisoned first) and compares with the double loop.
// out_pad adds unused halves after each token's row of the output, which must stay untouched.
RunResult run_and_compare(const AttentionProblem& p, const CpuUnifiedOptions& opts = {},
                          BlockOrder order = BlockOrder::contiguous, int out_pad = 0, uint64_t seed = 7) {
  const HostInputs in = build_inputs(p, seed, order);
  auto kernel = make_cpu_unified(opts);
  EXPECT_TRUE(kernel->supports(p, KnobValues::resolve({}, false)).ok);
  const auto plan = kernel->plan(p, KnobValues::resolve({}, false));
  AttentionParams params = in.params();
  params.o_stride_token = static_cast<int64_t>(p.heads) * p.head_size + out_pad;
  std::vector<uint16_t> out(static_cast<std::size_t>(p.total_q()) * params.o_stride_token, kPoison);
  std::vector<float> ws((plan->workspace_bytes + sizeof(float) - 1) / sizeof(float), std::nanf(""));
  params.out = out.data();
  params.workspace = ws.empty() ? nullptr : ws.data();
  kernel->run(*plan, params, nullptr);

  // The features and 8-bit caches against the reference (itself held to a naive loop per feature).
  std::vector<double> ref;
  if (p.features.any() || !p.types.uniform()) {
    std::vector<float> f(static_cast<std::size_t>(p.total_q()) * p.heads * p.head_size);
    reference::paged_attention_all(in.params(), f.data());
    ref.assign(f.begin(), f.end());
  } else {
    ref = naive_attention(in);
  }
  RunResult r;
  r.summary = plan->summary;
  for (int64_t t = 0; t < p.total_q(); ++t) {
    for (int h = 0; h < p.heads; ++h)
      for (int c = 0; c < p.head_size; ++c) {
        const float got = half_to_float(out[t * params.o_stride_token + h * p.head_size + c], p.types.q);
        const double want = ref[(t * p.heads + h) * p.head_size + c];
        if (!std::isfinite(got)) r.all_finite = false;
        // Absolute below 1, relative above: rounding to the 16-bit output dominates and scales with |want|.
        r.max_err = std::max(r.max_err, std::abs(got - want) / std::max(1.0, std::abs(want)));
      }
    for (int c = 0; c < out_pad; ++c)
      EXPECT_EQ(out[t * params.o_stride_token + p.heads * p.head_size + c], kPoison) << "padding written";
  }
  return r;
}

// Output rounding alone is up to 2^-9 (bf16) and 2^-12 (fp16) of a value.
double tolerance(DType dt) { return dt == DType::bf16 ? 1e-2 : 2e-3; }

void expect_matches(const AttentionProblem& p, const std::string& path, const CpuUnifiedOptions& opts = {},
                    BlockOrder order = BlockOrder::contiguous, int out_pad = 0) {
  const RunResult r = run_and_compare(p, opts, order, out_pad);
  if (std::getenv("ATTNBENCH_TEST_VERBOSE")) std::printf("  %s: max_err %.2e\n", r.summary.c_str(), r.max_err);
  EXPECT_TRUE(r.all_finite) << r.summary << ": an output element was not written (or is not finite)";
  EXPECT_LT(r.max_err, tolerance(p.types.q)) << r.summary;
  EXPECT_EQ(r.summary.rfind(path, 0), 0u) << "expected the " << path << " path, plan says: " << r.summary;
}

int splits_of(const std::string& summary) {
  const auto at = summary.find("splits=");
  return at == std::string::npos ? 0 : std::stoi(summary.substr(at + 7));
}

TEST(CpuUnified, PrefillCausalSquare) {
  expect_matches(make_problem({100, 37}, {100, 37}, 8, 2, 64), "prefill");
}

TEST(CpuUnified, PrefillNonCausal) {
  expect_matches(make_problem({100, 37}, {100, 37}, 8, 2, 64, DType::f16, false), "prefill");
}

TEST(CpuUnified, RaggedQueryShorterThanKvShuffled) {
  for (DType dt : {DType::bf16, DType::f16})
    expect_matches(make_problem({5, 129, 64}, {18, 463, 64}, 8, 2, 128, dt), "prefill", {}, BlockOrder::shuffled);
}

TEST(CpuUnified, GroupSizes) {
  expect_matches(make_problem({70}, {90}, 4, 4, 64), "prefill");                    // group 1
  expect_matches(make_problem({70}, {90}, 8, 2, 128, DType::f16), "prefill");       // group 4
  expect_matches(make_problem({70, 3}, {90, 40}, 7, 1, 64, DType::bf16), "prefill");  // group 7
}

TEST(CpuUnified, HeadSize256AndOddBlockSizes) {
  expect_matches(make_problem({33}, {150}, 4, 2, 256, DType::f16, true, 48), "prefill", {}, BlockOrder::shuffled);
  // block 1 and 200: KV tiles span blocks or sit inside one.
  expect_matches(make_problem({20}, {85}, 2, 1, 64, DType::bf16, true, 1), "prefill", {}, BlockOrder::shuffled);
  expect_matches(make_problem({50}, {450}, 2, 1, 64, DType::bf16, true, 200), "prefill", {}, BlockOrder::shuffled);
}

TEST(CpuUnified, SmallQueryTilesCrossTheMaskBoundary) {
  CpuUnifiedOptions o;
  o.q_tile = 3;  // tiles of 3 rows: rows inside one item see different numbers of keys
  expect_matches(make_problem({40, 11}, {40, 60}, 4, 2, 64), "prefill", o, BlockOrder::shuffled);
}

TEST(CpuUnified, StridedOutputLeavesPaddingAlone) {
  expect_matches(make_problem({17}, {17}, 4, 2, 64), "prefill", {}, BlockOrder::contiguous, 8);
  expect_matches(make_problem({1, 1}, {500, 300}, 4, 1, 64), "decode", {}, BlockOrder::contiguous, 8);
}

TEST(CpuUnified, DecodeLongKvUsesSplits) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const RunResult r = run_and_compare(make_problem({1, 1, 1}, {3000, 1000, 77}, 8, 1, 128, dt),
                                        {}, BlockOrder::shuffled);
    EXPECT_TRUE(r.all_finite) << r.summary;
    EXPECT_LT(r.max_err, tolerance(dt)) << r.summary;
    EXPECT_EQ(r.summary.rfind("decode", 0), 0u) << r.summary;
    EXPECT_GT(splits_of(r.summary), 1) << r.summary;
  }
}

// A NaN in a Q row reaches that row's output on the split path too (the merge keeps a NaN split rather than
// dropping it as empty), and no other row.
TEST(CpuUnified, ANanQueryRowStaysNanAcrossSplits) {
  for (int splits : {1, 5}) {
    const AttentionProblem p = make_problem({1, 1}, {2000, 900}, 8, 2, 128);
    HostInputs in = build_inputs(p, 11, BlockOrder::shuffled);
    in.q.halves()[(1 * p.heads + 3) * p.head_size + 17] = 0x7FC0;  // token 1, head 3
    CpuUnifiedOptions opts;
    opts.splits = splits;
    auto kernel = make_cpu_unified(opts);
    const auto plan = kernel->plan(p, KnobValues::resolve({}, false));
    AttentionParams params = in.params();
    std::vector<uint16_t> out(static_cast<std::size_t>(p.total_q()) * p.heads * p.head_size, kPoison);
    std::vector<float> ws((plan->workspace_bytes + sizeof(float) - 1) / sizeof(float), 0.f);
    params.out = out.data();
    params.workspace = ws.empty() ? nullptr : ws.data();
    kernel->run(*plan, params, nullptr);
    EXPECT_EQ(splits_of(plan->summary), splits) << plan->summary;
    for (int64_t t = 0; t < p.total_q(); ++t)
      for (int h = 0; h < p.heads; ++h) {
        int nan = 0;
        for (int c = 0; c < p.head_size; ++c) nan += std::isnan(bf16_to_float(out[(t * p.heads + h) * p.head_size + c]));
        EXPECT_EQ(nan, t == 1 && h == 3 ? p.head_size : 0) << plan->summary << " token " << t << " head " << h;
      }
  }
}

// return_lse on both paths (prefill rows, and decode rows merged over splits), plain, with sinks and a window, and
// aligned top-left: every row's LSE matches the reference's; with the LSE in base 2, or without the sink, it fails.
TEST(CpuUnified, ReturnLseOnBothPathsMatchesTheReference) {
  for (int variant = 0; variant < 3; ++variant)
    for (int splits : {1, 6}) {
      AttentionProblem p = make_problem({1, 40, 1}, {1500, 300, 77}, 8, 2, 128, DType::bf16, true, 16);
      p.return_lse = true;
      if (variant == 1) p.features.sinks = {0.5f, 1.f, 8.f, 2.f, 2.5f, 3.f, -1.f, 4.f}, p.features.window_left = 60;
      if (variant == 2) p.top_left = true;
      const HostInputs in = build_inputs(p, 13, BlockOrder::shuffled);
      CpuUnifiedOptions opts;
      opts.splits = splits;
      auto kernel = make_cpu_unified(opts);
      const auto plan = kernel->plan(p, KnobValues::resolve({}, false));
      AttentionParams a = in.params();
      std::vector<uint16_t> out(in.q.size(), kPoison);
      std::vector<float> lse(static_cast<std::size_t>(p.total_q()) * p.heads, NAN);
      std::vector<float> ws((plan->workspace_bytes + sizeof(float) - 1) / sizeof(float) + 1, 0.f);
      a.out = out.data();
      a.workspace = ws.data();
      EXPECT_THROW(kernel->run(*plan, a, nullptr), std::invalid_argument);  // return_lse without params.lse
      a.lse = lse.data();
      kernel->run(*plan, a, nullptr);
      std::vector<float> ref_o(in.q.size()), ref_lse(lse.size());
      reference::paged_attention_all(in.params(), ref_o.data(), ref_lse.data());
      std::vector<int64_t> idx(lse.size());
      for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
      const std::string what = "variant " + std::to_string(variant) + " splits " + std::to_string(splits);
      GateResult g;
      gate_lse(g, lse.data(), static_cast<int64_t>(lse.size()), idx, ref_lse.data(), 1e-4);
      EXPECT_TRUE(g.failed.empty()) << what << ": lse error " << g.lse_max_err;
      std::vector<float> base2 = lse;
      for (float& x : base2) x *= 1.4426950408889634f;
      GateResult bad;
      gate_lse(bad, base2.data(), static_cast<int64_t>(base2.size()), idx, ref_lse.data(), default_rtol(DType::bf16));
      EXPECT_FALSE(bad.failed.empty()) << what << ": the LSE in base 2 passes";
      if (variant == 1) {  // the reference's LSE without the sinks' terms
        HostInputs no_sink = in;
        no_sink.problem.features.sinks.clear();
        std::vector<float> other(lse.size());
        reference::paged_attention_all(no_sink.params(), ref_o.data(), other.data());
        GateResult sinkless;
        gate_lse(sinkless, lse.data(), static_cast<int64_t>(lse.size()), idx, other.data(), default_rtol(DType::bf16));
        EXPECT_FALSE(sinkless.failed.empty()) << what << ": passes the LSE without its sinks";
      }
    }
}

TEST(CpuUnified, DecodeGroupsAndHeadSizes) {
  expect_matches(make_problem({1, 1}, {700, 129}, 32, 32, 64), "decode");                 // group 1
  expect_matches(make_problem({1, 1}, {700, 129}, 28, 4, 128, DType::f16), "decode");     // group 7
  expect_matches(make_problem({1}, {1100}, 8, 1, 256), "decode", {}, BlockOrder::shuffled);
  expect_matches(make_problem({1, 1, 2}, {900, 1300, 611}, 8, 2, 128, DType::bf16, true, 16), "decode", {},
                 BlockOrder::repeated);  // shared blocks, as a prefix cache gives
}

// The attention features on both paths: a window that leaves whole splits and tiles unseen, sinks over splits
// (merged once, in the denominator), softcap + ALiBi + qq-bias on prefill tiles, an 8-bit cache on either path.
TEST(CpuUnified, FeaturesOnBothPaths) {
  CpuUnifiedOptions split7;
  split7.splits = 7;
  AttentionProblem decode = make_problem({1, 1, 3}, {1000, 90, 700}, 8, 2, 128, DType::bf16, true, 16);
  decode.features.window_left = 200;
  decode.features.sinks = {0.5f, 1.f, 1.5f, 2.f, 2.5f, 3.f, -1.f, 4.f};
  expect_matches(decode, "decode splits=7", split7, BlockOrder::shuffled);
  AttentionProblem prefill = make_problem({70, 33}, {300, 33}, 4, 2, 64, DType::f16, false, 16);
  prefill.features.softcap = 3.f;
  prefill.features.alibi_slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  prefill.features.qq_bias_len = 70;
  for (int i = 0; i < 70 * 70; ++i) prefill.features.qq_bias.push_back(0.01f * static_cast<float>(i % 97) - 0.5f);
  prefill.features.window_left = 50, prefill.features.window_right = 20;
  expect_matches(prefill, "prefill", {}, BlockOrder::shuffled);
  for (DType kv : {DType::e4m3, DType::e5m2}) {
    AttentionProblem p8 = make_problem({1, 40}, {900, 200}, 8, 2, 128, DType::bf16, true, 16);
    p8.types.kv = kv;
    p8.features.k_scale = 0.04f, p8.features.v_scale = 0.5f;
    expect_matches(p8, "prefill", {}, BlockOrder::shuffled);
    expect_matches(p8, "decode splits=7", split7, BlockOrder::shuffled);
  }
}

TEST(CpuUnified, ForcedSplitsThatDoNotDivideKv) {
  CpuUnifiedOptions o;
  o.splits = 7;  // 1000 / 7 is not whole; 37 leaves six splits empty
  const AttentionProblem p = make_problem({1, 1}, {1000, 37}, 8, 2, 128, DType::bf16, true, 48);
  expect_matches(p, "decode splits=7", o, BlockOrder::shuffled);
}

TEST(CpuUnified, SplitPathWithShortCausalQueries) {
  // Several causal rows per sequence on the split path: late splits are fully masked for early rows.
  CpuUnifiedOptions o;
  o.splits = 5;
  expect_matches(make_problem({3, 8}, {1000, 333}, 8, 2, 64, DType::f16), "decode splits=5", o,
                 BlockOrder::shuffled);
  expect_matches(make_problem({4}, {4000}, 8, 2, 64), "decode");  // short q, long kv: picked by plan()
}

TEST(CpuUnified, RerunningAPlanGivesIdenticalOutput) {
  const AttentionProblem p = make_problem({1, 1}, {900, 400}, 8, 2, 64);
  const HostInputs in = build_inputs(p, 3);
  auto k = make_cpu_unified();
  const auto plan = k->plan(p, KnobValues::resolve({}, false));
  std::vector<float> ws(plan->workspace_bytes / sizeof(float) + 1);
  std::vector<uint16_t> a(p.total_q() * p.heads * p.head_size, kPoison), b = a;
  AttentionParams params = in.params();
  params.workspace = ws.data();
  params.out = a.data();
  k->run(*plan, params, nullptr);
  params.out = b.data();
  k->run(*plan, params, nullptr);
  EXPECT_EQ(a, b);
}

TEST(CpuUnified, DeclinesWorkAboveTheGflopKnob) {
  const AttentionProblem p = make_problem({2048}, {2048}, 16, 16, 128);  // ~17.2 GFLOP
  const KnobValues one = KnobValues::resolve({{"ATTNBENCH_CPU_MAX_GFLOP", "1"}}, false);
  const Support s = make_cpu_unified()->supports(p, one);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("17.2 GFLOP"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("limit of 1 GFLOP"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("ATTNBENCH_CPU_MAX_GFLOP"), std::string::npos) << s.reason;
  EXPECT_THROW(make_cpu_unified()->plan(p, one), std::invalid_argument);

  EXPECT_TRUE(cpu::resolve(p, cpu::CpuKnobs{0}, cpu::CpuDevice{}).ok());
  EXPECT_TRUE(cpu::resolve(make_problem({64}, {64}, 16, 16, 128), cpu::CpuKnobs{1}, cpu::CpuDevice{}).ok());

  // supports() decides under the knobs it is given: --set and the environment reach it the same way.
  const Support via_knobs = make_cpu_unified()->supports(p, one);
  EXPECT_FALSE(via_knobs.ok);
  EXPECT_NE(via_knobs.reason.find("ATTNBENCH_CPU_MAX_GFLOP"), std::string::npos) << via_knobs.reason;
  EXPECT_TRUE(make_cpu_unified()->supports(p, KnobValues::resolve({{"ATTNBENCH_CPU_MAX_GFLOP", "0"}}, false)).ok);
}

TEST(CpuUnified, DeclinesHeadSizesItDoesNotHandle) {
  auto k = make_cpu_unified();
  const Support odd = k->supports(make_problem({8}, {8}, 2, 1, 12), KnobValues::resolve({}, false));
  EXPECT_FALSE(odd.ok);
  EXPECT_NE(odd.reason.find("head_size 12"), std::string::npos) << odd.reason;
  EXPECT_FALSE(k->supports(make_problem({8}, {8}, 2, 1, 520), KnobValues::resolve({}, false)).ok);
  EXPECT_TRUE(k->supports(make_problem({8}, {8}, 2, 1, 512), KnobValues::resolve({}, false)).ok);
  // heads not a multiple of kv_heads
  EXPECT_FALSE(k->supports(make_problem({8}, {8}, 3, 2, 64), KnobValues::resolve({}, false)).ok);
}

TEST(CpuUnified, ExpIsAccurateOverTheSoftmaxRange) {
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.f * static_cast<float>(i) / 200000.f;
    worst = std::max(worst, std::abs(cpu_unified_exp(x) / std::exp(static_cast<double>(x)) - 1.0));
  }
  EXPECT_LT(worst, 5e-7);  // a few float ulps
  EXPECT_EQ(cpu_unified_exp(0.f), 1.f);
  EXPECT_LT(cpu_unified_exp(-200.f), 1e-37f);
  EXPECT_LT(cpu_unified_exp(-std::numeric_limits<float>::infinity()), 1e-37f);
}

TEST(CpuUnified, SplitHeuristic) {
  const AttentionProblem one_long = make_problem({1}, {8192}, 32, 8, 128);
  EXPECT_EQ(cpu_decode_splits(one_long, 8, 1, 64), 4);  // 8 units, 32 items wanted
  EXPECT_EQ(cpu_decode_splits(make_problem({1}, {8192}, 8, 1, 128), 16, 1, 64), 64);  // capped at 64
  EXPECT_EQ(cpu_decode_splits(make_problem({1}, {200}, 8, 1, 128), 16, 1, 64), 1);  // too short to split
  EXPECT_EQ(cpu_decode_splits(make_problem(std::vector<int>(128, 1), std::vector<int>(128, 4096), 32, 8, 128), 16,
                              1, 64),
            1);  // plenty of (sequence, kv head) items already
  EXPECT_EQ(cpu_kv_tile(make_problem({1}, {8}, 2, 1, 64, DType::bf16, true, 16)), 16);
  EXPECT_EQ(cpu_kv_tile(make_problem({1}, {8}, 2, 1, 64, DType::bf16, true, 256)), 64);
  EXPECT_EQ(cpu_q_tile(make_problem({100}, {100}, 32, 8, 128)), 16);
  EXPECT_EQ(cpu_q_tile(make_problem({5}, {100}, 32, 8, 128)), 5);
}

}  // namespace
}  // namespace attnbench

namespace attnbench {
namespace {

// A negative block-table stride (a table walked backwards) is refused by name, by cpu.unified's run and by the GPU
// kernels' layout check: every kernel widens a row's offset unsigned.
TEST(CpuUnified, NegativeBlockTableStrideIsRefusedByName) {
  const AttentionProblem p = make_problem({1, 1}, {300, 77}, 8, 2, 64, DType::bf16);
  const HostInputs in = build_inputs(p, 3, BlockOrder::shuffled);
  auto kernel = make_cpu_unified();
  const auto plan = kernel->plan(p, KnobValues::resolve({}, false));
  std::vector<uint16_t> out(in.q.size(), kPoison);
  std::vector<float> ws((plan->workspace_bytes + 3) / 4 + 1);
  AttentionParams a = in.params();
  a.out = out.data();
  a.workspace = ws.data();
  a.block_table_stride = -a.block_table_stride;
  const std::string value = "block_table_stride " + std::to_string(a.block_table_stride);
  for (int which = 0; which < 2; ++which) {
    try {
      which == 0 ? kernel->run(*plan, a, nullptr) : check_gpu_layout("cuda.unified", a);
      ADD_FAILURE() << "a negative stride was taken (" << which << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(value), std::string::npos) << e.what();
    }
  }
  a.block_table_stride = -a.block_table_stride;
  kernel->run(*plan, a, nullptr);  // the same params with the stride restored run
}

// The output gate: O * sigmoid(gate) with the gate read through its own strides, on both paths; a plan made
// without a gate refuses params that carry one (and the reverse).
TEST(CpuUnified, OutputGateOnPrefillAndDecodePaths) {
  for (const bool decode : {false, true}) {
    AttentionProblem p = decode ? make_problem({1, 1}, {700, 333}, 8, 2, 64, DType::f16)
                                : make_problem({5, 40}, {18, 90}, 8, 2, 64, DType::f16);
    p.fusion.output_gate = true;
    const HostInputs in = build_inputs(p, 5, BlockOrder::shuffled);
    // The gate lives in a wider buffer: token stride 3 * heads * d, head stride 2 * d (as in a fused projection).
    const int64_t gst = 3LL * p.heads * p.head_size, ghs = 2LL * p.head_size;
    const std::vector<uint16_t> gate = random_normal(static_cast<std::size_t>(p.total_q() * gst), p.types.q, 9, 4);
    auto kernel = make_cpu_unified();
    const KnobValues knobs = KnobValues::resolve({}, false);
    ASSERT_TRUE(kernel->supports(p, knobs).ok);
    const auto plan = kernel->plan(p, knobs);
    std::vector<uint16_t> out(in.q.size(), kPoison);
    std::vector<float> ws((plan->workspace_bytes + 3) / 4 + 1);
    AttentionParams a = in.params();
    a.out = out.data();
    a.workspace = ws.data();
    EXPECT_THROW(kernel->run(*plan, a, nullptr), std::invalid_argument);  // the plan expects a gate
    a.epilogue.gate = gate.data();
    a.epilogue.gate_stride_token = gst;
    a.epilogue.gate_stride_head = ghs;
    kernel->run(*plan, a, nullptr);
    EXPECT_NE(plan->summary.find(decode ? "decode" : "prefill"), std::string::npos) << plan->summary;

    const std::vector<double> ref = naive_attention(in);
    double max_err = 0;
    for (int64_t t = 0; t < p.total_q(); ++t)
      for (int h = 0; h < p.heads; ++h)
        for (int c = 0; c < p.head_size; ++c) {
          const double g = half_to_float(gate[t * gst + h * ghs + c], p.types.q);
          const double want = ref[(t * p.heads + h) * p.head_size + c] / (1.0 + std::exp(-g));
          const double got = half_to_float(out[(t * p.heads + h) * p.head_size + c], p.types.q);
          ASSERT_TRUE(std::isfinite(got));
          max_err = std::max(max_err, std::abs(got - want));
        }
    EXPECT_LT(max_err, 2e-3) << plan->summary;

    AttentionProblem plain = p;
    plain.fusion.output_gate = false;
    const auto plain_plan = kernel->plan(plain, knobs);
    EXPECT_THROW(kernel->run(*plain_plan, a, nullptr), std::invalid_argument);  // gate set, plan has none
  }
}

}  // namespace
}  // namespace attnbench
