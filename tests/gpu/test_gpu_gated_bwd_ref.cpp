// The gated block backward's GPU reference (gated_block_bwd_ref.hpp) against the host one: every tensor of the save
// set and every gradient, over every token, on GQA, no norm with a window, the Gemma offset, d256, batch 2 without
// the mask and lengths off the GEMM tiles, in both dtypes. Both are fp32. Before the SDPA they differ only by
// summation order: 1e-5 a row. From the SDPA on, an element of q, k, v or dO whose fp32 value sits at a rounding
// boundary of the dtype may round to the other neighbour on one side, and O's for D likewise: those tensors get 5% of
// the gradient bound, the attention backward's GPU test's rule.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attnbench/gated_block_bwd_ref.hpp"
#include "cases/gate.hpp"
#include "cases/gated_bwd_data.hpp"
#include "device/device.hpp"

namespace attnbench {
namespace {

constexpr double kFp32Row = 1e-5;

Device* cuda_device() {
  static std::string why;
  static std::unique_ptr<Device> dev = make_cuda_device(&why);
  return dev.get();
}

// A host vector's copy in the device's memory (none for an empty one).
struct Uploaded {
  Buffer buf;
  Uploaded(Device& dev, const std::vector<uint16_t>& v) : buf(dev, v.size() * 2) {
    if (buf.bytes()) dev.upload(buf.data(), v.data(), buf.bytes());
  }
  const uint16_t* get() const { return static_cast<const uint16_t*>(buf.data()); }
};

// The largest per-row relative L2 difference of two [rows, row_len] tensors, against the row's norm or the gradient
// gate's floor (a tenth of the rows' RMS norm) where that is larger.
double worst_row(const std::vector<float>& got, const std::vector<float>& want, int row_len) {
  const int64_t rows = static_cast<int64_t>(want.size()) / row_len;
  const double floor = gradient_row_floor(want.data(), rows, row_len);
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double e2 = 0, n2 = 0;
    for (int c = 0; c < row_len; ++c) {
      const double x = got[r * row_len + c], y = want[r * row_len + c];
      if (x != y) e2 += (x - y) * (x - y);
      n2 += y * y;
    }
    const double den = std::max(std::sqrt(n2), floor), rel = den > 0 ? std::sqrt(e2) / den : std::sqrt(e2);
    worst = std::max(worst, std::isnan(rel) ? INFINITY : rel);
  }
  return worst;
}

struct RefRow {
  const char* name;
  GatedDims dims;
  GatedOptions opts;
};

GatedDims dims(int batch, int seqlen, int d_model, int h_q, int h_kv, int d, int rope) {
  GatedDims g;
  g.batch = batch;
  g.seqlen = seqlen;
  g.d_model = d_model;
  g.h_q = h_q;
  g.h_kv = h_kv;
  g.d_head = d;
  g.rope_dim = rope;
  return g;
}

std::vector<RefRow> rows() {
  std::vector<RefRow> r;
  r.push_back({"causal_gqa2_d64", dims(1, 128, 256, 4, 2, 64, 32), {}});
  GatedOptions plain;
  plain.qk_norm = false;
  plain.window_left = 50;
  r.push_back({"no_norm_window", dims(1, 200, 264, 4, 4, 64, 16), plain});
  GatedOptions gemma;
  gemma.norm_weight_offset = 1.f;
  gemma.q_gate_layout = QGateLayout::interleaved;  // the kernels' concern: the references are layout-free
  r.push_back({"gemma_offset_d128", dims(1, 160, 256, 4, 1, 128, 64), gemma});
  r.push_back({"d256_gqa4", dims(1, 96, 320, 4, 1, 256, 64), {}});
  GatedOptions full;
  full.is_causal = false;
  r.push_back({"batch2_full_rope_noncausal", dims(2, 100, 200, 2, 1, 128, 128), full});
  return r;
}

// One tensor of GatedBwdRef: its output on the device and how it is compared.
struct Tensor {
  const char* name;
  const std::vector<float>* want;
  int row_len;
  bool after_rounding;  // downstream of the SDPA's rounded inputs
  std::unique_ptr<Buffer> buf;
};

class GpuGatedBwdReference : public ::testing::TestWithParam<RefRow> {};

TEST_P(GpuGatedBwdReference, AgreesWithTheHostOnEveryTensor) {
  if (!cuda_device()) GTEST_SKIP() << "no CUDA device";
  Device& dev = *cuda_device();
  const RefRow& row = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    GatedDims dd = row.dims;
    dd.dtype = dt;
    const GatedGeometry g(dd);
    const GatedOptions& o = row.opts;
    const GatedBwdHost host = build_gated_bwd_host(g, o, 53);
    const GatedHostInputs& in = host.in;
    const reference::GatedBwdRef& r = host.ref;
    const Uploaded h(dev, in.h), wq(dev, in.wq), wgate(dev, in.wgate), wk(dev, in.wk), wv(dev, in.wv),
        qw(dev, in.q_norm_weight), kw(dev, in.k_norm_weight), cos(dev, in.cos), sin(dev, in.sin), w_o(dev, in.w_o),
        dy(dev, host.dy);
    const int d = g.d_head(), dm = g.d_model(), aw = static_cast<int>(g.attn_width());
    const int kvw = g.h_kv() * d;
    using Io = reference::GatedBwdGpuIo;
    std::vector<Tensor> t;
    Io io;
    for (auto [name, want, row_len, after, field] :
         {std::tuple{"q_pre", &r.q_pre, aw, false, &Io::q_pre}, {"k_pre", &r.k_pre, kvw, false, &Io::k_pre},
          {"q", &r.q, aw, false, &Io::q}, {"k", &r.k, kvw, false, &Io::k}, {"v", &r.v, kvw, false, &Io::v},
          {"gate", &r.gate, aw, false, &Io::gate}, {"rstd_q", &r.rstd_q, g.h_q(), false, &Io::rstd_q},
          {"rstd_k", &r.rstd_k, g.h_kv(), false, &Io::rstd_k}, {"o", &r.o, aw, true, &Io::o},
          {"lse", &r.lse, g.h_q(), true, &Io::lse}, {"dh", &r.dh, dm, true, &Io::dh},
          {"dwq", &r.dwq, dm, true, &Io::dwq}, {"dwgate", &r.dwgate, dm, true, &Io::dwgate},
          {"dwk", &r.dwk, dm, true, &Io::dwk}, {"dwv", &r.dwv, dm, true, &Io::dwv},
          {"dw_o", &r.dw_o, aw, true, &Io::dw_o}, {"dw_q_norm", &r.dw_q_norm, d, true, &Io::dw_q_norm},
          {"dw_k_norm", &r.dw_k_norm, d, true, &Io::dw_k_norm}}) {
      t.push_back({name, want, row_len, after, std::make_unique<Buffer>(dev, want->size() * sizeof(float))});
      io.*field = static_cast<float*>(t.back().buf->data());  // null for the norms' without qk_norm
    }
    const Buffer ws(dev, reference::gated_block_backward_gpu_workspace(g));
    io.h = h.get();
    io.wq = wq.get();
    io.wgate = wgate.get();
    io.wk = wk.get();
    io.wv = wv.get();
    io.q_norm_weight = qw.get();
    io.k_norm_weight = kw.get();
    io.cos = cos.get();
    io.sin = sin.get();
    io.w_o = w_o.get();
    io.dy = dy.get();
    io.workspace = ws.data();
    const auto t0 = std::chrono::steady_clock::now();
    reference::gated_block_backward_gpu(g, o, io, dev.stream());
    dev.synchronize();
    const double gpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    // Past a rounding (each side rounds its own fp32 stage, where one element may flip) the two differ by up to 2.7e-4
    // per row in fp16 (dh, the Gemma offset at d128; 13.5% of its gradient bound, whose rtol is 4x bf16's); fp32
    // stages before any rounding agree to kFp32Row. A planted bug reads above the whole bound.
    const double rounded_bound = 0.25 * gradient_tolerance(dt, default_tolerance(dt)).rtol;
    std::string line;
    for (const Tensor& x : t) {
      if (x.want->empty()) continue;
      std::vector<float> got(x.want->size());
      dev.download(got.data(), x.buf->data(), got.size() * sizeof(float));
      const double worst = worst_row(got, *x.want, x.row_len);
      char part[64];
      std::snprintf(part, sizeof part, " %s %.1e", x.name, worst);
      line += part;
      EXPECT_LE(worst, x.after_rounding ? rounded_bound : kFp32Row)
          << row.name << " " << dtype_name(dt) << " " << x.name;
    }
    std::printf("%-28s %-4s gpu %.0f ms, host %.0f ms:%s\n", row.name, dtype_name(dt), gpu_ms, host.ref_ms,
                line.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGatedBwdReference, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<RefRow>& i) { return std::string(i.param.name); });

// What the host reference declines the GPU one declines, before touching the device; so is a missing pointer.
TEST(GpuGatedBwdReferenceApi, DeclinesWhatTheHostDeclinesAndNullPointers) {
  const GatedGeometry g(dims(1, 64, 256, 4, 2, 64, 32));
  EXPECT_GT(reference::gated_block_backward_gpu_workspace(g), 0u);
  GatedOptions fused;
  fused.fuse_gate = true;
  EXPECT_THROW(reference::gated_block_backward_gpu(g, fused, {}, nullptr), GatedDecline);
  EXPECT_THROW(reference::gated_block_backward_gpu(g, GatedOptions{}, {}, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace attnbench
