// cuda.unified's attention features on the GPU: each feature, and the combinations real models use, through the
// decode kernel (one split and many), speculative decode and both prefill kernels, at every head size and
// both dtypes, against the fp32 reference; each run is also checked against the reference without its feature,
// which must fail (the feature was applied, not skipped); and the 8-bit K/V caches with their scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/heuristics.hpp"
#include "gpu_case.hpp"
#include "gpu_check.hpp"
#include "gpu_shape.hpp"

namespace attnbench::gputest {
namespace {

using Knobs = std::map<std::string, std::string>;

struct FeatureRun {
  std::string name;
  AttentionFeatures features;
};

std::vector<float> spread(int n, float lo, float hi) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(std::max(1, n - 1));
  return v;
}

std::vector<float> alibi(int heads) {
  std::vector<float> v(heads);
  for (int h = 0; h < heads; ++h) v[h] = std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(heads));
  return v;
}

// The features (and the pairs real models use) for a problem of `heads` query heads and q_len_max new tokens.
std::vector<FeatureRun> feature_runs(int heads, int q_len_max, bool causal) {
  std::vector<FeatureRun> runs;
  auto add = [&](std::string name, auto set) {
    AttentionFeatures f;
    set(f);
    runs.push_back({std::move(name), f});
  };
  add("window_left 100", [](AttentionFeatures& f) { f.window_left = 100; });
  if (!causal) add("window 70/40", [](AttentionFeatures& f) { f.window_left = 70, f.window_right = 40; });
  add("softcap 2", [](AttentionFeatures& f) { f.softcap = 2.f; });
  add("alibi", [&](AttentionFeatures& f) { f.alibi_slopes = alibi(heads); });
  add("sinks", [&](AttentionFeatures& f) { f.sinks = spread(heads, 2.f, 6.f); });
  add("sinks + window 128", [&](AttentionFeatures& f) { f.sinks = spread(heads, 2.f, 6.f), f.window_left = 128; });
  add("softcap 2 + window 300", [](AttentionFeatures& f) { f.softcap = 2.f, f.window_left = 300; });
  add("qq-bias", [&](AttentionFeatures& f) {
    f.qq_bias_len = q_len_max;
    for (int i = 0; i < q_len_max; ++i)
      for (int j = 0; j < q_len_max; ++j) f.qq_bias.push_back(3.f * std::cos(1.3f * i + 0.7f * j));
  });
  return runs;
}

struct PathCase {
  Shape shape;
  Knobs knobs;
};

// The case's knobs for a failure message: " NAME=value" each, without the ATTNBENCH_ prefix.
std::string knobs_text(const PathCase& pc) {
  std::string t;
  for (const auto& [name, value] : pc.knobs) t += " " + name.substr(std::string("ATTNBENCH_").size()) + "=" + value;
  return t;
}

// Decode (auto, 1 and 16 splits, both merges, the 6-slot ring where it fits; ragged, block size 16), speculative
// decode, the narrow prefill (causal and not) and the wide one (TMA, the cp.async gather of block size 32,
// GQA-packed short q-tiles), per head size.
std::vector<PathCase> path_cases(int d) {
  const int kvh = d == 256 ? 2 : 4;
  const std::vector<std::pair<int, int>> ragged = {{1, 3000}, {1, 777}, {1, 64}, {1, 5000}};
  std::vector<PathCase> cases = {
      {{"decode", ragged, 16, kvh, d, true, 16}, {}},
      {{"decode", ragged, 16, kvh, d, true, 16}, {{"ATTNBENCH_3D_SPLITS", "1"}}},
      {{"decode", ragged, 16, kvh, d, true, 16}, {{"ATTNBENCH_3D_SPLITS", "16"}, {"ATTNBENCH_3D_MERGE", "fused"}}},
      {{"decode", ragged, 16, kvh, d, true, 16},
       {{"ATTNBENCH_3D_SPLITS", "16"}, {"ATTNBENCH_3D_MERGE", "separate"}}},
      {{"spec q6", {{6, 2048}, {6, 611}}, 16, 8, d, true, 64}, {}},
      {{"prefill", {{300, 300}, {200, 1000}}, 8, 2, d, true, 64}, {{"ATTNBENCH_SM90_PATH", "narrow"}}},
      {{"prefill non-causal", {{300, 300}, {200, 1000}}, 8, 2, d, false, 32}, {{"ATTNBENCH_SM90_PATH", "narrow"}}},
      {{"prefill", {{300, 300}, {200, 1000}}, 8, 2, d, true, 64}, {{"ATTNBENCH_SM90_PATH", "wide"}}},
      {{"prefill non-causal bs32", {{300, 300}, {200, 1000}}, 8, 2, d, false, 32}, {{"ATTNBENCH_SM90_PATH", "wide"}}},
      {{"prefill packed", {{40, 900}, {64, 64}, {17, 300}}, 8, 2, d, true, 64}, {{"ATTNBENCH_SM90_PATH", "wide"}}},
  };
  if (d != 256)  // the 6-slot ring (d256 declines it)
    cases.push_back({{"decode", ragged, 16, kvh, d, true, 16}, {{"ATTNBENCH_3D_STAGES", "6"}}});
  return cases;
}

