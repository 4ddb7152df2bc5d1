// The gated block's workspace: the layout's arithmetic, the projection padded to whole cache blocks (an SDPA that
// reads whole pages of the view stays inside it), the memory estimate covering every block size, and
// cpu.gated_block zeroing the pad rows on every call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "gated_cpu_run.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

using namespace gatedtest;

TEST(GatedWorkspace, LayoutArithmetic) {
  const GatedGeometry g(small_dims());
  const GatedWorkspaceLayout l = gated_workspace_layout(g, 64, 1000, 4096);
  EXPECT_EQ(l.proj, 0u);
  EXPECT_EQ(l.proj_rows, 128);                 // 100 tokens in two blocks of 64
  EXPECT_EQ(l.attn, 128u * 768 * 2);           // 196608, already 256-aligned
  EXPECT_EQ(l.sdpa, l.attn + 100u * 256 * 2);  // 247808
  EXPECT_EQ(l.cu_seqlens_q, l.sdpa + 1024u);   // 1000 rounded up to 256
  EXPECT_EQ(l.seqused_k, l.cu_seqlens_q + 256u);
  EXPECT_EQ(l.block_table, l.seqused_k + 256u);
  EXPECT_EQ(l.blocks_per_seq, 2);
  EXPECT_EQ(l.gemm, l.block_table + 256u);
  EXPECT_EQ(l.total, l.gemm + 4096u);
  EXPECT_EQ(l.pad_offset(g), 100u * 768 * 2);
  EXPECT_EQ(l.pad_bytes(g), 28u * 768 * 2);
  for (std::size_t off : {l.attn, l.sdpa, l.cu_seqlens_q, l.seqused_k, l.block_table, l.gemm})
    EXPECT_EQ(off % kGatedWorkspaceAlign, 0u);
  EXPECT_EQ(l.gated, l.total);  // no gate pass: no bytes
  // A separate gate pass writes the gated O after everything else: O itself stays the SDPA's.
  const GatedWorkspaceLayout sep = gated_workspace_layout(g, 64, 1000, 4096, false, true);
  EXPECT_EQ(sep.gated, l.total);
  EXPECT_EQ(sep.total, l.total + 100u * 256 * 2);
  // cpu.gated_block: no GEMM workspace, and cpu.unified's prefill path needs none either; its gate is a pass.
  const auto block = make_cpu_gated_block()->create(g, plain_options(), knobs());
  EXPECT_EQ(block->workspace_size(), gated_workspace_layout(g, 64, 0, 0, false, true).total);
  EXPECT_EQ(gated_block_size(GatedGeometry(small_dims(100, 1))), 64);
  EXPECT_EQ(gated_block_size(GatedGeometry(small_dims(96, 2))), 32);
  EXPECT_EQ(gated_block_size(GatedGeometry(small_dims(100, 2))), 0);
}

// Every page the identity block table names, read whole (as cuDNN reads them), ends inside the projection region:
// with one sequence the last block is partial (S 100, 300) and the projection is padded to it.
TEST(GatedWorkspace, EveryPageOfTheViewLiesInsideTheProjection) {
  struct Case {
    int seqlen, batch;
    int64_t rows;
  };
  for (const Case c : {Case{100, 1, 128}, Case{300, 1, 320}, Case{128, 1, 128}, Case{96, 2, 192}, Case{80, 2, 160}}) {
    const GatedGeometry g(small_dims(c.seqlen, c.batch));
    const int bs = gated_block_size(g);
    const GatedWorkspaceLayout l = gated_workspace_layout(g, bs, 0, 0);
    EXPECT_EQ(l.proj_rows, c.rows) << "S" << c.seqlen << " B" << c.batch;
    const int64_t last_block = static_cast<int64_t>(c.batch - 1) * c.seqlen / bs + l.blocks_per_seq - 1;
    const std::size_t row_bytes = static_cast<std::size_t>(g.n_qkvg()) * 2;
    const std::size_t pages_end = l.proj + static_cast<std::size_t>((last_block + 1) * bs) * row_bytes;
    EXPECT_LE(pages_end, l.proj + static_cast<std::size_t>(l.proj_rows) * row_bytes) << "S" << c.seqlen;
    EXPECT_LE(pages_end, l.attn) << "S" << c.seqlen << ": the last page reads past the projection";
    EXPECT_EQ(l.pad_offset(g) + l.pad_bytes(g), l.proj + static_cast<std::size_t>(l.proj_rows) * row_bytes);
  }
}

// The pad rows are zero after every call, though the caller's workspace held NaN there before it.
TEST(CpuGatedBlock, ZeroesThePadRowsOfTheProjectionEveryCall) {
  const GatedGeometry g(small_dims(100, 1));
  auto block = make_cpu_gated_block()->create(g, plain_options(false), knobs());
  const GatedWorkspaceLayout l = gated_workspace_layout(g, gated_block_size(g), 0, 0, false, true);
  ASSERT_EQ(block->workspace_size(), l.total);
  ASSERT_GT(l.pad_bytes(g), 0u);
  CpuRun r = run_cpu(g, *block, QGateLayout::flat);
  const auto pad_is_zero = [&] {
    const unsigned char* p = r.ws.data() + l.pad_offset(g);
    return std::all_of(p, p + l.pad_bytes(g), [](unsigned char b) { return b == 0; });
  };
  EXPECT_TRUE(pad_is_zero());
  const std::vector<uint16_t> first = r.out;
  std::memset(r.ws.data() + l.pad_offset(g), 0xFF, l.pad_bytes(g));
  block->execute(r.prm, nullptr);
  EXPECT_TRUE(pad_is_zero());
  EXPECT_EQ(r.out, first);
  std::memset(r.ws.data() + l.pad_offset(g), 0xFF, l.pad_bytes(g));
  block->execute_stage(0, r.prm, nullptr);  // the projection stage alone zeroes them too
  EXPECT_TRUE(pad_is_zero());
}

// Every stage is a function of the block's inputs and the stages before it, so a stage run again (as the breakdown
// times one, alone and repeatedly) leaves the next stages' result as it was: the separate gate pass and the FP8
// O quantisation run twice, then the out projection, give the first call's bits.
TEST(CpuGatedBlock, AStageRunAgainChangesNoLaterResult) {
  const GatedGeometry g(small_dims(100, 1));
  GatedOptions fp8 = plain_options();
  fp8.fp8 = gated_fp8_defaults(g.d_model(), g.attn_width());
  for (const GatedOptions& o : {plain_options(), fp8}) {
    auto block = make_cpu_gated_block()->create(g, o, knobs());
    CpuRun r = run_cpu(g, *block, QGateLayout::flat);
    const std::vector<uint16_t> first = r.out;
    const std::vector<std::string> names = block->stage_names();
    for (int again = 0; again < 2; ++again)
      for (int s = 0; s < static_cast<int>(names.size()); ++s)
        if (names[s] == "gate" || names[s] == "quantize_o") block->execute_stage(s, r.prm, nullptr);
    block->execute_stage(static_cast<int>(names.size()) - 1, r.prm, nullptr);
    EXPECT_EQ(r.out, first) << (o.fp8 ? "fp8" : "bf16") << ": a repeated stage changed the output";
  }
}

}  // namespace
}  // namespace attnbench
