// The memory estimate decided before a case allocates: the decision and its message, and each op's estimate
// against what its inputs and buffers really take.
#include <gtest/gtest.h>

#include "cases/gated_case.hpp"
#include "cases/inputs.hpp"
#include "cases/memory_check.hpp"
#include "cases/registry.hpp"
#include "cases/shapes.hpp"

using namespace attnbench;

namespace {
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

const KernelEntry& kernel(const std::string& name) {
  for (const auto& k : kernel_registry())
    if (k.name == name) return k;
  throw std::runtime_error("no kernel " + name);
}

ShapeCase attention_shape(int q, int kv, int block_size) {
  ShapeCase c;
  c.op = Op::attention;
  c.attention.q_lens = {q, q};
  c.attention.kv_lens = {kv, kv};
  c.attention.heads = 8;
  c.attention.kv_heads = 2;
  c.attention.head_size = 64;
  c.attention.block_size = block_size;
  return c;
}
}  // namespace

TEST(MemoryCheck, DecisionNamesWhatIsNeededAndWhatIsAvailable) {
  const MemoryNeed need{12.3 * GiB, 2.0 * GiB};
  const Support host = memory_decision(need, 8.1 * GiB, 80.0 * GiB, false);
  EXPECT_FALSE(host.ok);
  EXPECT_EQ(host.reason, "needs 12.3 GiB of host memory, 8.1 GiB available");
  const Support dev = memory_decision({1.0 * GiB, 90.0 * GiB}, 64.0 * GiB, 80.0 * GiB, false);
  EXPECT_FALSE(dev.ok);
  EXPECT_EQ(dev.reason, "needs 90.0 GiB of device memory, 80.0 GiB available");
  EXPECT_TRUE(memory_decision({1.0 * GiB, 2.0 * GiB}, 4.0 * GiB, 4.0 * GiB, false).ok);
  // On the CPU backend the device's buffers are host memory too.
  const Support cpu = memory_decision({3.0 * GiB, 3.0 * GiB}, 4.0 * GiB, std::nullopt, true);
  EXPECT_FALSE(cpu.ok);
  EXPECT_EQ(cpu.reason, "needs 6.0 GiB of host memory, 4.0 GiB available");
  EXPECT_TRUE(memory_decision({1e18, 1e18}, std::nullopt, std::nullopt, false).ok) << "unknown: not checked";
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1.5 * 1024 * 1024), "1.5 MiB");
}

TEST(MemoryCheck, AttentionEstimateCoversItsInputsAndShrinksOncePrepared) {
  ShapeCase c = attention_shape(40, 300, 16);
  auto op = make_op_case(c);
  const KernelEntry& k = kernel("cpu.unified");
  CaseSettings s;
  const MemoryNeed before = op->memory_need(k, s);
  const HostInputs in = build_inputs(c.attention, s.seed);
  const double input_bytes = 2.0 * (in.q.size() + in.k_cache.size() + in.v_cache.size()) +
                             4.0 * (in.cu_seqlens_q.size() + in.seqused_k.size() + in.block_table.size());
  const double out_bytes = 2.0 * in.q.size();
  EXPECT_GE(before.host_bytes, input_bytes + out_bytes);
  EXPECT_GE(before.device_bytes, input_bytes + out_bytes);
  EXPECT_LE(before.device_bytes, 4 * (input_bytes + out_bytes)) << "a bound, not a wild guess";
  op->prepare(s, nullptr);
  const MemoryNeed after = op->memory_need(k, s);
  EXPECT_DOUBLE_EQ(after.host_bytes, out_bytes) << "prepared inputs are not counted again";
  EXPECT_DOUBLE_EQ(after.device_bytes, before.device_bytes);
  // The cache grows with the block size even past the sequence length.
  EXPECT_GT(make_op_case(attention_shape(40, 300, 65536))->memory_need(k, s).host_bytes, 100 * before.host_bytes);
}

TEST(MemoryCheck, DecodeWorkspaceIsBoundedAndPrefillHoldsAWalkTable) {
  AttentionProblem decode = attention_shape(1, 4096, 64).attention;
  EXPECT_GT(attention_workspace_bound(decode), 0);
  EXPECT_LE(attention_workspace_bound(decode), 128.0 * 2 * 8 * 66 * 4 + 1024);
  const AttentionProblem prefill = attention_shape(2048, 2048, 64).attention;
  const double walk = attention_workspace_bound(prefill);
  EXPECT_GE(walk, (132 + 1 + prefill.num_seqs() * prefill.heads * 2048 / 64) * 4.0);  // the L2 walk's table
  EXPECT_LE(walk, 64 * 1024.0) << "a few KiB, not a split path's partials";
}

TEST(MemoryCheck, GatedEstimateCoversTheBlocksBuffers) {
  const auto cases = load_shape_file(ATTNBENCH_SOURCE_DIR "/tests/data/gated_small.json");
  const ShapeCase& c = cases.at(0);
  const KernelEntry& k = kernel("cpu.gated_block");
  const KnobValues knobs = KnobValues::resolve({}, false);
  const GatedGeometry g = gated_geometry(c.gated, c.dtype);
  const auto block = k.gated->create(g, gated_options(c.gated, knobs), knobs);
  const double t = static_cast<double>(g.tokens()), dm = g.d_model();
  const double buffers = 2.0 * (2 * t * dm + static_cast<double>(g.n_qkvg()) * dm + dm * g.attn_width() +
                                2 * t * g.rope_dim() + 2 * g.d_head());
  const MemoryNeed need = make_op_case(c)->memory_need(k, CaseSettings{});
  EXPECT_GE(need.device_bytes, buffers + static_cast<double>(block->workspace_size()));
  EXPECT_GE(need.host_bytes, buffers);
}

TEST(MemoryCheck, FailedDeviceAllocationReadsAsOutOfMemory) {
  const std::string cuda = "runtime.cpp:42: cudaMalloc(&p, bytes): cudaErrorMemoryAllocation (out of memory)";
  EXPECT_EQ(attnbench::allocation_failure_reason(cuda).rfind("out of memory: a device allocation failed", 0), 0u);
  EXPECT_NE(attnbench::allocation_failure_reason(cuda).find(cuda), std::string::npos);
  EXPECT_EQ(attnbench::allocation_failure_reason("plan: bad split"), "plan: bad split");
}