Outcome run_features(const PathCase& pc, DType dt, const AttentionFeatures& f, DType kv, uint64_t seed,
                     Outcome* without) {
  AttentionProblem p = problem_of(pc.shape, dt);
  p.types.kv = kv;
  p.features = f;
  DeviceCase c(p, pc.knobs, seed);
  cuda::Stream stream;
  c.poison();
  c.run(stream.get());
  stream.synchronize();
  if (without) {
    AttentionProblem plain = p;
    plain.features = AttentionFeatures();
    plain.features.k_scale = f.k_scale, plain.features.v_scale = f.v_scale;
    *without = check_output(c, seed, nullptr, &plain);
  }
  return check_output(c, seed);
}

int max_q(const Shape& s) {
  int q = 0;
  for (auto [ql, kl] : s.seqs) q = std::max(q, ql);
  return q;
}

TEST(CudaFeatures, EachFeatureOnEveryPathPassesTheGateAndMatters) {
  int runs = 0;
  for (int d : {64, 128, 256})
    for (const PathCase& pc : path_cases(d))
      for (const FeatureRun& fr : feature_runs(pc.shape.heads, max_q(pc.shape), pc.shape.causal))
        for (DType dt : {DType::bf16, DType::f16}) {
          Outcome without;
          const Outcome o = run_features(pc, dt, fr.features, dt, 9000 + runs, &without);
          ++runs;
          const std::string what =
              pc.shape.name + " d" + std::to_string(d) + " " + dtype_name(dt) + " " + fr.name + knobs_text(pc);
          EXPECT_EQ(o.nonfinite, 0) << what;
          EXPECT_EQ(o.padding_written, 0) << what;
          EXPECT_TRUE(o.within) << what << ": " << o.worst;
          EXPECT_FALSE(without.within) << what << ": the output also passes without the feature (max_abs "
                                       << without.max_abs << ")";
          if (!o.within || without.within)
            std::printf("  %-50s max_abs=%.3g row_rel=%.3g without: row_rel=%.3g\n", what.c_str(), o.max_abs,
                        o.max_row_rel, without.max_row_rel);
        }
  std::printf("  %d feature runs\n", runs);
}

// One call of p on the path case's kernel, output (and LSE) poisoned first.
std::unique_ptr<DeviceCase> run_path(const PathCase& pc, const AttentionProblem& p, uint64_t seed) {
  auto c = std::make_unique<DeviceCase>(p, pc.knobs, seed);
  cuda::Stream stream;
  c->poison();
  c->run(stream.get());
  stream.synchronize();
  return c;
}

// 8-bit caches: codes whose values (code x scale) are N(0, 1); the scales must be applied (a run against the
// reference with unit scales fails), alone and beside the other features; decode, narrow and wide (TMA) prefill.
TEST(CudaFeatures, EightBitCachesWithTheirScales) {
  int runs = 0;
  for (DType kv : {DType::e4m3, DType::e5m2})
    for (const PathCase& pc : path_cases(128))
      for (DType dt : {DType::bf16, DType::f16})
        for (bool with_window : {false, true}) {
          // the wide kernel lands codes by TMA only (pages of a multiple of 64 tokens)
          if (pc.knobs.count("ATTNBENCH_SM90_PATH") && pc.knobs.at("ATTNBENCH_SM90_PATH") == "wide" &&
              pc.shape.block_size % 64 != 0)
            continue;
          AttentionFeatures f;
          f.k_scale = 0.0625f, f.v_scale = 0.03125f;
          if (with_window) f.sinks = spread(pc.shape.heads, 1.f, 4.f), f.window_left = 128;
          Outcome unscaled;
          AttentionProblem p = problem_of(pc.shape, dt);
          p.types.kv = kv;
          p.features = f;
          const auto c = run_path(pc, p, 7000 + runs);
          AttentionProblem unit = p;
          unit.features.k_scale = unit.features.v_scale = 1.f;
          unscaled = check_output(*c, 7000 + runs, nullptr, &unit);
          const Outcome o = check_output(*c, 7000 + runs);
          ++runs;
          const std::string what = pc.shape.name + " " + dtype_name(dt) + "-" + dtype_name(kv) +
                                   (with_window ? " sinks + window" : "") + knobs_text(pc);
          EXPECT_EQ(o.nonfinite, 0) << what;
          EXPECT_TRUE(o.within) << what << ": " << o.worst;
          EXPECT_FALSE(unscaled.within) << what << ": the output also passes with unit scales";
          if (!o.within) std::printf("  %-50s max_abs=%.3g row_rel=%.3g\n", what.c_str(), o.max_abs, o.max_row_rel);
        }
  std::printf("  %d 8-bit cache runs\n", runs);
}

