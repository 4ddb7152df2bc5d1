// The resolve steps over the spread (resolve_spread.hpp): the outcomes of every problem x knob setting against a
// golden file, and supports() and plan() of cuda.unified and cpu.unified against resolve().
#include <gtest/gtest.h>
#include <omp.h>

#include "resolve_spread.hpp"

namespace attnbench {
namespace {

using namespace resolve_test;

// Path, geometry, splits, workspace, graph replay, instance and summary of every problem and knob setting of the
// spread, and every decline's text (tests/data). A deliberate change of the plans rewrites the file with
// ATTNBENCH_WRITE_GOLDEN=1 (the test then fails, to be run again); the diff is the review.
TEST(Resolve, SpreadMatchesTheGoldenOutcomes) {
  const char* path = ATTNBENCH_SOURCE_DIR "/tests/data/resolve_golden.txt";
  if (const char* w = std::getenv("ATTNBENCH_WRITE_GOLDEN"); w != nullptr && std::string(w) == "1") {
    std::ifstream old(path);
    std::string header, line;
    while (std::getline(old, line) && line.rfind("#", 0) == 0) header += line + "\n";
    std::ofstream(path) << header << golden_text(cuda_outcome, cpu_outcome);
    FAIL() << "rewrote " << path << ": review its diff, then run the test again";
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << "tests/data/resolve_golden.txt";
  std::stringstream golden;
  golden << f.rdbuf();
  const std::vector<std::string> want = lines_of(golden.str()), got = lines_of(golden_text(cuda_outcome, cpu_outcome));
  std::string block;
  for (std::size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    if (want[i].rfind("  ", 0) != 0) block = want[i];
    ASSERT_EQ(got[i], want[i]) << block << ", line " << i + 1;
  }
  EXPECT_EQ(got.size(), want.size());
}

// supports() is resolve()'s support and plan() builds resolve()'s instance, over the spread.
TEST(Resolve, CpuSupportsAndPlanFollowResolve) {
  const cpu::CpuDevice device{omp_get_max_threads()};
  for (const SpreadShape& s : spread_shapes())
    for (const CpuCase& c : cpu_spread()) {
      const KnobValues kv = values({{"ATTNBENCH_CPU_MAX_GFLOP", std::to_string(c.max_gflop)}});
      const auto kernel = make_cpu_unified(c.opts);
      const cpu::Resolution r = cpu::resolve(s.p, cpu::CpuKnobs::parse(kv), device, c.opts);
      const Support sup = kernel->supports(s.p, kv);
      EXPECT_EQ(sup.ok, r.ok()) << s.name << " " << c.code;
      EXPECT_EQ(sup.reason, r.support.reason) << s.name << " " << c.code;
      if (!r.ok()) {
        EXPECT_THROW(kernel->plan(s.p, kv), std::invalid_argument) << s.name << " " << c.code;
        continue;
      }
      const auto plan = kernel->plan(s.p, kv);
      EXPECT_EQ(plan->summary, r.instance.summary) << s.name << " " << c.code;
      EXPECT_EQ(plan->workspace_bytes, r.instance.workspace_bytes) << s.name << " " << c.code;
    }
}

#ifdef ATTNBENCH_WITH_CUDA
TEST(Resolve, CudaSupportsAndPlanFollowResolve) {
  DeviceInfo device;
  if (gpu::device_count() > 0) {
    const auto props = gpu::device_props(0);
    device = DeviceInfo{props.sm_count, props.cc_major * 10 + props.cc_minor};
  }
  const cuda::InstanceTable t = cuda::built_instances();
  const auto built = [&](const InstanceKey& k) { return cuda::find_instance(t.begin, t.end, k) != nullptr; };
  const auto kernel = make_cuda_unified();
  const std::vector<KnobCase> spread = knob_spread();
  for (const SpreadShape& s : spread_shapes())
    for (std::size_t i = 0; i < spread.size(); i += 7) {  // every 7th setting: a spread of each knob
      const KnobValues kv = values(spread[i].values);
      const cuda::Resolution r = cuda::resolve(s.p, UnifiedKnobs::parse(kv), device, built);
      const Support sup = kernel->supports(s.p, kv);
      EXPECT_EQ(sup.ok, r.ok()) << s.name << " " << spread[i].code;
      EXPECT_EQ(sup.reason, r.support.reason) << s.name << " " << spread[i].code;
      EXPECT_EQ(sup.kind, r.support.kind) << s.name << " " << spread[i].code;
      if (!r.ok()) {
        try {
          kernel->plan(s.p, kv);
          ADD_FAILURE() << s.name << " " << spread[i].code << ": plan() of a decline";
        } catch (const std::invalid_argument& e) {
          EXPECT_EQ(std::string(e.what()), "cuda.unified: " + r.support.reason);
        }
        continue;
      }
      const auto plan = kernel->plan(s.p, kv);
      EXPECT_EQ(plan->summary, r.instance.summary) << s.name << " " << spread[i].code;
      EXPECT_EQ(plan->workspace_bytes, r.instance.launch.workspace_bytes) << s.name << " " << spread[i].code;
      EXPECT_EQ(plan->graph_replay, r.instance.graph_replay) << s.name << " " << spread[i].code;
    }
}
#endif

}  // namespace
}  // namespace attnbench
