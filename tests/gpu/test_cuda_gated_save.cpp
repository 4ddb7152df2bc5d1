// cuda.gated_block's save_for_backward on the GPU: the output (and return_lse's LSE, through the reorder kernel)
// bit-identical with and without it, eagerly and replayed from a CUDA graph; every saved tensor against the
// reference's save set; and cuda.gated_block_bwd over that device save set through the gradient gate, both
// recompute policies. Both layouts, with and without qk_norm, both dtypes, one and two sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "cases/gated_bwd_data.hpp"
#include "cuda/runtime.hpp"
#include "device/device.hpp"
#include "gated_gpu_block.hpp"
#include "gated_save_run.hpp"

namespace attnbench {
namespace {

using gputest::gated_test_dims;
using gputest::GatedGpuBlock;

bool have_gpu() {
  static std::string why;
  static const bool ok = make_cuda_device(&why) != nullptr;
  return ok;
}

template <typename E>
cuda::DeviceBuffer poisoned(std::size_t n) {
  cuda::DeviceBuffer b(std::max<std::size_t>(16, n * sizeof(E)));
  b.fill_byte(0xFF);
  return b;
}

template <typename E>
std::vector<E> down(const cuda::DeviceBuffer& b, std::size_t n) {
  std::vector<E> v(n);
  if (n) b.download(v.data(), n * sizeof(E));
  return v;
}

// The save set on the device (GatedSaveOut's layouts), poisoned; read back into host SaveBufs.
struct DeviceSave {
  std::size_t t, hq, hk, d;
  bool norm, pre;
  cuda::DeviceBuffer q, k, v, gate, o, lse, rstd_q, rstd_k, q_pre, k_pre;

  DeviceSave(const GatedGeometry& g, const GatedOptions& opt, bool with_pre)
      : t(g.tokens()), hq(g.h_q()), hk(g.h_kv()), d(g.d_head()), norm(opt.qk_norm), pre(with_pre),
        q(poisoned<uint16_t>(t * hq * d)), k(poisoned<uint16_t>(t * hk * d)), v(poisoned<uint16_t>(t * hk * d)),
        gate(poisoned<uint16_t>(t * hq * d)), o(poisoned<uint16_t>(t * hq * d)), lse(poisoned<float>(t * hq)),
        rstd_q(poisoned<float>(t * hq)), rstd_k(poisoned<float>(t * hk)), q_pre(poisoned<uint16_t>(t * hq * d)),
        k_pre(poisoned<uint16_t>(t * hk * d)) {}

