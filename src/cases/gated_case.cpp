// The gated attention block in the runner: inputs, reference rows and the tolerance rule (gated_case.hpp), the
// OpCase, and a block bound to a device. Options come from knobs; supports() asks the kernel under them.
#include "cases/gated_case.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "cases/check_rows.hpp"
#include "cases/memory_check.hpp"
#include "cases/op_case.hpp"

namespace attnbench {

GatedGeometry gated_geometry(const GatedShape& s, DType dtype) {
  GatedDims d;
  d.batch = s.batch;
  d.seqlen = s.seqlen;
  d.d_model = s.d_model;
  d.h_q = s.h_q;
  d.h_kv = s.h_kv;
  d.d_head = s.d_head;
  d.rope_dim = s.rope_dim;
  d.dtype = dtype;
  return GatedGeometry(d);
}

namespace {
// The shape's fields that change the math: mask, alignment, window and norm.
void set_shape_options(const GatedShape& s, GatedOptions& o) {
  o.is_causal = s.causal;
  o.causal_bottom_right = s.causal_bottom_right;
  o.return_lse = s.return_lse;
  o.window_left = s.window_left;
  o.window_right = s.window_right;
  o.qk_norm = s.qk_norm;
  o.mx = s.mx;
  o.fp8 = s.fp8;
}
}  // namespace

GatedOptions gated_options(const GatedShape& s, const KnobValues& knobs) {
  GatedOptions o;
  set_shape_options(s, o);
  apply_gated_knobs(knobs, o);
  return o;
}

reference::GatedRefInputs GatedHostInputs::ref() const {
  reference::GatedRefInputs r;
  r.h = h.data();
  r.wq = wq.data();
  r.wgate = wgate.data();
  r.wk = wk.data();
  r.wv = wv.data();
  r.q_norm_weight = q_norm_weight.data();
  r.k_norm_weight = k_norm_weight.data();
  r.cos = cos.empty() ? nullptr : cos.data();
  r.sin = sin.empty() ? nullptr : sin.data();
  r.w_o = w_o.data();
  r.seq_lens = seq_lens.empty() ? nullptr : seq_lens.data();
  return r;
}

GatedHostInputs build_gated_inputs(const GatedGeometry& g, uint64_t seed) {
  const DType dt = g.dtype();
  const std::size_t dm = g.d_model(), aw = g.attn_width(), kvw = static_cast<std::size_t>(g.h_kv()) * g.d_head();
  const std::size_t t = static_cast<std::size_t>(g.tokens());
  const float w_std = 1.0f / std::sqrt(static_cast<float>(dm)), o_std = 1.0f / std::sqrt(static_cast<float>(aw));
  GatedHostInputs in;
  in.h = random_normal(t * dm, dt, seed, 101, 0.f, 1.f);
  in.wq = random_normal(aw * dm, dt, seed, 102, 0.f, w_std);
  in.wgate = random_normal(aw * dm, dt, seed, 103, 0.f, w_std);
  in.wk = random_normal(kvw * dm, dt, seed, 104, 0.f, w_std);
  in.wv = random_normal(kvw * dm, dt, seed, 105, 0.f, w_std);
  in.w_o = random_normal(dm * aw, dt, seed, 106, 0.f, o_std);
  in.q_norm_weight = random_normal(g.d_head(), dt, seed, 107, 1.f, 0.1f);
  in.k_norm_weight = random_normal(g.d_head(), dt, seed, 108, 1.f, 0.1f);
  const int rd = g.rope_dim(), half = rd / 2;
  if (rd > 0) {
    in.cos.resize(t * rd);
    in.sin.resize(t * rd);
    for (std::size_t tok = 0; tok < t; ++tok) {
      const double pos = static_cast<double>(tok % static_cast<std::size_t>(g.seqlen()));
      for (int i = 0; i < rd; ++i) {
        const double inv_freq = std::pow(10000.0, -2.0 * (i % half) / rd);
        in.cos[tok * rd + i] = float_to_half(static_cast<float>(std::cos(pos * inv_freq)), dt);
        in.sin[tok * rd + i] = float_to_half(static_cast<float>(std::sin(pos * inv_freq)), dt);
      }
    }
  }
  return in;
}

void apply_mx_weights(const GatedGeometry& g, const MxQuantSpec& s, GatedHostInputs& in) {
  const DType dt = g.dtype();
  auto requantise = [dt](std::vector<uint16_t>& w, int64_t cols, MxCodes c) {
    const mx::MxFormat f = mx_format_of(c);
    const int64_t rows = static_cast<int64_t>(w.size()) / cols;
    std::vector<uint8_t> codes(mx::mx_code_bytes(f, rows, cols)), scales(mx::mx_scale_bytes(f, rows, cols));
    mx::quantize_rows(f, dt, w.data(), rows, cols, 1.f, codes.data(), scales.data());
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      mx::dequantize_row(f, codes.data() + mx::mx_code_bytes(f, r, cols), scales.data() + mx::mx_scale_bytes(f, r, cols),
                         cols, 1.f, row.data());
      for (int64_t c = 0; c < cols; ++c) {
        const uint16_t h = float_to_half(row[c], dt);
        if (half_to_float(h, dt) != row[c])
          throw std::logic_error("apply_mx_weights: a dequantised weight is not exact in " + std::string(dtype_name(dt)));
        w[r * cols + c] = h;
      }
    }
  };
  const int64_t dm = g.d_model();
  for (std::vector<uint16_t>* w : {&in.wq, &in.wgate, &in.wk, &in.wv}) requantise(*w, dm, s.w_qkvg);
  requantise(in.w_o, g.attn_width(), s.w_o);
}

