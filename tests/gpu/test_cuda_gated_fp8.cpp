// cuda.gated_block's FP8 mode on the GPU against the fp32 reference (the codes' values, Q, K, V and the gated O
// quantised): unfused and fused (the quantisation in the norm + RoPE pass, the gate in the O quantisation: the same
// bits), both
// W_qkvg layouts, bf16 and fp16, one and two sequences, out and the workspace poisoned; a block told a descale off by
// two fails the same gate; head sizes 128 and 256 (the wide FP8 SDPA's two).
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gated_case.hpp"
#include "common/device/mx_rules.hpp"
#include "conversion_kernels.hpp"
#include "cuda/gated_kernels.hpp"
#include "gated_gpu_block.hpp"

namespace attnbench {
namespace {

using gputest::gated_test_dims;
using gputest::GatedGpuRun;
using gputest::run_gated_block;

TEST(CudaGatedFp8, UnfusedAndFusedPassTheGateAndAWrongDescaleFailsIt) {
  struct Case {
    GatedDims dims;
    QGateLayout layout;
    bool causal;
  };
  const std::vector<Case> cases = {
      {gated_test_dims(2, 256, 8, 2, 128, 32, DType::bf16), QGateLayout::flat, true},
      {gated_test_dims(1, 300, 8, 1, 128, 64, DType::bf16), QGateLayout::interleaved, false},
      {gated_test_dims(1, 200, 4, 2, 128, 32, DType::f16), QGateLayout::flat, true},
      {gated_test_dims(2, 192, 8, 2, 256, 64, DType::bf16), QGateLayout::interleaved, true},
      {gated_test_dims(1, 260, 4, 1, 256, 64, DType::bf16), QGateLayout::flat, false},
  };
  const KnobValues knobs = KnobValues::resolve({}, false);
  for (const Case& c : cases) {
    const GatedGeometry g(c.dims);
    GatedOptions o;
    o.is_causal = c.causal;
    o.q_gate_layout = c.layout;
    o.fp8 = gated_fp8_defaults(g.d_model(), g.attn_width());
    const gputest::Fp8Reference fr = gputest::fp8_reference(g, o, 43);
    const GatedHostInputs& in = fr.in;
    const Tolerance& tol = fr.tol;
    auto gate = [&](const GatedGpuRun& r) { return fr.gate(g, r); };
    std::vector<uint16_t> unfused;
    for (bool fuse : {false, true}) {
      GatedOptions f = o;
      f.fuse_gate = f.fuse_norm_rope = fuse;
      const GatedGpuRun r = run_gated_block(*make_cuda_gated_block(), g, f, in, knobs);
      const GateResult gr = gate(r);
      std::printf("  fp8 gated d%d B%d S%d %s %s fused=%d row_rel=%.3g rtol=%.3g max_abs=%.3g atol=%.3g [%s]\n",
                  g.d_head(), g.batch(), g.seqlen(), dtype_name(g.dtype()), q_gate_layout_name(c.layout), fuse,
                  gr.max_row_rel, tol.rtol, gr.max_abs, tol.atol, r.summary.c_str());
      EXPECT_TRUE(gr.passed) << gate_failure_reason(gr);
      EXPECT_EQ(r.stages.size(), fuse ? 5u : 7u);
      if (fuse) {
        EXPECT_EQ(r.out, unfused) << "the fused passes write other bits than the unfused ones";
      }
      unfused = r.out;
    }
    GatedOptions wrong = o;  // the codes are the right spec's, the block applies descale_h twice
    wrong.fp8->descale_h *= 2;
    const GateResult bad = gate(run_gated_block(*make_cuda_gated_block(), g, wrong, in, knobs, &o));
    EXPECT_FALSE(bad.passed) << "descale_h off by two: row error " << bad.max_row_rel;
  }
}

// The quantisation kernel writes the bytes of the shared e4m3 rule (the CPU block's) for every bf16 bit pattern:
// ties, subnormals, values past 448, infinities and NaN; three parts with their own offsets and scales.
TEST(CudaGatedFp8, QuantisationKernelMatchesTheSharedRuleOnEveryBf16) {
  constexpr int kD = 64, kRows = 1024;  // 65536 halves: every bf16 pattern once per column block of the source
  std::vector<uint16_t> src(static_cast<std::size_t>(kRows) * 3 * kD);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u);
  GatedQuantizeParams q;
  q.src_stride = 3 * kD;
  q.dst_stride = 3 * kD + 16;
  q.rows = kRows;
  q.d_head = kD;
  q.parts[0] = {0, kD, 16, 1, 1.f};
  q.parts[1] = {kD, kD, 16 + kD, 1, 0.37f};
  q.parts[2] = {2 * kD, kD, 16 + 2 * kD, 1, 64.f};
  q.n_parts = 3;
  cuda::DeviceBuffer s(src.size() * 2), d(static_cast<std::size_t>(kRows) * q.dst_stride);
  s.upload(src.data(), s.bytes());
  d.fill_byte(0xAB);
  q.src = s.data();
  q.dst = static_cast<uint8_t*>(d.data());
  cuda::launch_gated_quantize(DType::bf16, q, nullptr);
  std::vector<uint8_t> got(d.bytes());
  d.download(got.data(), got.size());
  for (int t = 0; t < kRows; ++t) {
    for (int c = 0; c < 16; ++c) ASSERT_EQ(got[t * q.dst_stride + c], 0xAB) << "a byte outside the parts written";
    for (int part = 0; part < 3; ++part)
      for (int i = 0; i < kD; ++i) {
        const float x = bf16_to_float(src[static_cast<std::size_t>(t) * q.src_stride + part * kD + i]);
        const unsigned char want = device::e4m3_code(device::mul_rn(x, q.parts[part].scale));
        ASSERT_EQ(got[t * q.dst_stride + q.parts[part].dst0 + i], want) << "row " << t << " part " << part << " x " << x;
      }
  }
}

// The passes' pair conversion (the hardware's cvt.rn.satfinite.e4m3x2.f32, NaN set apart) is the shared rule on every
// fp32 input, in either byte of the pair.
TEST(CudaGatedFp8, HardwarePairConversionIsTheSharedRuleOnEveryFp32) {
  const gputest::ConversionSweep r = gputest::run_e4m3_pair_sweep();
  EXPECT_EQ(r.mismatches, 0u) << "e.g. fp32 bits 0x" << std::hex << r.first_bits;
}

}  // namespace
}  // namespace attnbench
