// cuda.unified at serving scale on the GPU: K/V caches past 2^31 elements (the case's blocks spread over a
// 5 * 2^31-element pool per cache, 43 GB for both, the pool's last block read) through decode, speculative decode
// and both prefill paths; and block tables naming 32768 blocks at random, repeatedly (BlockOrder::repeated).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gpu_case.hpp"
#include "gpu_check.hpp"
#include "gpu_shape.hpp"

namespace attnbench::gputest {
namespace {

struct ScaleRun {
  Shape shape;
  std::map<std::string, std::string> knobs;
};

void expect_passes(const ScaleRun& r, CaseLayout lay, BlockOrder order, uint64_t seed) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const auto o = run_and_check(r.shape, dt, r.knobs, seed, lay, order);
    std::printf("  %-44s %s pool=%lld%s rows=%lld max_abs=%.3g row_rel=%.3g\n", r.shape.name.c_str(),
                dtype_name(dt), static_cast<long long>(lay.pool_blocks),
                r.knobs.empty() ? "" : (" " + r.knobs.begin()->second).c_str(), static_cast<long long>(o.rows),
                o.max_abs, o.max_row_rel);
    EXPECT_EQ(o.nonfinite, 0) << r.shape.name << ": unwritten or non-finite outputs";
    EXPECT_TRUE(o.within) << r.shape.name << ": " << o.worst;
  }
}

TEST(CudaScale, CachesPastTwoToThe31ElementsPassTheGate) {
  const std::vector<ScaleRun> runs = {
      {{"decode d128 h32kv8 b8 kv16384 bs16", uniform(8, 1, 16384), 32, 8, 128, true, 16}, {}},
      {{"decode d128 h32kv8 b8 kv16384 bs16", uniform(8, 1, 16384), 32, 8, 128, true, 16},
       {{"ATTNBENCH_3D_SPLITS", "1"}}},
      {{"decode d128 h32kv8 b8 kv16384 bs16", uniform(8, 1, 16384), 32, 8, 128, true, 16},
       {{"ATTNBENCH_3D_SPLITS", "16"}}},
      {{"decode d256 h32kv2 b2 kv20000 bs16", uniform(2, 1, 20000), 32, 2, 256, true, 16}, {}},
      {{"spec d128 h32kv8 b2 (q8,kv8192) bs64", uniform(2, 8, 8192), 32, 8, 128, true, 64}, {}},
      {{"prefill d128 h8kv8 b2 s1024 bs16", uniform(2, 1024, 1024), 8, 8, 128, true, 16},
       {{"ATTNBENCH_SM90_PATH", "narrow"}}},
      {{"prefill d128 h8kv2 b2 s1024 bs64 (tma)", uniform(2, 1024, 1024), 8, 2, 128, true, 64},
       {{"ATTNBENCH_SM90_PATH", "wide"}}},
  };
  for (const ScaleRun& r : runs) {
    const int64_t block_elems = static_cast<int64_t>(r.shape.block_size) * r.shape.kv_heads * r.shape.head_size;
    CaseLayout lay;
    lay.pool_blocks = (int64_t{5} << 31) / block_elems;  // at least 2^16 blocks for every shape here
    ASSERT_GE(lay.pool_blocks, int64_t{1} << 16);
    expect_passes(r, lay, BlockOrder::shuffled, 4242);
  }
}

// A serving engine's tables: 32768 blocks, every inner slot a random block (shared within and across sequences).
TEST(CudaScale, RepeatedRandomTablesOver32768Blocks) {
  const std::vector<ScaleRun> runs = {
      {{"decode d128 h32kv8 b8 kv65536 bs16", uniform(8, 1, 65536), 32, 8, 128, true, 16}, {}},
      {{"decode d128 h32kv8 b8 kv65536 bs16", uniform(8, 1, 65536), 32, 8, 128, true, 16},
       {{"ATTNBENCH_3D_SPLITS", "9"}}},
      {{"spec d128 h32kv8 b4 (q4,kv131072) bs16", uniform(4, 4, 131072), 32, 8, 128, true, 16}, {}},
      {{"prefill d128 h8kv2 b2 (q256,kv262144) bs16", uniform(2, 256, 262144), 8, 2, 128, true, 16}, {}},
  };
  for (const ScaleRun& r : runs) {
    const AttentionProblem p = problem_of(r.shape, DType::bf16);
    ASSERT_EQ(p.num_blocks(), 32768) << r.shape.name;
    expect_passes(r, {}, BlockOrder::repeated, 31337);
  }
}

}  // namespace
}  // namespace attnbench::gputest