namespace {
// The e4m3 codes of x / descale (the FP8 mode's inputs).
std::vector<uint8_t> fp8_codes(const std::vector<uint16_t>& x, DType dt, float descale) {
  std::vector<uint8_t> c(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) c[i] = float_to_fp8(half_to_float(x[i], dt) / descale, DType::e4m3);
  return c;
}
}  // namespace

void apply_fp8_inputs(const GatedGeometry& g, const Fp8QuantSpec& s, GatedHostInputs& in) {
  const DType dt = g.dtype();
  auto requantise = [dt](std::vector<uint16_t>& x, float descale) {
    const std::vector<uint8_t> c = fp8_codes(x, dt, descale);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float_to_half(fp8_to_float(c[i], DType::e4m3) * descale, dt);
  };
  requantise(in.h, s.descale_h);
  for (std::vector<uint16_t>* w : {&in.wq, &in.wgate, &in.wk, &in.wv}) requantise(*w, s.descale_w_qkvg);
  requantise(in.w_o, s.descale_w_o);
}

GatedKernelWeights gated_kernel_weights(const GatedGeometry& g, const GatedOptions& o, const GatedHostInputs& in) {
  GatedKernelWeights w;
  w.w_qkvg = build_w_qkvg(g, o.q_gate_layout, in.wq.data(), in.wgate.data(), in.wk.data(), in.wv.data());
  if (o.fp8) {  // the inputs hold the codes' values: their codes again
    w.h_codes = fp8_codes(in.h, g.dtype(), o.fp8->descale_h);
    w.qkvg_codes = fp8_codes(w.w_qkvg, g.dtype(), o.fp8->descale_w_qkvg);
    w.o_codes = fp8_codes(in.w_o, g.dtype(), o.fp8->descale_w_o);
    w.w_qkvg.clear();
    return w;
  }
  if (!o.mx) return w;
  auto quantise = [&](const std::vector<uint16_t>& x, int64_t cols, MxCodes c, std::vector<uint8_t>& codes,
                      std::vector<uint8_t>& scales) {
    const mx::MxFormat f = mx_format_of(c);
    const int64_t rows = static_cast<int64_t>(x.size()) / cols;
    codes.resize(mx::mx_code_bytes(f, rows, cols));
    scales.resize(mx::mx_scale_bytes(f, rows, cols));
    mx::quantize_rows(f, g.dtype(), x.data(), rows, cols, 1.f, codes.data(), scales.data());
  };
  quantise(w.w_qkvg, g.d_model(), o.mx->w_qkvg, w.qkvg_codes, w.qkvg_scales);
  quantise(in.w_o, g.attn_width(), o.mx->w_o, w.o_codes, w.o_scales);
  w.w_qkvg.clear();
  return w;
}

