// cuda.unified kernel instances: the key each plan runs, the lookup, and the "no instance" decline. Host code: the
// key logic runs in every build; with the CUDA backend, the generated table (instances.cmake) is checked too.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "../kernels/cuda/heuristics.hpp"
#include "../kernels/cuda/resolve.hpp"

#ifdef ATTNBENCH_WITH_CUDA
#include "../kernels/cuda/launch.hpp"
#include "../kernels/cuda/bwd_workspace.hpp"
#include "../kernels/cuda/unified_bwd.hpp"
#include "attnbench/backends.hpp"
#endif

namespace attnbench::cuda {
namespace {

KnobValues knobs(std::map<std::string, std::string> o = {}) { return KnobValues::resolve(o, /*read_env=*/false); }

AttentionProblem problem(DType dt, int d, int q, int kv) {
  AttentionProblem p;
  p.q_lens = {q};
  p.kv_lens = {kv};
  p.heads = p.kv_heads = 8;
  p.head_size = d;
  p.types = AttentionTypes::all(dt);
  return p;
}

struct InstanceCase {
  AttentionProblem p;
  KnobValues k;
  std::string key;
};

AttentionProblem with_softcap(AttentionProblem p) {
  p.features.softcap = 30.f;
  return p;
}

AttentionProblem with_kv(AttentionProblem p, DType kv) {
  p.types.kv = kv;
  p.features.k_scale = 0.5f;
  return p;
}

// Every instance a plan can ask for, each reached through the knobs: per dtype and head size the narrow kernel's
// warp shapes, the wide kernel's warpgroup counts, and decode; the features instances of the narrow kernel's
// default shape, of the wide kernel's (two warpgroups) and of decode, per head size and, at d128, of the narrow
// kernel and decode per 8-bit K/V dtype, and the FP8 SDPA's (Q in the cache's codes) of the wide kernel (d128 and
// d256) and decode.
std::vector<InstanceCase> instance_family() {
  std::vector<InstanceCase> cases;
  for (DType dt : {DType::bf16, DType::f16}) {
    for (int d : {64, 128, 256}) {
      const std::string head = std::string(dtype_name(dt)) + "/d" + std::to_string(d);
      for (const std::string w : {"4", "8", "4x32"}) {
        // 4x32 at d256 is the same 128-row tile as 8 x 16 (no 32-row kernel there).
        const std::string shape = w != "4x32" ? "w" + w + "r16" : d <= 128 ? "w4r32" : "w8r16";
        cases.push_back({problem(dt, d, 2048, 2048),
                         knobs({{"ATTNBENCH_SM90_PATH", "narrow"}, {"ATTNBENCH_SM90_NARROW_WARPS", w}}),
                         "narrow/" + head + "/" + shape});
      }
      for (int wgs = 1; wgs <= (d == 64 ? 3 : 2); ++wgs)
        cases.push_back({problem(dt, d, 2048, 2048),
                         knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", std::to_string(wgs)}}),
                         "wide/" + head + "/wgs" + std::to_string(wgs)});
      cases.push_back({problem(dt, d, 1, 4096), knobs(), "decode/" + head});
      const std::string narrow_default = d <= 128 ? "/w4r32/feat" : "/w8r16/feat";
      cases.push_back({with_softcap(problem(dt, d, 2048, 2048)), knobs({{"ATTNBENCH_SM90_PATH", "narrow"}}),
                       "narrow/" + head + narrow_default});
      cases.push_back({with_softcap(problem(dt, d, 2048, 2048)), knobs(), "wide/" + head + "/wgs2/feat"});
      cases.push_back({with_softcap(problem(dt, d, 1, 4096)), knobs(), "decode/" + head + "/feat"});
    }
    for (DType kv : {DType::e4m3, DType::e5m2}) {
      const std::string head = std::string(dtype_name(dt)) + "-" + dtype_name(kv) + "/d128";
      cases.push_back({with_kv(problem(dt, 128, 2048, 2048), kv), knobs({{"ATTNBENCH_SM90_PATH", "narrow"}}),
                       "narrow/" + head + "/w4r32/feat"});
      cases.push_back({with_kv(problem(dt, 128, 1, 4096), kv), knobs(), "decode/" + head + "/feat"});
      cases.push_back({with_kv(problem(dt, 128, 2048, 2048), kv), knobs(), "wide/" + head + "/wgs2/feat"});
      for (int q : {2048, 1}) {
        AttentionProblem q8 = with_kv(problem(dt, 128, q, 4096), kv);
        q8.types.q = kv;
        cases.push_back({q8, knobs(), (q > 1 ? "wide/" + head + "/wgs2" : "decode/" + head) + "/feat/q8"});
      }
      AttentionProblem q8 = with_kv(problem(dt, 256, 2048, 4096), kv);  // the wide FP8 SDPA at d256
      q8.types.q = kv;
      cases.push_back({q8, knobs(), "wide/" + std::string(dtype_name(dt)) + "-" + dtype_name(kv) + "/d256/wgs2/feat/q8"});
    }
  }
  return cases;
}

// The key resolve() picks with every instance built.
InstanceKey key_in(const AttentionProblem& p, const KnobValues& k) {
  return resolve(p, UnifiedKnobs::parse(k), DeviceInfo{}, [](const InstanceKey&) { return true; }).instance.key;
}

std::string key_of(const AttentionProblem& p, const KnobValues& k) { return instance_name(key_in(p, k)); }

TEST(CudaInstances, KeyOfEachPlan) {
  std::set<std::string> keys;
  for (const InstanceCase& c : instance_family()) {
    EXPECT_EQ(key_of(c.p, c.k), c.key);
    keys.insert(c.key);
  }
  EXPECT_EQ(keys.size(), 78u);  // per dtype: narrow 3 + 3 + 2, wide 3 + 2 + 2, decode 3, features 3 x 3 + 2 x 6
  // The default knobs: short d64 prompts on the narrow 4 x 32 kernel, long ones wide with 3 warpgroups (2 with a
  // Q prologue), d128 wide with 2, the short-q / long-KV shape on the decode kernel.
  EXPECT_EQ(key_of(problem(DType::bf16, 64, 100, 100), knobs()), "narrow/bf16/d64/w4r32");
  EXPECT_EQ(key_of(problem(DType::f16, 256, 100, 100), knobs()), "narrow/fp16/d256/w8r16");
  EXPECT_EQ(key_of(problem(DType::bf16, 64, 4096, 4096), knobs()), "wide/bf16/d64/wgs3");
  AttentionProblem prologue = problem(DType::bf16, 64, 4096, 4096);
  prologue.fusion.q_norm = true;
  EXPECT_EQ(key_of(prologue, knobs()), "wide/bf16/d64/wgs2");
  EXPECT_EQ(key_of(problem(DType::f16, 128, 2048, 2048), knobs()), "wide/fp16/d128/wgs2");
  EXPECT_EQ(key_of(problem(DType::bf16, 128, 4, 4096), knobs()), "decode/bf16/d128");
  // A feature-flagged prefill runs the wide kernel's features instance, at two warpgroups, an 8-bit cache too;
  // below the wide kernel's range an 8-bit cache runs narrow.
  EXPECT_EQ(key_of(with_softcap(problem(DType::bf16, 64, 4096, 4096)), knobs()), "wide/bf16/d64/wgs2/feat");
  EXPECT_EQ(key_of(with_kv(problem(DType::bf16, 128, 4096, 4096), DType::e4m3), knobs()),
            "wide/bf16-e4m3/d128/wgs2/feat");
  EXPECT_EQ(key_of(with_kv(problem(DType::bf16, 128, 100, 100), DType::e4m3), knobs()),
            "narrow/bf16-e4m3/d128/w4r32/feat");
  EXPECT_EQ(key_of(with_kv(problem(DType::f16, 128, 1, 4096), DType::e5m2), knobs()), "decode/fp16-e5m2/d128/feat");
}

TEST(CudaInstances, LookupAndTheNoInstanceDecline) {
  struct Entry {
    InstanceKey key;
    int id;
  };
  const InstanceKey wide2{InstanceVariant::wide, DType::bf16, 128, 0, 0, 2, DType::bf16, false};
  const InstanceKey wide3{InstanceVariant::wide, DType::bf16, 128, 0, 0, 3, DType::bf16, false};
  const InstanceKey narrow{InstanceVariant::narrow, DType::f16, 64, 4, 32, 0, DType::f16, false};
  const InstanceKey decode{InstanceVariant::decode, DType::bf16, 128, 0, 0, 0, DType::bf16, false};
  const Entry table[] = {{narrow, 1}, {wide2, 2}, {decode, 3}};
  ASSERT_NE(find_instance(std::begin(table), std::end(table), wide2), nullptr);
  EXPECT_EQ(find_instance(std::begin(table), std::end(table), wide2)->id, 2);
  EXPECT_EQ(find_instance(std::begin(table), std::end(table), narrow)->id, 1);
  EXPECT_EQ(find_instance(std::begin(table), std::end(table), wide3), nullptr);
  const InstanceKey other_dtype{InstanceVariant::narrow, DType::bf16, 64, 4, 32, 0, DType::bf16, false};
  EXPECT_EQ(find_instance(std::begin(table), std::end(table), other_dtype), nullptr);
  InstanceKey feat = decode;  // the features instance is another key, and so is an 8-bit cache's
  feat.features = true;
  EXPECT_EQ(find_instance(std::begin(table), std::end(table), feat), nullptr);
  feat.kv = DType::e4m3;
  EXPECT_EQ(instance_name(feat), "decode/bf16-e4m3/d128/feat");
  EXPECT_EQ(instance_name(narrow), "narrow/fp16/d64/w4r32");
  const Support s = no_instance(wide3);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.kind, DeclineKind::no_instance);
  EXPECT_EQ(s.reason, "no instance for wide/bf16/d128/wgs3 in this build");
  EXPECT_EQ(Support::no("head_size 96").kind, DeclineKind::unsupported);
}

#ifdef ATTNBENCH_WITH_CUDA
// The generated table against the keys: CMake's parse of each key is the key the C++ side names, each entry has
// the launcher of its variant, no key twice, none that no plan can ask for, and all of them in an "all" build.
TEST(CudaInstances, GeneratedTableMatchesTheKeys) {
  const InstanceTable t = built_instances();
  std::set<std::string> family, built;
  for (const InstanceCase& c : instance_family()) family.insert(c.key);
  for (const InstanceLauncher* e = t.begin; e != t.end; ++e) {
    EXPECT_EQ(instance_name(e->key), e->name);
    EXPECT_EQ(e->wide != nullptr, e->key.variant == InstanceVariant::wide) << e->name;
    EXPECT_EQ(e->plain != nullptr, e->key.variant != InstanceVariant::wide) << e->name;
    EXPECT_TRUE(built.insert(e->name).second) << e->name << " twice";
    EXPECT_EQ(family.count(e->name), 1u) << e->name << " is not a key any plan asks for";
    EXPECT_EQ(find_instance(t.begin, t.end, e->key), e);
  }
  EXPECT_FALSE(built.empty());
  if (std::string(built_instance_selection()) == "all") {
    EXPECT_EQ(built, family);
  }
}

// Each key: a built one plans; one left out of the build is declined as no_instance naming it, and plan() throws
// the same reason.
TEST(CudaInstances, UnifiedDeclinesKeysTheBuildLacks) {
  const InstanceTable t = built_instances();
  const auto k = make_cuda_unified();
  for (const InstanceCase& c : instance_family()) {
    const bool has = find_instance(t.begin, t.end, key_in(c.p, c.k));
    const Support s = k->supports(c.p, c.k);
    EXPECT_EQ(s.ok, has) << c.key << ": " << s.reason;
    if (has) {
      EXPECT_NO_THROW(k->plan(c.p, c.k)) << c.key;
      continue;
    }
    EXPECT_EQ(s.kind, DeclineKind::no_instance) << c.key;
    EXPECT_EQ(s.reason, "no instance for " + c.key + " in this build");
    try {
      k->plan(c.p, c.k);
      ADD_FAILURE() << c.key << ": plan() without an instance";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "cuda.unified: " + s.reason);
    }
  }
  // Other declines keep their kind.
  const Support d96 = k->supports(problem(DType::bf16, 96, 8, 8), knobs());
  EXPECT_FALSE(d96.ok);
  EXPECT_EQ(d96.kind, DeclineKind::unsupported);
}