// The path cases, and the FP8 SDPA's ring settings on the wide kernel: every depth its sized slots fit, one unit
// per CTA or persistent (Q loaded ahead where a second tile fits).
std::vector<PathCase> fp8_sdpa_cases(int d) {
  std::vector<PathCase> cases = path_cases(d);
  const Shape sh{"prefill", {{300, 300}, {200, 1000}}, 8, 2, d, true, 64};
  for (int st = 2; st <= cuda::kWideMaxStages; ++st) {
    if (cuda::wide_smem_bytes(d, 2, st, 1, true) > cuda::kWideSmemLimit) continue;
    for (const char* persistent : {"0", "1"})
      cases.push_back({sh,
                       {{"ATTNBENCH_SM90_PATH", "wide"},
                        {"ATTNBENCH_SM90_STAGES", std::to_string(st)},
                        {"ATTNBENCH_SM90_PERSISTENT", persistent}}});
  }
  return cases;
}

// The FP8 SDPA: Q and K/V in one 8-bit format with their descales, on the decode kernel (1, 16 and auto splits,
// block size 16; d128) and the wide one (every prefill case whose pages it lands; d128 and d256), plain and with a
// window + sinks; each
// run also fails against the reference without q_scale (the descale was applied). The prefill cases it declines
// (narrow forced, block size 32) are declined with the wide kernel's reason, host-tested in
// Resolve.DeclinesTheProblemWithTheReason.
TEST(CudaFeatures, Fp8SdpaWithItsDescales) {
  int runs = 0;
  for (DType qk : {DType::e4m3, DType::e5m2})
    for (int d : {128, 256})
    for (const PathCase& pc : fp8_sdpa_cases(d))
      for (DType dt : {DType::bf16, DType::f16})
        for (bool with_window : {false, true}) {
          AttentionProblem p = problem_of(pc.shape, dt);
          p.types.q = p.types.kv = qk;
          p.features.q_scale = 0.25f, p.features.k_scale = 0.0625f, p.features.v_scale = 0.03125f;
          if (with_window) p.features.sinks = spread(pc.shape.heads, 1.f, 4.f), p.features.window_left = 128;
          const Support s = make_cuda_unified()->supports(p, KnobValues::resolve(pc.knobs, false));
          if (!s.ok) {  // the narrow kernel and small pages; at d256 the decode kernel too (its codes are d128's)
            const bool known = s.reason.find("prefill runs on the wide 2D kernel only") != std::string::npos ||
                               (d == 256 && s.reason.find("at head_size 128 only") != std::string::npos);
            EXPECT_TRUE(known) << s.reason;
            continue;
          }
          const auto c = run_path(pc, p, 7500 + runs);
          AttentionProblem unit = p;
          unit.features.q_scale = 1.f;
          const Outcome unscaled = check_output(*c, 7500 + runs, nullptr, &unit);
          const Outcome o = check_output(*c, 7500 + runs);
          ++runs;
          const std::string what = pc.shape.name + " " + p.types.name() + (with_window ? " sinks + window" : "") +
                                   knobs_text(pc) + " [" + c->plan->summary + "]";
          EXPECT_EQ(o.nonfinite, 0) << what;
          EXPECT_EQ(o.padding_written, 0) << what;
          EXPECT_TRUE(o.within) << what << ": " << o.worst;
          EXPECT_FALSE(unscaled.within) << what << ": the output also passes without q_scale";
          std::printf("  %-70s max_abs=%.3g row_rel=%.3g\n", what.c_str(), o.max_abs, o.max_row_rel);
        }
  EXPECT_GT(runs, 0);
  std::printf("  %d FP8 SDPA runs\n", runs);
}

