#include "cases/gpu_reference.hpp"

#include <memory>
#include <vector>

#include "cases/gated_bwd_data.hpp"

#include "attnbench/gated_block_bwd_ref.hpp"
#include "attnbench/reference_bwd.hpp"
#include "attnbench/reference_gpu.hpp"

namespace attnbench {

namespace {
// A host vector's copy in the device's memory (none for an empty one).
struct Uploaded {
  Buffer buf;
  template <class T>
  Uploaded(Device& dev, const std::vector<T>& v) : buf(dev, v.size() * sizeof(T)) {
    if (buf.bytes()) dev.upload(buf.data(), v.data(), buf.bytes());
  }
  Uploaded(Device& dev, const HostTensor& t) : buf(dev, t.bytes()) {
    if (buf.bytes()) dev.upload(buf.data(), t.data(), buf.bytes());
  }
  template <class T>
  const T* as() const { return static_cast<const T*>(buf.data()); }
};
}  // namespace

void reference_on_device(Device& dev, const HostInputs& in, float* out, float* lse) {
  const AttentionProblem& p = in.problem;
  const AttentionFeatures& f = p.features;
  const Uploaded q(dev, in.q), k(dev, in.k_cache), v(dev, in.v_cache), cu(dev, in.cu_seqlens_q),
      used(dev, in.seqused_k), table(dev, in.block_table), alibi(dev, f.alibi_slopes), sinks(dev, f.sinks),
      qq(dev, f.qq_bias);
  const std::size_t rows = static_cast<std::size_t>(p.total_q()) * p.heads;
  Buffer o(dev, rows * p.head_size * sizeof(float)), l(dev, lse ? rows * sizeof(float) : 0);
  AttentionParams a = in.params();
  a.q = q.buf.data();
  a.k_cache = k.buf.data();
  a.v_cache = v.buf.data();
  a.cu_seqlens_q = cu.as<int32_t>();
  a.seqused_k = used.as<int32_t>();
  a.block_table = table.as<int32_t>();
  a.features.alibi_slopes = f.alibi_slopes.empty() ? nullptr : alibi.as<float>();
  a.features.sinks = f.sinks.empty() ? nullptr : sinks.as<float>();
  a.features.qq_bias = f.qq_bias.empty() ? nullptr : qq.as<float>();
  reference::paged_attention_gpu(a, static_cast<float*>(o.data()), lse ? static_cast<float*>(l.data()) : nullptr,
                                 dev.stream());
  dev.synchronize();
  dev.download(out, o.data(), o.bytes());
  if (lse) dev.download(lse, l.data(), l.bytes());
}

void reference_bwd_on_device(Device& dev, BwdInputs& in, float* o, BwdReference& ref) {
  const AttentionProblem& p = in.problem;
  const Uploaded q(dev, in.q), k(dev, in.k), v(dev, in.v), d_o(dev, in.d_o), cq(dev, in.cu_seqlens_q),
      ck(dev, in.cu_seqlens_k);
  const std::size_t rows = static_cast<std::size_t>(p.total_q()) * p.heads;
  Buffer ob(dev, rows * p.head_size * 4), lse(dev, rows * 4), dsum(dev, rows * 4), dq(dev, ref.dq.size() * 4),
      dk(dev, ref.dk.size() * 4), dv(dev, ref.dv.size() * 4);
  AttentionBwdParams a = in.params();
  a.q = q.buf.data();
  a.k = k.buf.data();
  a.v = v.buf.data();
  a.d_o = d_o.buf.data();
  a.cu_seqlens_q = cq.as<int32_t>();
  a.cu_seqlens_k = ck.as<int32_t>();
  const auto f = [](const Buffer& b) { return static_cast<float*>(b.data()); };
  reference::attention_backward_gpu(a, f(ob), f(lse), f(dsum), f(dq), f(dk), f(dv), dev.stream());
  dev.synchronize();
  dev.download(o, ob.data(), ob.bytes());
  dev.download(in.lse.data(), lse.data(), lse.bytes());
  dev.download(ref.dq.data(), dq.data(), dq.bytes());
  dev.download(ref.dk.data(), dk.data(), dk.bytes());
  dev.download(ref.dv.data(), dv.data(), dv.bytes());
}

void gated_bwd_reference_on_device(Device& dev, const GatedGeometry& g, const GatedOptions& o, GatedBwdHost& host) {
  const GatedHostInputs& in = host.in;
  const Uploaded h(dev, in.h), wq(dev, in.wq), wg(dev, in.wgate), wk(dev, in.wk), wv(dev, in.wv),
      qn(dev, in.q_norm_weight), kn(dev, in.k_norm_weight), cs(dev, in.cos), sn(dev, in.sin), wo(dev, in.w_o),
      dy(dev, host.dy);
  reference::GatedBwdRef& r = host.ref;
  const std::size_t t = static_cast<std::size_t>(g.tokens()), aw = static_cast<std::size_t>(g.attn_width());
  const std::size_t kw = static_cast<std::size_t>(g.h_kv()) * g.d_head(), dm = g.d_model(), d = g.d_head();
  const bool norms = o.qk_norm;
  std::vector<std::pair<std::vector<float>*, std::size_t>> outs = {
      {&r.q_pre, t * aw}, {&r.k_pre, t * kw}, {&r.q, t * aw},      {&r.k, t * kw},       {&r.v, t * kw},
      {&r.gate, t * aw},  {&r.o, t * aw},     {&r.lse, t * g.h_q()}, {&r.rstd_q, t * g.h_q()}, {&r.rstd_k, t * g.h_kv()},
      {&r.dh, t * dm},    {&r.dwq, aw * dm},  {&r.dwgate, aw * dm}, {&r.dwk, kw * dm},    {&r.dwv, kw * dm},
      {&r.dw_o, dm * aw}, {&r.dw_q_norm, norms ? d : 0}, {&r.dw_k_norm, norms ? d : 0}};
  std::vector<std::unique_ptr<Buffer>> bufs;
  for (auto& [vec, n] : outs) {
    vec->assign(n, 0.f);
    bufs.push_back(std::make_unique<Buffer>(dev, n * sizeof(float)));
  }
  auto f = [&](int i) { return static_cast<float*>(bufs[i]->data()); };
  Buffer ws(dev, reference::gated_block_backward_gpu_workspace(g));
  reference::GatedBwdGpuIo io;
  io.h = h.as<uint16_t>();
  io.wq = wq.as<uint16_t>();
  io.wgate = wg.as<uint16_t>();
  io.wk = wk.as<uint16_t>();
  io.wv = wv.as<uint16_t>();
  io.q_norm_weight = qn.as<uint16_t>();
  io.k_norm_weight = kn.as<uint16_t>();
  io.cos = cs.as<uint16_t>();
  io.sin = sn.as<uint16_t>();
  io.w_o = wo.as<uint16_t>();
  io.dy = dy.as<uint16_t>();
  float** dst[] = {&io.q_pre, &io.k_pre, &io.q, &io.k, &io.v, &io.gate, &io.o, &io.lse, &io.rstd_q,
                   &io.rstd_k, &io.dh, &io.dwq, &io.dwgate, &io.dwk, &io.dwv, &io.dw_o, &io.dw_q_norm, &io.dw_k_norm};
  for (int i = 0; i < 18; ++i) *dst[i] = outs[i].second ? f(i) : nullptr;
  io.workspace = ws.data();
  reference::gated_block_backward_gpu(g, o, io, dev.stream());
  dev.synchronize();
  for (int i = 0; i < 18; ++i)
    if (outs[i].second) dev.download(outs[i].first->data(), bufs[i]->data(), bufs[i]->bytes());
}

}  // namespace attnbench