// The backward splits a GQA group's heads over CTAs until the grid has kBwdTargetCtas of them (a divisor of
// the group, at most all of it), and never an MHA problem's; the split's fp32 dK/dV take workspace only when split.
TEST(CudaUnifiedBwd, GroupSplitsFillTheGridWithDivisorsOfTheGroup) {
  const auto params = [](int heads, int kv_heads, int d, int batch, int seqlen) {
    AttentionBwdParams a;
    a.heads = heads, a.kv_heads = kv_heads, a.head_size = d, a.num_seqs = batch, a.max_seqlen_k = seqlen;
    a.total_q = a.total_k = static_cast<int64_t>(batch) * seqlen;
    return a;
  };
  EXPECT_EQ(bwd_group_splits(params(32, 2, 256, 1, 2048)), 8);    // 32 tiles x 2 chunks x 2 kv heads = 128 CTAs
  EXPECT_EQ(bwd_group_splits(params(16, 1, 256, 4, 4096)), 2);    // 512 CTAs
  EXPECT_EQ(bwd_group_splits(params(16, 1, 256, 1, 512)), 16);    // 16 CTAs: the whole group
  EXPECT_EQ(bwd_group_splits(params(12, 4, 256, 1, 512)), 3);     // 48 CTAs, a group of 3
  EXPECT_EQ(bwd_group_splits(params(8, 8, 256, 1, 1024)), 1);     // MHA
  EXPECT_EQ(bwd_group_splits(params(32, 4, 256, 8, 8192)), 1);    // 16384 CTAs already
  // The wgmma kernel's 128-key tiles, one chunk: the backward group's GQA rows.
  EXPECT_EQ(bwd_group_splits(params(32, 4, 128, 4, 4096), 128, 1, kBwdWgmmaTargetCtas), 4);  // 512 CTAs
  EXPECT_EQ(bwd_group_splits(params(32, 2, 128, 2, 8192), 128, 1, kBwdWgmmaTargetCtas), 8);  // 256 CTAs
  EXPECT_EQ(bwd_group_splits(params(32, 2, 256, 1, 8192), 64, 1, kBwdWgmmaTargetCtas), 8);   // the gated S8192
  const AttentionBwdParams a = params(32, 2, 256, 1, 2048);
  EXPECT_EQ(bwd_workspace_bytes(a, 8) - bwd_workspace_bytes(a, 1), 2 * bwd_align256(bwd_dkdv_acc_bytes(a)));
  EXPECT_EQ(bwd_dkdv_acc_bytes(a), 2048u * 2 * 256 * 4);
}