// Logits far wider than 1/sqrt(d) gives: a row's max moves past the slack of the wide kernel and of the narrow d128
// 32-row tile's passes (2^8 in probability, 2^3 for an 8-bit P) on some tiles and within it on others, so both the
// kept and the moved max run, and an 8-bit P meets values up to its slack. Every path case, 16-bit and FP8, with and
// without sinks (which read the final max).
TEST(CudaFeatures, LogitsWideEnoughToMoveTheMaxPastTheSlack) {
  int runs = 0;
  for (int d : {64, 128, 256})
    for (const PathCase& pc : path_cases(d))
      for (DType qk : {DType::bf16, DType::e4m3})
        for (float widen : {4.f, 16.f})
          for (bool sinks : {false, true}) {
            AttentionProblem p = problem_of(pc.shape, DType::bf16);
            p.scale = widen / std::sqrt(static_cast<float>(d));
            if (qk == DType::e4m3) {
              p.types.q = p.types.kv = qk;
              p.features.q_scale = 0.25f, p.features.k_scale = 0.0625f, p.features.v_scale = 0.03125f;
            }
            if (sinks) p.features.sinks = spread(pc.shape.heads, 1.f, 4.f);
            if (!make_cuda_unified()->supports(p, KnobValues::resolve(pc.knobs, false)).ok) continue;
            const auto c = run_path(pc, p, 7700 + runs);
            const Outcome o = check_output(*c, 7700 + runs);
            ++runs;
            const std::string what = pc.shape.name + " d" + std::to_string(d) + " " + p.types.name() + " scale x" +
                                     std::to_string(static_cast<int>(widen)) + (sinks ? " sinks" : "") + knobs_text(pc);
            EXPECT_EQ(o.nonfinite, 0) << what;
            EXPECT_TRUE(o.within) << what << " [" << c->plan->summary << "]: " << o.worst;
          }
  EXPECT_GT(runs, 100);
  std::printf("  %d wide-logit runs\n", runs);
}

// The d128 path cases an 8-bit cache runs on (the 8-bit prefill reads whole 64-token pages).
bool eight_bit_path(const PathCase& pc, int d) {
  return d == 128 && !(pc.knobs.count("ATTNBENCH_SM90_PATH") && pc.shape.block_size % 64 != 0);
}

std::string path_run_name(const PathCase& pc, int d, int variant) {
  return pc.shape.name + " d" + std::to_string(d) + " variant " + std::to_string(variant) + knobs_text(pc);
}

// Rows aligned top-left with their keys (AttentionProblem::top_left) on every path and head size, plain and under
// a window with ALiBi (both follow the alignment), 16-bit and 8-bit caches: the gate passes, and where the mask
// depends on the alignment (causal, or a window; every path case has a sequence with q_len != kv_len) the reference
// aligned bottom-right fails the same output.
TEST(CudaFeatures, TopLeftAlignmentOnEveryPath) {
  int runs = 0;
  for (int d : {64, 128, 256})
    for (const PathCase& pc : path_cases(d))
      for (int variant = 0; variant < 3; ++variant) {
        if (variant == 2 && !eight_bit_path(pc, d)) continue;
        AttentionProblem p = problem_of(pc.shape, variant == 1 ? DType::f16 : DType::bf16);
        p.top_left = true;
        if (variant == 1) p.features.window_left = 100, p.features.alibi_slopes = alibi(p.heads);
        if (variant == 2) p.types.kv = DType::e4m3, p.features.k_scale = p.features.v_scale = 0.0625f;
        const auto c = run_path(pc, p, 9500 + runs);
        AttentionProblem bottom_right = p;
        bottom_right.top_left = false;
        const Outcome o = check_output(*c, 9500 + runs), flipped = check_output(*c, 9500 + runs, nullptr, &bottom_right);
        ++runs;
        const std::string what = path_run_name(pc, d, variant);
        EXPECT_EQ(o.nonfinite, 0) << what;
        EXPECT_EQ(o.padding_written, 0) << what;
        EXPECT_TRUE(o.within) << what << ": " << o.worst;
        if (p.causal || p.features.window_left >= 0) {
          EXPECT_FALSE(flipped.within) << what << ": the output also passes aligned bottom-right";
        }
      }
  std::printf("  %d top-left runs\n", runs);
}