std::vector<int64_t> gated_check_rows(const GatedGeometry& g, const GatedOptions& o, const int32_t* seq_lens,
                                      double budget_flops, uint64_t seed) {
  const int64_t T = g.tokens();
  const int S = g.seqlen();
  std::vector<int64_t> all(T);
  for (int64_t t = 0; t < T; ++t) all[t] = t;
  const double aw = static_cast<double>(g.attn_width()), dm = g.d_model();
  auto row_cost = [&](int64_t r) {
    const auto [first, end] = reference::gated_visible_keys(g, o, seq_lens, r);
    const double keys = std::max(0, end - first);
    return 4.0 * dm * aw + 4.0 * keys * aw + 2.0 * aw * dm;
  };
  double full = 0;
  for (int64_t t = 0; t < T; ++t) full += row_cost(t);
  if (full <= budget_flops) return all;

  std::set<int64_t> rows;
  for (int b = 0; b < g.batch(); ++b) {
    const int64_t base = static_cast<int64_t>(b) * S;
    auto add = [&](int64_t s) {
      if (s >= 0 && s < S) rows.insert(base + s);
    };
    add(0);
    add(S - 1);
    for (int tile : {64, 128}) {
      add(tile - 1);
      add(tile);
      const int64_t last_edge = (S - 1) / tile * tile;  // the start of the last tile
      add(last_edge - 1);
      add(last_edge);
    }
  }
  double spent = 0;
  for (int64_t r : rows) spent += row_cost(r);
  std::mt19937_64 rng(seed ^ 0x6a7edb10c4ull);
  // A row in every 64-token tile while the budget lasts (each covers every head), tile by tile across sequences.
  for (int k = 0; k * kCoverageTile < S && spent < budget_flops; ++k)
    for (int b = 0; b < g.batch() && spent < budget_flops; ++b) {
      const int64_t first = static_cast<int64_t>(b) * S + k * kCoverageTile;
      const int64_t last = std::min<int64_t>(first + kCoverageTile, static_cast<int64_t>(b + 1) * S) - 1;
      if (rows.lower_bound(first) != rows.end() && *rows.lower_bound(first) <= last) continue;
      const int64_t r = std::uniform_int_distribution<int64_t>(first, last)(rng);
      if (rows.insert(r).second) spent += row_cost(r);
    }
  std::uniform_int_distribution<int64_t> pick(0, T - 1);
  const std::size_t min_rows = static_cast<std::size_t>(std::min<int64_t>(16, T));
  while ((spent < budget_flops || rows.size() < min_rows) && static_cast<int64_t>(rows.size()) < T) {
    const int64_t r = pick(rng);
    if (rows.insert(r).second) spent += row_cost(r);
  }
  return {rows.begin(), rows.end()};
}

RowCoverage gated_row_coverage(const GatedGeometry& g, const std::vector<int64_t>& rows) {
  const int S = g.seqlen(), tiles = (S + kCoverageTile - 1) / kCoverageTile;
  std::vector<char> seq(g.batch(), 0), tile(static_cast<std::size_t>(g.batch()) * tiles, 0);
  for (int64_t r : rows) {
    seq[r / S] = 1;
    tile[static_cast<std::size_t>(r / S) * tiles + (r % S) / kCoverageTile] = 1;
  }
  RowCoverage c;  // a checked token holds every head
  c.sequence_heads = static_cast<int64_t>(seq.size()) * g.h_q();
  c.tile_heads = static_cast<int64_t>(tile.size()) * g.h_q();
  c.sequence_heads_covered = std::count(seq.begin(), seq.end(), 1) * g.h_q();
  c.tile_heads_covered = std::count(tile.begin(), tile.end(), 1) * g.h_q();
  return c;
}

