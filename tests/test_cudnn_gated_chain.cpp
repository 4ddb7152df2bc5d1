// cudnn.gated_chain where no device is needed: its registry entry, the fusion options it clears (a fusion is never
// why it declines), "no CUDA device" as a decline of cudnn.sdpa, and cudnn.sdpa planned on the caller's strides
// (make_cudnn_sdpa_on), which the chain's SDPA is. Built only with cudnn.sdpa.
#include <gtest/gtest.h>

#include <string>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "cases/registry.hpp"
#include "cli_helpers.hpp"
#include "cuda/runtime.hpp"
#include "cudnn/sdpa.hpp"
#include "gated_test_helpers.hpp"

using namespace attnbench;
using namespace attnbench::gatedtest;

namespace {

GatedOptions both_fusions() {
  GatedOptions o;
  o.fuse_gate = o.fuse_norm_rope = true;
  return o;
}

#define SKIP_WITH_DEVICE() \
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible (the GPU tests run the chain)"

}  // namespace

TEST(CudnnGatedChain, IsRegisteredAsAGatedBlockKernelAndListed) {
  const KernelEntry* entry = nullptr;
  for (const auto& k : kernel_registry())
    if (k.name == "cudnn.gated_chain") entry = &k;
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->backend, Backend::cuda);
  EXPECT_EQ(entry->op, Op::gated_block);
  ASSERT_NE(entry->gated, nullptr);
  EXPECT_EQ(entry->gated->name(), "cudnn.gated_chain");
  EXPECT_NE(entry->description.find("vendor chain, unfused"), std::string::npos) << entry->description;
  const testcli::Result r = testcli::run_cli("list --kernels");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(entry->description), std::string::npos) << r.output;
}

// Both fusions asked for: the decline is cudnn.sdpa's (no device), never fuse_gate or fuse_norm_rope, though
// cudnn.sdpa has neither the gate epilogue nor the Q prologue.
TEST(CudnnGatedChain, FusionsAreClearedSoTheDeclineIsTheSdpas) {
  SKIP_WITH_DEVICE();
  const GatedGeometry g(small_dims(128, 2));
  const auto chain = make_cudnn_gated_chain();
  for (bool fuse : {false, true}) {
    GatedOptions o = fuse ? both_fusions() : plain_options();
    const Support s = chain->supports(g, o, knobs());
    EXPECT_FALSE(s.ok);
    EXPECT_EQ(s.reason, "field 'sdpa': cudnn.sdpa declines: no CUDA device");
    EXPECT_EQ(decline_field([&] { chain->create(g, o, knobs()); }), "sdpa");
  }
  // The common rules still apply before the SDPA is asked.
  const GatedGeometry odd(small_dims(100, 2));
  EXPECT_EQ(decline_field([&] { chain->create(odd, both_fusions(), knobs()); }), "seqlen");
}

// The chain's SDPA is planned on the projection's strides: a layout it cannot take is declined by name before the
// device is asked, while the block's own layout raises nothing on the host.
TEST(CudnnGatedChain, TheSdpaIsPlannedOnTheGivenStrides) {
  SKIP_WITH_DEVICE();
  const GatedGeometry g(small_dims(128, 2));
  const GatedOptions o = plain_options();
  const AttentionProblem p = gated_sdpa_problem(g, o, gated_block_size(g));
  AttentionParams layout = gated_sdpa_strides(g, o, p);
  EXPECT_EQ(make_cudnn_sdpa_on(layout)->supports(p, knobs()).reason, "no CUDA device");
  layout.block_table_stride = p.max_blocks_per_seq() - 1;
  const Support s = make_cudnn_sdpa_on(layout)->supports(p, knobs());
  EXPECT_NE(s.reason.find("block_table_stride 1 is below the 2 blocks"), std::string::npos) << s.reason;
  EXPECT_EQ(make_cudnn_sdpa()->supports(p, knobs()).reason, "no CUDA device");
}

TEST(CudnnGatedChain, RunRowsWithoutADeviceAreDeclined) {
  SKIP_WITH_DEVICE();
  const std::string out = testcli::tmp_path("cudnn_chain.json");
  const auto r = testcli::run_cli("run --shapes " ATTNBENCH_SOURCE_DIR "/tests/data/gated_small.json --kernel "
                                  "cudnn.gated_chain --backend cuda --mode eager --gate-only -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto doc = testcli::read_json(out);
  ASSERT_FALSE(doc["rows"].empty());
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["kernel"], "cudnn.gated_chain") << row.dump();
    EXPECT_EQ(row["status"], "declined") << row.dump();
    EXPECT_NE(row["reason"].get<std::string>().find("no CUDA device"), std::string::npos) << row.dump();
  }
}
