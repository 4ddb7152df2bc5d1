// cudnn.gated_chain on the GPU against the fp32 reference, the gate and tolerance of cuda.gated_block's test: both
// fusions asked for and cleared (five stages, the summary says so), both W_qkvg layouts, one and two sequences,
// causal and not, d128 (cuDNN must take it) and d256 (a decline prints cuDNN's reason); out and the workspace
// poisoned. S 300 in one sequence leaves its last cache block partial: the pad rows
// of the projection, poisoned between calls, must not reach the output. The unified node, forced, gates on the
// non-causal two-sequence view. Then a CUDA graph of the block replays the eager call's output.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gated_case.hpp"
#include "cuda/runtime.hpp"
#include "gated_gpu_block.hpp"

namespace attnbench::gputest {
namespace {

struct ChainCase {
  GatedDims dims;
  QGateLayout layout;
  bool causal, required;
};

std::vector<ChainCase> chain_cases() {
  return {
      {gated_test_dims(2, 256, 8, 2, 128, 32, DType::bf16), QGateLayout::flat, true, true},
      {gated_test_dims(1, 300, 8, 1, 128, 64, DType::f16), QGateLayout::interleaved, true, true},
      {gated_test_dims(2, 160, 8, 2, 128, 32, DType::bf16), QGateLayout::flat, false, true},
      {gated_test_dims(1, 300, 8, 1, 256, 64, DType::bf16), QGateLayout::interleaved, true, false},
  };
}

const KnobValues& knobs() {
  static const KnobValues k = KnobValues::resolve({}, false);
  return k;
}

const KnobValues& unified_knobs() {
  static const KnobValues k = KnobValues::resolve({{"ATTNBENCH_CUDNN_IMPL", "unified"}}, false);
  return k;
}

// The options asked of the chain: the case's, with both fusions on (the chain must clear them).
GatedOptions asked_options(const ChainCase& c) {
  GatedOptions o;
  o.is_causal = c.causal;
  o.q_gate_layout = c.layout;
  o.fuse_gate = o.fuse_norm_rope = true;
  return o;
}

// Whether the chain takes the case: a decline prints cuDNN's reason and fails only a required case.
bool chain_takes(const GatedBlockKernel& chain, const GatedGeometry& g, const ChainCase& c,
                 const KnobValues& k = knobs()) {
  const Support s = chain.supports(g, asked_options(c), k);
  if (s.ok) return true;
  std::printf("  chain d%d B%d S%d %s declined: %s\n", g.d_head(), g.batch(), g.seqlen(), dtype_name(g.dtype()),
              s.reason.c_str());
  if (c.required) ADD_FAILURE() << "cudnn.gated_chain declined a required case: " << s.reason;
  return false;
}

#define SKIP_WITHOUT_DEVICE() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"

// One eager call of the chain gated on every row against the reference; the summary returned.
std::string gate_chain(const GatedBlockKernel& chain, const GatedGeometry& g, const ChainCase& c,
                       const KnobValues& k) {
  const GatedHostInputs in = build_gated_inputs(g, 47);
  std::vector<int64_t> rows(g.tokens());
  std::iota(rows.begin(), rows.end(), 0);
  GatedOptions plain = asked_options(c);
  plain.fuse_gate = plain.fuse_norm_rope = false;
  std::vector<float> ref(rows.size() * g.d_model());
  reference::gated_block(g, plain, in.ref(), rows, ref.data());
  const Tolerance tol = gated_tolerance(default_tolerance(g.dtype()), ref.data(), ref.size());
  const GatedGpuRun r = run_gated_block(chain, g, asked_options(c), in, k);
  const GateResult gr =
      gate_rows(r.out.data(), static_cast<int64_t>(r.out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol);
  std::printf("  chain d%d B%d S%d %s %s causal=%d max_abs=%.3g atol=%.3g row_rel=%.3g rtol=%.3g [%s]\n",
              g.d_head(), g.batch(), g.seqlen(), dtype_name(g.dtype()), q_gate_layout_name(c.layout), c.causal,
              gr.max_abs, tol.atol, gr.max_row_rel, tol.rtol, r.summary.c_str());
  EXPECT_EQ(gr.nonfinite, 0) << "unwritten or non-finite outputs";
  EXPECT_TRUE(gr.passed) << gate_failure_reason(gr);
  EXPECT_EQ(r.stages, (std::vector<std::string>{"qkvg_proj", "norm_rope", "sdpa", "gate", "out_proj"}));
  EXPECT_EQ(r.summary.rfind("unfused chain, fusion options ignored; ", 0), 0u) << r.summary;
  EXPECT_NE(r.summary.find("; sdpa cudnn.sdpa cudnn "), std::string::npos) << r.summary;
  return r.summary;
}

// The FP8 mode through cuDNN's FP8 SDPA (its O through e4m3 too): the same gate as cuda.gated_block's FP8 rows,
// causal (q_len = kv_len: the top-left diagonal cuDNN's SM90 FP8 SDPA has) and not, d128 and d256.
TEST(CudnnGatedChain, Fp8PassesTheGate) {
  SKIP_WITHOUT_DEVICE();
  const auto chain = make_cudnn_gated_chain();
  const struct {
    GatedDims dims;
    bool causal;
  } cases[] = {{gated_test_dims(2, 256, 8, 2, 128, 32, DType::bf16), true},
               {gated_test_dims(1, 300, 8, 1, 128, 64, DType::f16), false},
               {gated_test_dims(1, 192, 8, 2, 256, 64, DType::bf16), true}};
  int runs = 0;
  for (const auto& c : cases) {
    const GatedGeometry g(c.dims);
    GatedOptions o;
    o.is_causal = c.causal;
    o.fp8 = gated_fp8_defaults(g.d_model(), g.attn_width());
    if (const Support s = chain->supports(g, o, knobs()); !s.ok) {
      std::printf("  fp8 chain d%d S%d declined: %s\n", g.d_head(), g.seqlen(), s.reason.c_str());
      continue;
    }
    const Fp8Reference f = fp8_reference(g, o, 53);
    const GatedGpuRun r = run_gated_block(*chain, g, o, f.in, knobs());
    const GateResult gr = f.gate(g, r);
    const Tolerance& tol = f.tol;
    ++runs;
    std::printf("  fp8 chain d%d B%d S%d %s causal=%d row_rel=%.3g rtol=%.3g [%s]\n", g.d_head(), g.batch(),
                g.seqlen(), dtype_name(g.dtype()), c.causal, gr.max_row_rel, tol.rtol, r.summary.c_str());
    EXPECT_EQ(gr.nonfinite, 0);
    EXPECT_TRUE(gr.passed) << gate_failure_reason(gr);
  }
  EXPECT_GT(runs, 0) << "cuDNN took no FP8 case";
}

TEST(CudnnGatedChain, PassesTheGateUnfused) {
  SKIP_WITHOUT_DEVICE();
  const auto chain = make_cudnn_gated_chain();
  for (const ChainCase& c : chain_cases()) {
    const GatedGeometry g(c.dims);
    if (!chain_takes(*chain, g, c)) continue;
    gate_chain(*chain, g, c, knobs());
  }
}

// The unified node, forced, on the non-causal view of two 160-token sequences (blocks of 32), every block-table
// slot used: cuDNN must be told of no spare block past the projection. A decline is printed, not a failure.
TEST(CudnnGatedChain, TheUnifiedNodePassesTheGateOnTheTwoSequenceView) {
  SKIP_WITHOUT_DEVICE();
  const auto chain = make_cudnn_gated_chain();
  ChainCase c = chain_cases()[2];
  c.required = false;
  const GatedGeometry g(c.dims);
  ASSERT_FALSE(c.causal);
  ASSERT_EQ(gated_block_size(g), 32);
  if (!chain_takes(*chain, g, c, unified_knobs())) return;
  const std::string summary = gate_chain(*chain, g, c, unified_knobs());
  EXPECT_NE(summary.find("), unified node"), std::string::npos) << summary;
}

// One sequence of 300 tokens: the last block of 64 is partial and the projection is padded to it. The pad rows,
// poisoned between calls (the workspace is the caller's memory), are zeroed again by the next call.
TEST(CudnnGatedChain, PadRowsPoisonedBetweenCallsStayOutOfTheOutput) {
  SKIP_WITHOUT_DEVICE();
  const auto chain = make_cudnn_gated_chain();
  for (const ChainCase& c : chain_cases()) {
    const GatedGeometry g(c.dims);
    const GatedWorkspaceLayout l = gated_workspace_layout(g, gated_block_size(g), 0, 0);
    if (l.pad_bytes(g) == 0 || !chain_takes(*chain, g, c)) continue;
    cuda::Stream stream;
    GatedGpuBlock b(*chain, g, asked_options(c), build_gated_inputs(g, 9), knobs(), stream);
    b.execute(stream);
    stream.synchronize();
    const std::vector<uint16_t> first = b.output();
    for (int call = 0; call < 2; ++call) {
      void* pad = static_cast<unsigned char*>(b.ws.data()) + l.pad_offset(g);  // proj: offset 0 of any layout
      ASSERT_EQ(cudaMemset(pad, 0xFF, l.pad_bytes(g)), cudaSuccess);
      b.poison();
      b.execute(stream);
      stream.synchronize();
      EXPECT_EQ(b.output(), first) << "d" << g.d_head() << " S" << g.seqlen() << " call " << call;
    }
  }
}

// execute() captures into a CUDA graph whose replays write the eager call's output.
TEST(CudnnGatedChain, GraphReplayMatchesEager) {
  SKIP_WITHOUT_DEVICE();
  const auto chain = make_cudnn_gated_chain();
  const ChainCase c = chain_cases()[0];
  const GatedGeometry g(c.dims);
  if (!chain_takes(*chain, g, c)) return;
  cuda::Stream stream;
  GatedGpuBlock b(*chain, g, asked_options(c), build_gated_inputs(g, 5), knobs(), stream);
  b.execute(stream);
  stream.synchronize();
  const std::vector<uint16_t> eager = b.output();
  b.poison();
  cuda::Graph graph(stream.get(), [&] { b.execute(stream); });
  for (int i = 0; i < 3; ++i) {
    graph.replay(stream.get());
    stream.synchronize();
    EXPECT_EQ(b.output(), eager) << "replay " << i;
    b.poison();
  }
}

}  // namespace
}  // namespace attnbench::gputest