std::vector<int64_t> gated_lse_index(const GatedGeometry& g, const std::vector<int64_t>& rows) {
  std::vector<int64_t> idx;
  idx.reserve(rows.size() * g.h_q());
  const int S = g.seqlen();
  for (int64_t r : rows)
    for (int h = 0; h < g.h_q(); ++h) idx.push_back((r / S * g.h_q() + h) * S + r % S);
  return idx;
}

Tolerance gated_tolerance(const Tolerance& base, const float* ref, std::size_t n, const std::optional<MxQuantSpec>& mx,
                          bool fp8) {
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) ss += static_cast<double>(ref[i]) * ref[i];
  const double rms = n > 0 ? std::sqrt(ss / static_cast<double>(n)) : 0.0;
  const double r = base.rtol * kGatedRtolFactor;
  double grow = mx ? 1.0 + std::sqrt((mx::mx_is_fp4(mx_o_format(*mx)) ? 0.5 : 0.125) / r) : 1.0;
  if (fp8) grow = 1.0 + std::sqrt(kGatedFp8Quantisations * 0.125 * base.rtol) / r;
  const double p8 = fp8 ? kFp8PRtol : 0.0;  // the FP8 SDPA's e4m3 P, which the reference does not round
  return {(base.atol * grow + 4 * p8) * std::max(1.0, rms), r * grow + p8};
}

namespace {

// The reference-side data of one case, shared by every kernel bound to it.
struct GatedData {
  GatedHostInputs in;
  std::map<QGateLayout, GatedKernelWeights> weights;  // built per layout on first use
  std::vector<int64_t> rows;
  std::vector<float> ref;      // rows.size() * d_model
  std::vector<float> ref_lse;  // rows.size() * h_q with return_lse
  double ref_ms = 0;
  RowCoverage coverage;
};

class GatedBound final : public BoundKernel {
 public:
  GatedBound(std::unique_ptr<GatedBlock> block, Device& dev, const GatedData& data, const GatedKernelWeights& w)
      : block_(std::move(block)), dev_(dev), data_(data), g_(block_->geometry()),
        h_(dev, block_->options().fp8 ? w.h_codes.size() : data.in.h.size() * 2),
        w_(dev, codes(block_->options()) ? w.qkvg_codes.size() : w.w_qkvg.size() * 2),
        qn_(dev, data.in.q_norm_weight.size() * 2), kn_(dev, data.in.k_norm_weight.size() * 2),
        cos_(dev, data.in.cos.size() * 2), sin_(dev, data.in.sin.size() * 2),
        wo_(dev, codes(block_->options()) ? w.o_codes.size() : data.in.w_o.size() * 2),
        qkvg_scales_(dev, w.qkvg_scales.size()), o_scales_(dev, w.o_scales.size()),
        out_(dev, static_cast<std::size_t>(g_.tokens()) * g_.d_model() * 2), ws_(dev, block_->workspace_size()),
        lens_(dev, data.in.seq_lens.size() * sizeof(int32_t)),
        lse_(dev, block_->options().return_lse ? static_cast<std::size_t>(g_.tokens()) * g_.h_q() * sizeof(float) : 0) {
    const bool mx = block_->options().mx.has_value(), coded = codes(block_->options());
    dev.upload(h_.data(), block_->options().fp8 ? static_cast<const void*>(w.h_codes.data()) : data.in.h.data(),
               h_.bytes());
    dev.upload(w_.data(), coded ? static_cast<const void*>(w.qkvg_codes.data()) : w.w_qkvg.data(), w_.bytes());
    dev.upload(qn_.data(), data.in.q_norm_weight.data(), qn_.bytes());
    dev.upload(kn_.data(), data.in.k_norm_weight.data(), kn_.bytes());
    if (cos_.bytes()) dev.upload(cos_.data(), data.in.cos.data(), cos_.bytes());
    if (sin_.bytes()) dev.upload(sin_.data(), data.in.sin.data(), sin_.bytes());
    dev.upload(wo_.data(), coded ? static_cast<const void*>(w.o_codes.data()) : data.in.w_o.data(), wo_.bytes());
    if (mx) {
      dev.upload(qkvg_scales_.data(), w.qkvg_scales.data(), qkvg_scales_.bytes());
      dev.upload(o_scales_.data(), w.o_scales.data(), o_scales_.bytes());
    }
    if (lens_.bytes()) dev.upload(lens_.data(), data.in.seq_lens.data(), lens_.bytes());
    dev.poison(out_.data(), out_.bytes());
    dev.poison(ws_.data(), ws_.bytes());  // every intermediate must be written before it is read
    if (lse_.bytes()) dev.poison(lse_.data(), lse_.bytes());
    block_->prepare_workspace(ws_.data(), dev.stream());
    dev.synchronize();
    prm_ = make_gated_params(g_);
    prm_.h = h_.data();
    prm_.w_qkvg = w_.data();
    prm_.q_norm_weight = qn_.data();
    prm_.k_norm_weight = kn_.data();
    prm_.cos = cos_.data();
    prm_.sin = sin_.data();
    prm_.w_o = wo_.data();
    prm_.out = out_.data();
    prm_.workspace = ws_.data();
    prm_.seq_lens = lens_.bytes() ? static_cast<const int32_t*>(lens_.data()) : nullptr;
    prm_.lse = static_cast<float*>(lse_.data());
    if (mx) {
      prm_.w_qkvg_scales = static_cast<const uint8_t*>(qkvg_scales_.data());
      prm_.w_o_scales = static_cast<const uint8_t*>(o_scales_.data());
    }
    plan_summary = block_->summary();
    if (is_gpu(dev.backend())) graph_recommended = true;  // a fixed launch sequence, nothing on the host
  }