// ATTNBENCH_SM90_BWD_SPLITS overrides the heuristic's split in the plan (its summary and workspace) and a count that
// does not divide the group is declined, naming the knob, the count and the group.
TEST(CudaUnifiedBwd, TheSplitKnobSizesThePlanAndDeclinesNonDivisors) {
  const auto k = make_cuda_unified_bwd();
  AttentionProblem p = problem(DType::bf16, 128, 4096, 4096);
  p.q_lens = p.kv_lens = {4096, 4096, 4096, 4096};
  p.heads = 32;
  p.kv_heads = 4;
  const auto heuristic = k->plan(p, knobs());  // the wgmma path's 512 CTAs: 4
  EXPECT_NE(heuristic->summary.find("group split 4 (2 heads a CTA"), std::string::npos) << heuristic->summary;
  const auto unsplit = k->plan(p, knobs({{"ATTNBENCH_SM90_BWD_SPLITS", "1"}}));
  EXPECT_EQ(unsplit->summary.find("group split"), std::string::npos) << unsplit->summary;
  EXPECT_EQ(heuristic->workspace_bytes - unsplit->workspace_bytes,
            2 * bwd_align256(bwd_dkdv_acc_bytes(make_attention_bwd_params(p))));
  const auto mma = k->plan(p, knobs({{"ATTNBENCH_SM90_BWD_PATH", "mma"}, {"ATTNBENCH_SM90_BWD_SPLITS", "8"}}));
  EXPECT_NE(mma->summary.find("group split 8 (1 head a CTA"), std::string::npos) << mma->summary;
  const Support s = k->supports(p, knobs({{"ATTNBENCH_SM90_BWD_SPLITS", "3"}}));
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.reason, "ATTNBENCH_SM90_BWD_SPLITS=3 does not divide the GQA group of 8 query heads per kv head");
}
#endif

}  // namespace
}  // namespace attnbench::cuda