  GatedSaveOut out() const {
    auto f = [](const cuda::DeviceBuffer& b) { return static_cast<float*>(b.data()); };
    GatedSaveOut s{q.data(), k.data(), v.data(), gate.data(), o.data(), f(lse)};
    if (norm) {
      s.rstd_q = f(rstd_q);
      s.rstd_k = f(rstd_k);
    }
    if (pre) {
      s.q_pre = q_pre.data();
      s.k_pre = k_pre.data();
    }
    return s;
  }
  GatedSaved saved() const {
    const GatedSaveOut s = out();
    return {s.q, s.k, s.v, s.gate, s.o, s.lse, s.rstd_q, s.rstd_k, s.q_pre, s.k_pre};
  }
  void read(gatedtest::SaveBufs& h) const {
    h.q = down<uint16_t>(q, t * hq * d);
    h.k = down<uint16_t>(k, t * hk * d);
    h.v = down<uint16_t>(v, t * hk * d);
    h.gate = down<uint16_t>(gate, t * hq * d);
    h.o = down<uint16_t>(o, t * hq * d);
    h.lse = down<float>(lse, t * hq);
    if (norm) {
      h.rstd_q = down<float>(rstd_q, t * hq);
      h.rstd_k = down<float>(rstd_k, t * hk);
    }
    if (pre) {
      h.q_pre = down<uint16_t>(q_pre, t * hq * d);
      h.k_pre = down<uint16_t>(k_pre, t * hk * d);
    }
  }
};

struct GpuSaveCase {
  const char* name;
  GatedDims dims;
  bool norm;
  QGateLayout layout;
};

std::vector<GpuSaveCase> cases() {
  return {{"b2_gqa4_d128_flat", gated_test_dims(2, 256, 8, 2, 128, 64, DType::bf16), true, QGateLayout::flat},
          {"b1_ragged_d64_interleaved", gated_test_dims(1, 333, 4, 2, 64, 32, DType::bf16), true,
           QGateLayout::interleaved},
          {"b1_d256_no_norm", gated_test_dims(1, 200, 4, 1, 256, 64, DType::bf16), false, QGateLayout::flat},
          {"f16_b2_d128", gated_test_dims(2, 128, 4, 2, 128, 0, DType::f16), true, QGateLayout::interleaved}};
}

GatedOptions save_options(const GpuSaveCase& c, bool save) {
  GatedOptions o;
  o.fuse_gate = o.fuse_norm_rope = false;
  o.qk_norm = c.norm;
  o.q_gate_layout = c.layout;
  o.return_lse = true;
  o.save_for_backward = save;
  return o;
}

class CudaGatedSave : public ::testing::TestWithParam<GpuSaveCase> {};

// (1) and (2): out and the LSE bit-identical with and without the save (eager and graph replay), then the save set
// against the reference's and the SDPA's over its own q, k, v (gated_save_run.hpp's expect_save_matches, as the CPU
// test's).
TEST_P(CudaGatedSave, OutputIdenticalAndSaveSetMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const GpuSaveCase& c = GetParam();
  const GatedGeometry g(c.dims);
  const KnobValues knobs = KnobValues::resolve({}, false);
  const GatedBwdHost host = build_gated_bwd_host(g, save_options(c, true), 37);
  cuda::Stream stream;
  GatedGpuBlock off(*make_cuda_gated_block(), g, save_options(c, false), host.in, knobs, stream);
  off.execute(stream);
  stream.synchronize();
  const std::vector<uint16_t> want = off.output();
  const std::vector<float> want_lse = down<float>(off.lse, static_cast<std::size_t>(g.tokens()) * g.h_q());
  for (bool pre : {false, true}) {
    GatedGpuBlock on(*make_cuda_gated_block(), g, save_options(c, true), host.in, knobs, stream);
    DeviceSave dev(g, on.block->options(), pre);
    on.params.save = dev.out();
    on.execute(stream);
    stream.synchronize();
    EXPECT_EQ(on.output(), want) << c.name;
    EXPECT_EQ(down<float>(on.lse, want_lse.size()), want_lse) << c.name;
    gatedtest::SaveBufs s(g, on.block->options(), pre);
    dev.read(s);
    on.poison();
    cuda::Graph graph(stream.get(), [&] { on.execute(stream); });
    graph.replay(stream.get());
    stream.synchronize();
    EXPECT_EQ(on.output(), want) << c.name << " graph";
    gatedtest::expect_save_matches(c.name, g, on.block->options(), s, host.ref);
  }
}

// (3) cuda.gated_block_bwd over the device save set of cuda.gated_block's forward passes the gradient gate.
TEST_P(CudaGatedSave, BackwardOnTheSaveSetPassesTheGradientGate) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const GpuSaveCase& c = GetParam();
  const GatedGeometry g(c.dims);
  const KnobValues knobs = KnobValues::resolve({}, false);
  const GatedOptions o = save_options(c, true);
  const GatedBwdHost host = build_gated_bwd_host(g, o, 41);
  cuda::Stream stream;
  for (RecomputePolicy rp : {RecomputePolicy::recompute_qk_pre, RecomputePolicy::save_all}) {
    const bool pre = rp == RecomputePolicy::save_all && c.norm;
    GatedGpuBlock fwd(*make_cuda_gated_block(), g, o, host.in, knobs, stream);
    DeviceSave dev(g, o, pre);
    fwd.params.save = dev.out();
    fwd.execute(stream);
    GatedBwdOptions b;
    b.recompute = rp;
    auto bwd = make_cuda_gated_block_bwd()->create(g, o, b, knobs);
    const std::size_t t = g.tokens(), dm = g.d_model(), d = g.d_head();
    cuda::DeviceBuffer dy(t * dm * 2), dh = poisoned<uint16_t>(t * dm);
    cuda::DeviceBuffer dwq = poisoned<uint16_t>(static_cast<std::size_t>(g.n_qkvg()) * dm);
    cuda::DeviceBuffer dwo = poisoned<uint16_t>(dm * g.attn_width()), dqn = poisoned<uint16_t>(d);
    cuda::DeviceBuffer dkn = poisoned<uint16_t>(d), ws(std::max<std::size_t>(16, bwd->workspace_size()));
    dy.upload(host.dy.data(), dy.bytes());
    GatedBlockBwdParams p = make_gated_bwd_params(g);
    const GatedBlockParams& f = fwd.params;
    p.h = f.h;
    p.w_qkvg = f.w_qkvg;
    p.q_norm_weight = f.q_norm_weight;
    p.k_norm_weight = f.k_norm_weight;
    p.cos = f.cos;
    p.sin = f.sin;
    p.w_o = f.w_o;
    p.dy = dy.data();
    p.saved = dev.saved();
    p.dh = dh.data();
    p.dw_qkvg = dwq.data();
    p.dw_o = dwo.data();
    p.dw_q_norm = c.norm ? dqn.data() : nullptr;
    p.dw_k_norm = c.norm ? dkn.data() : nullptr;
    p.workspace = ws.data();
    bwd->prepare_workspace(p.workspace, stream.get());
    bwd->execute(p, stream.get());
    stream.synchronize();
    const auto gdh = down<uint16_t>(dh, t * dm), gwq = down<uint16_t>(dwq, g.n_qkvg() * dm);
    const auto gwo = down<uint16_t>(dwo, dm * g.attn_width()), gqn = down<uint16_t>(dqn, d),
               gkn = down<uint16_t>(dkn, d);
    const GatedBwdGrads got{gdh.data(), gwq.data(), gwo.data(), c.norm ? gqn.data() : nullptr,
                            c.norm ? gkn.data() : nullptr};
    const GateResult gr = gate_gated_gradients(g, o, b, got, host, default_tolerance(g.dtype()));
    std::printf("  %-26s %-16s gate %s\n", c.name, recompute_policy_name(rp), gr.passed ? "pass" : "FAIL");
    EXPECT_TRUE(gr.passed) << c.name << " " << recompute_policy_name(rp) << ": " << gate_failure_reason(gr) << " "
                           << gr.detail;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGatedSave, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GpuSaveCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace attnbench