  void call() override { block_->execute(prm_, dev_.stream()); }

  GateResult gate(const Tolerance& tol) override {
    dev_.synchronize();
    const std::size_t n = static_cast<std::size_t>(g_.tokens()) * g_.d_model();
    std::vector<uint16_t> host(n);
    dev_.download(host.data(), out_.data(), n * 2);
    const Tolerance eff = gated_tolerance(tol, data_.ref.data(), data_.ref.size(), block_->options().mx,
                                          block_->options().fp8.has_value());
    GateResult gr = gate_rows(host.data(), static_cast<int64_t>(n), g_.dtype(), g_.d_model(), data_.rows,
                              data_.ref.data(), eff);
    if (lse_.bytes()) {
      std::vector<float> lse(lse_.bytes() / sizeof(float));
      dev_.download(lse.data(), lse_.data(), lse_.bytes());
      gate_lse(gr, lse.data(), static_cast<int64_t>(lse.size()), gated_lse_index(g_, data_.rows), data_.ref_lse.data(),
               eff.rtol);
    }
    gr.reference = "cpu";
    gr.reference_ms = data_.ref_ms;
    gr.coverage = data_.coverage;
    return gr;
  }

  std::vector<std::pair<std::string, std::function<void()>>> stages() override {
    std::vector<std::pair<std::string, std::function<void()>>> out;
    const auto names = block_->stage_names();
    for (int i = 0; i < static_cast<int>(names.size()); ++i)
      out.emplace_back(names[i], [this, i] { block_->execute_stage(i, prm_, dev_.stream()); });
    return out;
  }

 private:
  // The weights arrive as codes (MX or FP8) rather than halves.
  static bool codes(const GatedOptions& o) { return o.mx || o.fp8; }

