// A gated block on the GPU for the tests: its inputs uploaded, out and the workspace poisoned (0xFF: NaN in fp16
// and bf16), the workspace prepared; an eager call, and the output and names read back.
#pragma once
#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gate.hpp"
#include "cases/gated_case.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::gputest {

// A small block geometry of the GPU tests (d_model 512).
inline GatedDims gated_test_dims(int batch, int seqlen, int h_q, int h_kv, int d, int rope, DType dt) {
  GatedDims x;
  x.batch = batch;
  x.seqlen = seqlen;
  x.d_model = 512;
  x.h_q = h_q;
  x.h_kv = h_kv;
  x.d_head = d;
  x.rope_dim = rope;
  x.dtype = dt;
  return x;
}

struct GatedGpuBlock {
  std::unique_ptr<GatedBlock> block;
  cuda::DeviceBuffer h, w, qn, kn, cs, sn, wo, out, ws, lens, lse;
  GatedBlockParams params;

  // codes_with: the options the codes of h and the weights are made under (default: the block's), for a block told
  // a wrong factor.
  GatedGpuBlock(const GatedBlockKernel& k, const GatedGeometry& g, const GatedOptions& o, const GatedHostInputs& in,
                const KnobValues& knobs, const cuda::Stream& stream, const GatedOptions* codes_with = nullptr)
      : block(k.create(g, o, knobs)) {
    // Under fp8 the codes of h and the weights (in holds their values: apply_fp8_inputs).
    const GatedKernelWeights kw = gated_kernel_weights(g, codes_with ? *codes_with : o, in);
    h = o.fp8 ? up(kw.h_codes) : up(in.h);
    w = o.fp8 ? up(kw.qkvg_codes) : up(kw.w_qkvg);
    qn = up(in.q_norm_weight);
    kn = up(in.k_norm_weight);
    cs = up(in.cos);
    sn = up(in.sin);
    wo = o.fp8 ? up(kw.o_codes) : up(in.w_o);
    out = cuda::DeviceBuffer(out_elems() * 2);
    ws = cuda::DeviceBuffer(block->workspace_size());
    poison();
    ws.fill_byte(0xFF);
    block->prepare_workspace(ws.data(), stream.get());
    params = make_gated_params(g);
    params.h = h.data();
    params.w_qkvg = w.data();
    params.q_norm_weight = qn.data();
    params.k_norm_weight = kn.data();
    params.cos = cs.data();
    params.sin = sn.data();
    params.w_o = wo.data();
    params.out = out.data();
    params.workspace = ws.data();
    if (!in.seq_lens.empty()) {  // GatedBlockParams::seq_lens
      lens = cuda::DeviceBuffer(in.seq_lens.size() * sizeof(int32_t));
      lens.upload(in.seq_lens.data(), lens.bytes());
      params.seq_lens = static_cast<const int32_t*>(lens.data());
    }
    if (o.return_lse) {  // [B, h_q, S], poisoned NaN
      lse = cuda::DeviceBuffer(static_cast<std::size_t>(g.tokens()) * g.h_q() * sizeof(float));
      lse.fill_byte(0xFF);
      params.lse = static_cast<float*>(lse.data());
    }
  }

  std::size_t out_elems() const {
    const GatedGeometry& g = block->geometry();
    return static_cast<std::size_t>(g.tokens()) * g.d_model();
  }
  void poison() { out.fill_byte(0xFF); }
  void execute(const cuda::Stream& stream) const { block->execute(params, stream.get()); }
  std::vector<uint16_t> output() const {
    std::vector<uint16_t> o(out_elems());
    out.download(o.data(), o.size() * 2);
    return o;
  }

 private:
  template <typename E>
  static cuda::DeviceBuffer up(const std::vector<E>& v) {
    cuda::DeviceBuffer b(std::max<std::size_t>(16, v.size() * sizeof(E)));
    if (!v.empty()) b.upload(v.data(), v.size() * sizeof(E));
    return b;
  }
};

struct GatedGpuRun {
  std::vector<uint16_t> out;
  std::vector<float> lse;  // with return_lse
  std::vector<std::string> stages;
  std::string summary;
};

// One eager call of kernel k's block on fresh buffers.
inline GatedGpuRun run_gated_block(const GatedBlockKernel& k, const GatedGeometry& g, const GatedOptions& o,
                                   const GatedHostInputs& in, const KnobValues& knobs,
                                   const GatedOptions* codes_with = nullptr) {
  cuda::Stream stream;
  GatedGpuBlock b(k, g, o, in, knobs, stream, codes_with);
  b.execute(stream);
  stream.synchronize();
  std::vector<float> lse(b.lse.bytes() / sizeof(float));
  if (!lse.empty()) b.lse.download(lse.data(), b.lse.bytes());
  return {b.output(), lse, b.block->stage_names(), b.block->summary()};
}

// An FP8 block's inputs (the codes' values), its every row's fp32 reference and the FP8 mode's tolerance.
struct Fp8Reference {
  GatedHostInputs in;
  std::vector<int64_t> rows;
  std::vector<float> ref;
  Tolerance tol;
  GateResult gate(const GatedGeometry& g, const GatedGpuRun& r) const {
    return gate_rows(r.out.data(), static_cast<int64_t>(r.out.size()), g.dtype(), g.d_model(), rows, ref.data(), tol);
  }
};
inline Fp8Reference fp8_reference(const GatedGeometry& g, const GatedOptions& o, uint64_t seed) {
  Fp8Reference f;
  f.in = build_gated_inputs(g, seed);
  apply_fp8_inputs(g, *o.fp8, f.in);
  f.rows.resize(static_cast<std::size_t>(g.tokens()));
  std::iota(f.rows.begin(), f.rows.end(), int64_t{0});
  f.ref.resize(f.rows.size() * g.d_model());
  reference::gated_block(g, o, f.in.ref(), f.rows, f.ref.data());
  f.tol = gated_tolerance(default_tolerance(g.dtype()), f.ref.data(), f.ref.size(), std::nullopt, true);
  return f;
}

}  // namespace attnbench::gputest