// return_lse on every path and head size: plain, sinks with a window, top-left, and an 8-bit cache; the LSE of every
// row against the reference's (within 1e-3 of max(1, |lse|): the kernels read the reference's inputs, in fp32), and
// the same values fail against the LSE in base 2.
TEST(CudaFeatures, ReturnLseOnEveryPath) {
  int runs = 0;
  for (int d : {64, 128, 256})
    for (const PathCase& pc : path_cases(d))
      for (int variant = 0; variant < 4; ++variant) {
        if (variant == 3 && !eight_bit_path(pc, d)) continue;
        AttentionProblem p = problem_of(pc.shape, variant == 1 ? DType::f16 : DType::bf16);
        p.return_lse = true;
        if (variant == 1) p.features.sinks = spread(p.heads, 2.f, 6.f), p.features.window_left = 128;
        if (variant == 2) p.top_left = true;
        if (variant == 3) p.types.kv = DType::e4m3, p.features.k_scale = p.features.v_scale = 0.0625f;
        const auto c = run_path(pc, p, 9700 + runs);
        const Outcome o = check_output(*c, 9700 + runs);
        const std::vector<float> got = c->lse_values();
        std::vector<float> ref_o(c->host.q.size()), ref(got.size());
        reference::paged_attention_all(c->host.params(), ref_o.data(), ref.data());
        std::vector<int64_t> idx(got.size());
        for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
        GateResult g, base2;
        gate_lse(g, got.data(), static_cast<int64_t>(got.size()), idx, ref.data(), 1e-3);
        std::vector<float> twice = got;
        for (float& x : twice) x *= 1.4426950408889634f;
        gate_lse(base2, twice.data(), static_cast<int64_t>(twice.size()), idx, ref.data(), 1e-3);
        ++runs;
        const std::string what = path_run_name(pc, d, variant);
        EXPECT_TRUE(o.within) << what << ": " << o.worst;
        EXPECT_TRUE(g.failed.empty()) << what << ": lse error " << g.lse_max_err;
        EXPECT_FALSE(base2.failed.empty()) << what << ": the LSE in base 2 passes";
      }
  std::printf("  %d return_lse runs\n", runs);
}

// The 8-bit kernels round Q to fp16 for their mma: a bf16 Q beyond fp16's range saturates (its row stays finite),
// and a NaN stays NaN (its row is not finite), whichever the decode or prefill kernel.
TEST(CudaFeatures, EightBitPathsSaturateQButKeepItsNan) {
  for (const PathCase& pc : path_cases(128)) {
    if (pc.knobs.count("ATTNBENCH_SM90_PATH") && pc.shape.block_size % 64 != 0) continue;
    AttentionProblem p = problem_of(pc.shape, DType::bf16);
    p.types.kv = DType::e4m3;
    p.features.k_scale = p.features.v_scale = 0.0625f;
    DeviceCase c(p, pc.knobs, 7500);
    const int64_t stride = static_cast<int64_t>(p.heads) * p.head_size;
    uint16_t* q = c.host.q.halves();
    q[0 * stride + 0 * p.head_size + 5] = 0x7FC0;                        // token 0, head 0: NaN
    q[0 * stride + 1 * p.head_size + 9] = float_to_half(1e5f, DType::bf16);  // token 0, head 1: past 65504
    c.q.upload(q, c.host.q.bytes());
    cuda::Stream stream;
    c.poison();
    c.run(stream.get());
    stream.synchronize();
    std::vector<uint16_t> out(c.out_elems());
    c.out.download(out.data(), out.size() * 2);
    int64_t nan_row = 0, big_row = 0, other = 0;
    for (int64_t t = 0; t < p.total_q(); ++t)
      for (int h = 0; h < p.heads; ++h)
        for (int d = 0; d < p.head_size; ++d) {
          const bool finite = std::isfinite(half_to_float(out[c.out_index(t, h, d)], DType::bf16));
          if (t == 0 && h == 0) nan_row += !finite;
          else if (t == 0 && h == 1) big_row += !finite;
          else other += !finite;
        }
    const std::string what = pc.shape.name + knobs_text(pc);
    EXPECT_EQ(nan_row, p.head_size) << what << ": a NaN in Q must reach its row";
    EXPECT_EQ(big_row, 0) << what << ": a bf16 Q past 65504 saturates";
    EXPECT_EQ(other, 0) << what;
  }
}

}  // namespace
}  // namespace attnbench::gputest