  std::unique_ptr<GatedBlock> block_;
  Device& dev_;
  const GatedData& data_;
  const GatedGeometry& g_;
  Buffer h_, w_, qn_, kn_, cos_, sin_, wo_, qkvg_scales_, o_scales_, out_, ws_, lens_, lse_;
  GatedBlockParams prm_;
};

class GatedCase final : public OpCase {
 public:
  explicit GatedCase(const ShapeCase& c) : shape_(c.gated), dtype_(c.dtype) {
    try {
      geom_ = std::make_unique<GatedGeometry>(gated_geometry(shape_, dtype_));
    } catch (const GatedDecline& e) {
      geom_error_ = e.what();
    }
  }

  WorkModel work() const override {
    if (!geom_) return {};
    return gated_block_work(*geom_, shape_options(), shape_.seq_lens);
  }

  nlohmann::json dims() const override {
    nlohmann::json d = {{"batch", shape_.batch}, {"seqlen", shape_.seqlen},  {"d_model", shape_.d_model},
                        {"h_q", shape_.h_q},     {"h_kv", shape_.h_kv},      {"d_head", shape_.d_head},
                        {"rope_dim", shape_.rope_dim}, {"qk_norm", shape_.qk_norm}, {"causal", shape_.causal}};
    if (shape_.window_left >= 0) d["window_left"] = shape_.window_left;
    if (shape_.window_right >= 0) d["window_right"] = shape_.window_right;
    if (!shape_.causal_bottom_right) d["causal_bottom_right"] = false;
    if (!shape_.seq_lens.empty()) d["seq_lens"] = shape_.seq_lens;
    if (shape_.return_lse) d["return_lse"] = true;
    if (const auto& m = shape_.mx)
      d["mx"] = {{"w_qkvg", mx_codes_name(m->w_qkvg)}, {"w_o", mx_codes_name(m->w_o)},
                 {"o", mx::mx_format_name(mx_o_format(*m))}, {"scale_o", m->scale_o}, {"descale_w_o", m->descale_w_o}};
    if (const auto& f = shape_.fp8)
      for (const Fp8Factor& k : kFp8Factors) d["fp8"][k.name] = (*f).*k.field;
    if (geom_) {
      d["n_qkvg"] = geom_->n_qkvg();
      d["scale"] = shape_options().softmax_scale(shape_.d_head);
    }
    return d;
  }

  Support supports(const KernelEntry& k, const KnobValues& knobs) const override {
    if (!k.gated) return Support::no("kernel " + k.name + " does not implement op gated_block");
    if (!geom_) return Support::no(geom_error_);
    try {
      return k.gated->supports(*geom_, gated_options(shape_, knobs), knobs);
    } catch (const std::invalid_argument& e) {  // an option value the knobs cannot express
      return Support::no(e.what());
    }
  }

  MemoryNeed memory_need(const KernelEntry& k, const CaseSettings& s) const override {
    if (!geom_) return {};
    const GatedGeometry& g = *geom_;
    const double eb = static_cast<double>(dtype_bytes(g.dtype())), t = static_cast<double>(g.tokens());
    const double dm = g.d_model(), aw = static_cast<double>(g.attn_width()), n = static_cast<double>(g.n_qkvg());
    const double kvw = static_cast<double>(g.h_kv()) * g.d_head(), rope = 2 * t * g.rope_dim() * eb;
    const double h = t * dm * eb, w_o = dm * aw * eb, w_qkvg = n * dm * eb, norms = 2.0 * g.d_head() * eb;
    const double out = t * dm * eb;
    MemoryNeed need;
    if (!data_) {
      need.host_bytes += h + w_qkvg + w_o + norms + rope;  // h, Wq, Wgate, Wk, Wv, W_o, weights, cos, sin
      // The reference: fp32 K and V of every key, and per checked row (at most all) Q, gate, attention and out.
      if (s.gate) need.host_bytes += t * 2 * kvw * sizeof(float) + t * (3 * aw + dm) * sizeof(float) + t * 8;
    }
    need.host_bytes += w_qkvg + out;  // W_qkvg in the kernel's layout, and the output downloaded for the gate
    AttentionProblem sdpa;
    sdpa.q_lens.assign(g.batch(), g.seqlen());
    sdpa.kv_lens = sdpa.q_lens;
    sdpa.heads = g.h_q();
    sdpa.kv_heads = g.h_kv();
    sdpa.head_size = g.d_head();
    // The workspace at the block size the block picks (a geometry with none is declined; 16 sizes it anyway), with
    // the FP8 mode's codes and a gate pass's output (a bound: the fused gate has none), and cuBLASLt's workspace.
    const double gemm = is_gpu(k.backend) ? 32.0 * (1 << 20) : 0.0;
    const int bs = gated_block_size(g) > 0 ? gated_block_size(g) : 16;
    const std::size_t sdpa_ws = static_cast<std::size_t>(attention_workspace_bound(sdpa));
    const double ws = static_cast<double>(gated_workspace_layout(g, bs, sdpa_ws, 0, shape_.fp8.has_value(), true).total);
    need.device_bytes = h + w_qkvg + w_o + norms + rope + out + ws + gemm;
    return need;
  }

  // Inputs and reference are built in bind(), once, after the first kernel accepted its options: a run whose
  // kernels all decline (the CPU work limit on the 397B shapes) pays for neither.
  void prepare(const CaseSettings& s, Device* /*gpu: the Eigen block reference runs on the host*/) override {
    settings_ = s;
  }

  std::unique_ptr<BoundKernel> bind(const KernelEntry& k, Device& dev, const KnobValues& knobs) override {
    // supports() said yes under these knobs, so a decline here is an error.
    std::unique_ptr<GatedBlock> block = k.gated->create(*geom_, gated_options(shape_, knobs), knobs);
    if (!data_) {
      data_ = std::make_unique<GatedData>();
      data_->in = build_gated_inputs(*geom_, settings_.seed);
      data_->in.seq_lens.assign(shape_.seq_lens.begin(), shape_.seq_lens.end());
      if (shape_.mx) apply_mx_weights(*geom_, *shape_.mx, data_->in);
      if (shape_.fp8) apply_fp8_inputs(*geom_, *shape_.fp8, data_->in);
      if (settings_.gate) {
        const auto t0 = std::chrono::steady_clock::now();
        data_->rows = gated_check_rows(*geom_, shape_options(), data_->in.ref().seq_lens, settings_.reference_gflop * 1e9,
                                       settings_.seed);
        data_->ref.resize(data_->rows.size() * geom_->d_model());
        data_->ref_lse.resize(shape_.return_lse ? data_->rows.size() * geom_->h_q() : 0);
        reference::gated_block(*geom_, shape_options(), data_->in.ref(), data_->rows, data_->ref.data(),
                               shape_.return_lse ? data_->ref_lse.data() : nullptr);
        data_->ref_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        data_->coverage = gated_row_coverage(*geom_, data_->rows);
      }
    }
    const QGateLayout layout = block->options().q_gate_layout;
    auto it = data_->weights.find(layout);
    if (it == data_->weights.end())
      it = data_->weights.emplace(layout, gated_kernel_weights(*geom_, block->options(), data_->in)).first;
    return std::make_unique<GatedBound>(std::move(block), dev, *data_, it->second);
  }

 private:
  // What changes the math (the reference's view): the shape's mask, window and norm; defaults for the rest.
  GatedOptions shape_options() const {
    GatedOptions o;
    set_shape_options(shape_, o);
    return o;
  }

  GatedShape shape_;
  DType dtype_;
  std::unique_ptr<GatedGeometry> geom_;
  std::string geom_error_;
  CaseSettings settings_;
  std::unique_ptr<GatedData> data_;
};

}  // namespace

std::unique_ptr<OpCase> make_gated_case(const ShapeCase& c) { return std::make_unique<GatedCase>(c); }

}  // namespace attnbench
