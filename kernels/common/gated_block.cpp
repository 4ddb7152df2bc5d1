#include "attnbench/gated_block.hpp"

#include <cmath>
#include <tuple>
#include <cstring>
#include <limits>

namespace attnbench {

GatedDecline::GatedDecline(std::string field, std::string reason)
    : std::invalid_argument("field '" + field + "': " + reason), field_(std::move(field)), reason_(std::move(reason)) {}

GatedGeometry::GatedGeometry(const GatedDims& d) : d_(d) {
  auto num = [](int v) { return std::to_string(v); };
  if (d.batch < 1) throw GatedDecline("batch", "must be >= 1, got " + num(d.batch));
  if (d.seqlen < 1) throw GatedDecline("seqlen", "must be >= 1, got " + num(d.seqlen));
  if (static_cast<int64_t>(d.batch) * d.seqlen > std::numeric_limits<int32_t>::max())
    throw GatedDecline("seqlen", "batch * seqlen must be < 2^31 (int32 sequence offsets)");
  if (d.d_model < 1) throw GatedDecline("d_model", "must be >= 1, got " + num(d.d_model));
  if (d.d_model % 8 != 0)
    throw GatedDecline("d_model", "must be a multiple of 8 (16-byte rows of h, W and out), got " + num(d.d_model));
  if (d.h_q < 1) throw GatedDecline("h_q", "must be >= 1, got " + num(d.h_q));
  if (d.h_kv < 1) throw GatedDecline("h_kv", "must be >= 1, got " + num(d.h_kv));
  if (d.h_q % d.h_kv != 0)
    throw GatedDecline("h_kv", "h_q " + num(d.h_q) + " is not a multiple of h_kv " + num(d.h_kv));
  if (!gated_head_size_supported(d.d_head))
    throw GatedDecline("d_head", num(d.d_head) + " not in {64, 128, 256}");
  if (d.rope_dim < 0 || d.rope_dim > d.d_head || d.rope_dim % 2 != 0)
    throw GatedDecline("rope_dim", "must be even and in [0, d_head = " + num(d.d_head) + "], got " + num(d.rope_dim));
  if (d.dtype != DType::bf16 && d.dtype != DType::f16) throw GatedDecline("dtype", "not bf16 or fp16");
}

const char* q_gate_layout_name(QGateLayout l) { return l == QGateLayout::flat ? "flat" : "interleaved"; }

QGateLayout parse_q_gate_layout(const std::string& s) {
  if (s == "flat") return QGateLayout::flat;
  if (s == "interleaved") return QGateLayout::interleaved;
  throw GatedDecline("q_gate_layout", "'" + s + "' is not flat|interleaved");
}

float GatedOptions::softmax_scale(int d_head) const {
  return attn_scale > 0.f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(d_head));
}

void validate_gated_options(const GatedOptions& o) {
  if (!std::isfinite(o.attn_scale) || o.attn_scale < 0.f)
    throw GatedDecline("attn_scale", "must be finite and >= 0 (0 = d_head^-0.5)");
  if (!std::isfinite(o.norm_weight_offset)) throw GatedDecline("norm_weight_offset", "must be finite");
  if (o.window_left < -1)
    throw GatedDecline("window_left", "must be -1 (unbounded) or >= 0, got " + std::to_string(o.window_left));
  if (o.window_right < -1)
    throw GatedDecline("window_right", "must be -1 (unbounded) or >= 0, got " + std::to_string(o.window_right));
}

void validate_gated_save(const GatedGeometry& g, const GatedOptions& o) {
  if (!o.save_for_backward) return;
  const char* why = ": the backward is 16-bit only (no save set of a quantized pipeline)";
  if (o.fp8) throw GatedDecline("fp8", std::string("save_for_backward with fp8") + why);
  if (o.mx) throw GatedDecline("mx", std::string("save_for_backward with mx") + why);
  if (gated_gate_in_sdpa(o))
    throw GatedDecline("fuse_gate", "save_for_backward needs the pre-gate O, which the fused gate never writes");
  if (gated_fuses_norm_rope(g, o))
    throw GatedDecline("fuse_norm_rope", "save_for_backward needs the pre-norm Q and the packed normed Q, which the "
                                         "SDPA's Q prologue never writes");
}

std::string gated_seq_lens_conflict(const GatedGeometry& g, const int32_t* seq_lens) {
  if (!seq_lens) return "";
  for (int b = 0; b < g.batch(); ++b)
    if (seq_lens[b] < 0 || seq_lens[b] > g.seqlen())
      return "seq_lens[" + std::to_string(b) + "] = " + std::to_string(seq_lens[b]) + " outside [0, seqlen " +
             std::to_string(g.seqlen()) + "]";
  return "";
}

int64_t gated_codes_stride(const GatedGeometry& g) {
  return static_cast<int64_t>(g.h_q() + 2 * g.h_kv()) * g.d_head();
}

GatedCodesColumns gated_codes_columns(const GatedGeometry& g) {
  GatedCodesColumns c;
  c.k0 = g.attn_width();
  c.v0 = c.k0 + static_cast<int64_t>(g.h_kv()) * g.d_head();
  return c;
}

GatedColumns gated_columns(const GatedGeometry& g, QGateLayout layout) {
  const int64_t d = g.d_head(), qw = g.attn_width();
  GatedColumns c;
  if (layout == QGateLayout::flat) {
    c.q0 = 0;
    c.q_head_stride = d;
    c.g0 = qw;
    c.g_head_stride = d;
  } else {
    c.q0 = 0;
    c.q_head_stride = 2 * d;
    c.g0 = d;
    c.g_head_stride = 2 * d;
  }
  c.k0 = 2 * qw;
  c.v0 = 2 * qw + static_cast<int64_t>(g.h_kv()) * d;
  return c;
}

std::vector<uint16_t> build_w_qkvg(const GatedGeometry& g, QGateLayout layout, const uint16_t* wq,
                                   const uint16_t* wgate, const uint16_t* wk, const uint16_t* wv) {
  if (!wq || !wgate || !wk || !wv) throw std::invalid_argument("build_w_qkvg: a weight pointer is null");
  const std::size_t dm = static_cast<std::size_t>(g.d_model()), d = static_cast<std::size_t>(g.d_head());
  std::vector<uint16_t> w(static_cast<std::size_t>(g.n_qkvg()) * dm);
  const GatedColumns c = gated_columns(g, layout);
  auto rows = [&](int64_t dst_row, const uint16_t* src, std::size_t n_rows) {
    std::memcpy(w.data() + static_cast<std::size_t>(dst_row) * dm, src, n_rows * dm * sizeof(uint16_t));
  };
  for (int h = 0; h < g.h_q(); ++h) {
    rows(c.q0 + h * c.q_head_stride, wq + h * d * dm, d);
    rows(c.g0 + h * c.g_head_stride, wgate + h * d * dm, d);
  }
  rows(c.k0, wk, g.h_kv() * d);
  rows(c.v0, wv, g.h_kv() * d);
  return w;
}

int gated_block_size(const GatedGeometry& g) {
  if (g.batch() == 1) return 64;
  for (int bs : {64, 32, 16})
    if (g.seqlen() % bs == 0) return bs;
  return 0;
}

AttentionProblem gated_sdpa_problem(const GatedGeometry& g, const GatedOptions& o, int block_size) {
  AttentionProblem p;
  p.q_lens.assign(g.batch(), g.seqlen());
  p.kv_lens.assign(g.batch(), g.seqlen());
  p.heads = g.h_q();
  p.kv_heads = g.h_kv();
  p.head_size = g.d_head();
  p.block_size = block_size > 0 ? block_size : 64;
  p.causal = o.is_causal;
  p.top_left = !o.causal_bottom_right;  // differs from bottom-right only where seq_lens shorten the keys
  p.return_lse = o.return_lse;
  p.scale = o.softmax_scale(g.d_head());
  p.types = AttentionTypes::all(g.dtype());
  if (o.fp8) {  // the FP8 SDPA over the codes of Q, K and V, O in the dtype
    p.types = {DType::e4m3, DType::e4m3, g.dtype()};
    p.features.q_scale = 1.f / o.fp8->scale_q;
    p.features.k_scale = 1.f / o.fp8->scale_k;
    p.features.v_scale = 1.f / o.fp8->scale_v;
  }
  p.features.window_left = o.window_left;
  p.features.window_right = o.window_right;
  p.fusion.output_gate = gated_gate_in_sdpa(o);
  p.fusion.q_norm = gated_fuses_norm_rope(g, o) && o.qk_norm;
  p.fusion.q_rope_dim = gated_fuses_norm_rope(g, o) ? g.rope_dim() : 0;
  return p;
}

std::vector<GatedStage> gated_stages(const GatedGeometry& g, const GatedOptions& o) {
  std::vector<GatedStage> st = {GatedStage::proj};
  if (o.qk_norm || g.rope_dim() > 0 || o.save_for_backward) st.push_back(GatedStage::norm_rope);
  if (o.fp8 && !gated_fuses_quantize(g, o)) st.push_back(GatedStage::quantize_qkv);
  st.push_back(GatedStage::sdpa);
  if (o.save_for_backward && o.return_lse) st.push_back(GatedStage::lse_reorder);
  if (!o.fuse_gate) st.push_back(GatedStage::gate);
  if (o.fp8) st.push_back(GatedStage::quantize_o);
  st.push_back(GatedStage::out_proj);
  return st;
}

bool gated_fuses_norm_rope(const GatedGeometry& g, const GatedOptions& o) {
  return !o.fp8 && o.fuse_norm_rope && (o.qk_norm || g.rope_dim() > 0);
}

bool gated_gate_in_sdpa(const GatedOptions& o) { return o.fuse_gate && !o.fp8; }

bool gated_fuses_quantize(const GatedGeometry& g, const GatedOptions& o) {
  return o.fp8 && o.fuse_norm_rope && (o.qk_norm || g.rope_dim() > 0);
}

std::string gated_stage_name(GatedStage s, const GatedGeometry& g, const GatedOptions& o) {
  const bool fused = gated_fuses_norm_rope(g, o);
  switch (s) {
    case GatedStage::proj: return o.mx ? "mx_qkvg_proj" : o.fp8 ? "fp8_qkvg_proj" : "qkvg_proj";
    case GatedStage::norm_rope:
      if (o.save_for_backward) return o.qk_norm || g.rope_dim() > 0 ? "norm_rope+save" : "save_qkv";
      return fused ? "k_norm_rope" : gated_fuses_quantize(g, o) ? "norm_rope+quantize" : "norm_rope";
    case GatedStage::quantize_qkv: return "quantize_qkv";
    case GatedStage::quantize_o: return o.fuse_gate ? "gate+quantize_o" : "quantize_o";
    case GatedStage::sdpa:
      return std::string(fused ? "q_norm_rope+" : "") + "sdpa" + (gated_gate_in_sdpa(o) ? "+gate" : "");
    case GatedStage::lse_reorder: return "lse_reorder";
    case GatedStage::gate: return o.save_for_backward ? "gate+save" : "gate";
    case GatedStage::out_proj: return o.mx ? "mx_out_proj" : o.fp8 ? "fp8_out_proj" : "out_proj";
  }
  return "?";
}

void set_gated_q_prologue(const GatedGeometry& g, const GatedOptions& o, const GatedBlockParams& p,
                          AttentionParams& a) {
  if (!gated_fuses_norm_rope(g, o)) return;
  if (o.qk_norm) {
    a.prologue.q_norm_weight = p.q_norm_weight;
    a.prologue.q_norm_offset = o.norm_weight_offset;
    a.prologue.q_norm_eps = kGatedNormEps;
  }
  a.prologue.q_rope_dim = g.rope_dim();
  if (g.rope_dim() > 0) {
    a.prologue.rope_cos = p.cos;
    a.prologue.rope_sin = p.sin;
  }
}

AttentionParams gated_sdpa_strides(const GatedGeometry& g, const GatedOptions& o, const AttentionProblem& prob) {
  const GatedColumns cols = gated_columns(g, o.q_gate_layout);
  const int64_t N = g.n_qkvg();
  AttentionParams a = make_attention_params(prob);
  a.lse_stride_start = g.h_q();  // [B, h_q, S]: sequence b starts at token b S
  a.lse_stride_row = 1;
  a.lse_stride_head = g.seqlen();
  a.q_stride_token = N;
  a.q_stride_head = cols.q_head_stride;
  a.kv_stride_block = N * prob.block_size;
  a.kv_stride_token = N;
  a.kv_stride_head = g.d_head();
  if (o.save_for_backward) {  // the save set's packed q, k, v; its LSE [T, h_q]
    const int64_t kw = static_cast<int64_t>(g.h_kv()) * g.d_head();
    a.q_stride_token = g.attn_width();
    a.q_stride_head = g.d_head();
    a.kv_stride_block = kw * prob.block_size;
    a.kv_stride_token = kw;
    a.lse_stride_start = a.lse_stride_row = g.h_q();
    a.lse_stride_head = 1;
  }
  if (o.fp8) {  // the codes of Q | K | V, one byte per element
    const int64_t W = gated_codes_stride(g);
    a.q_stride_token = W;
    a.q_stride_head = g.d_head();
    a.kv_stride_block = W * prob.block_size;
    a.kv_stride_token = W;
  }
  return a;
}

AttentionParams gated_sdpa_params(const GatedGeometry& g, const GatedOptions& o, const AttentionProblem& prob,
                                  const GatedWorkspaceLayout& l, const GatedBlockParams& p) {
  const GatedColumns cols = gated_columns(g, o.q_gate_layout);
  const int64_t N = g.n_qkvg();
  auto* ws = static_cast<unsigned char*>(p.workspace);
  const auto* proj = reinterpret_cast<const uint16_t*>(ws + l.proj);
  AttentionParams a = gated_sdpa_strides(g, o, prob);
  if (o.fp8) {
    const GatedCodesColumns cc = gated_codes_columns(g);
    const unsigned char* codes = ws + l.qkv_codes;
    a.q = codes;
    a.k_cache = codes + cc.k0;
    a.v_cache = codes + cc.v0;
  } else if (o.save_for_backward) {
    a.q = p.save.q;
    a.k_cache = p.save.k;
    a.v_cache = p.save.v;
  } else {
    a.q = proj + cols.q0;
    a.k_cache = proj + cols.k0;
    a.v_cache = proj + cols.v0;
  }
  a.out = o.save_for_backward ? p.save.o : ws + l.attn;
  a.cu_seqlens_q = reinterpret_cast<const int32_t*>(ws + l.cu_seqlens_q);
  a.seqused_k = p.seq_lens ? p.seq_lens : reinterpret_cast<const int32_t*>(ws + l.seqused_k);
  a.block_table = reinterpret_cast<const int32_t*>(ws + l.block_table);
  a.block_table_stride = l.blocks_per_seq;
  a.workspace = l.sdpa_bytes ? ws + l.sdpa : nullptr;
  a.lse = o.save_for_backward ? p.save.lse : p.lse;
  set_gated_q_prologue(g, o, p, a);
  if (gated_gate_in_sdpa(o)) {
    a.epilogue.gate = proj + cols.g0;
    a.epilogue.gate_stride_token = N;
    a.epilogue.gate_stride_head = cols.g_head_stride;
  }
  return a;
}

WorkModel gated_block_work(const GatedGeometry& g, const GatedOptions& o, const std::vector<int>& seq_lens) {
  WorkModel w;
  const double t = static_cast<double>(g.tokens()), dm = g.d_model();
  const double n = static_cast<double>(g.n_qkvg()), aw = static_cast<double>(g.attn_width());
  AttentionProblem sdpa = gated_sdpa_problem(g, o, 64);
  if (!seq_lens.empty() && static_cast<int>(seq_lens.size()) != g.batch())
    throw std::invalid_argument("gated_block_work: " + std::to_string(seq_lens.size()) + " seq_lens for batch " +
                                std::to_string(g.batch()));
  if (!seq_lens.empty()) sdpa.kv_lens = seq_lens;
  w.flops = 2.0 * t * dm * (n + aw) + attention_work(sdpa).flops;
  const double eb = static_cast<double>(dtype_bytes(g.dtype()));
  w.bytes = eb * (t * dm            // h
                  + 2.0 * t * g.rope_dim()  // cos, sin
                  + (o.qk_norm ? 2.0 * g.d_head() : 0.0)
                  + t * dm);        // out
  if (o.fp8) {  // h and both weights as one-byte codes
    w.bytes += (1.0 - eb) * t * dm + n * dm + dm * aw;
  } else if (o.mx) {  // the weights' codes and scales
    for (const auto& [codes, rows, cols] : {std::tuple{o.mx->w_qkvg, g.n_qkvg(), static_cast<int64_t>(g.d_model())},
                                            std::tuple{o.mx->w_o, static_cast<int64_t>(g.d_model()), g.attn_width()}}) {
      const mx::MxFormat f = codes == MxCodes::e2m1 ? mx::MxFormat::mxfp4 : mx::MxFormat::mxfp8;  // e5m2 is declined
      w.bytes += static_cast<double>(mx::mx_code_bytes(f, rows, cols) + mx::mx_scale_bytes(f, rows, cols));
    }
  } else {
    w.bytes += eb * (n * dm + dm * aw);  // W_qkvg, W_o
  }
  w.bytes += gated_save_bytes(g, o, false);
  return w;
}

double gated_save_bytes(const GatedGeometry& g, const GatedOptions& o, bool qk_pre) {
  if (!o.save_for_backward) return 0;
  const double t = static_cast<double>(g.tokens()), eb = static_cast<double>(dtype_bytes(g.dtype()));
  const double qw = static_cast<double>(g.attn_width()), kw = static_cast<double>(g.h_kv()) * g.d_head();
  double b = eb * t * (3 * qw + 2 * kw) + 4.0 * t * g.h_q();  // q, gate, o; k, v; lse
  if (o.qk_norm) b += 4.0 * t * (g.h_q() + g.h_kv());          // rstd_q, rstd_k
  if (qk_pre) b += eb * t * (qw + kw);
  return b;
}

namespace {
std::size_t align_up(std::size_t v) { return (v + kGatedWorkspaceAlign - 1) / kGatedWorkspaceAlign * kGatedWorkspaceAlign; }
}  // namespace

GatedWorkspaceLayout gated_workspace_layout(const GatedGeometry& g, int block_size, std::size_t sdpa_bytes,
                                            std::size_t gemm_bytes, bool fp8, bool gate_pass, bool save) {
  if (block_size <= 0) throw std::invalid_argument("gated_workspace_layout: block_size must be > 0");
  GatedWorkspaceLayout l;
  const std::size_t eb = dtype_bytes(g.dtype());
  const std::size_t t = static_cast<std::size_t>(g.tokens());
  l.block_size = block_size;
  l.blocks_per_seq = (g.seqlen() + block_size - 1) / block_size;
  l.proj_rows = (g.tokens() + block_size - 1) / block_size * block_size;
  l.sdpa_bytes = sdpa_bytes;
  l.gemm_bytes = gemm_bytes;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t off = at;
    at = align_up(at + bytes);
    return off;
  };
  l.proj = take(static_cast<std::size_t>(l.proj_rows) * static_cast<std::size_t>(g.n_qkvg()) * eb);
  l.attn = take(save ? 0 : t * static_cast<std::size_t>(g.attn_width()) * eb);
  l.sdpa = take(sdpa_bytes);
  l.cu_seqlens_q = take(sizeof(int32_t) * (g.batch() + 1));
  l.seqused_k = take(sizeof(int32_t) * g.batch());
  l.block_table = take(sizeof(int32_t) * static_cast<std::size_t>(g.batch()) * l.blocks_per_seq);
  l.gemm = take(gemm_bytes);
  l.codes_stride = fp8 ? gated_codes_stride(g) : 0;
  l.qkv_codes = take(fp8 ? static_cast<std::size_t>(l.proj_rows * l.codes_stride) : 0);
  l.o_codes = take(fp8 ? t * static_cast<std::size_t>(g.attn_width()) : 0);
  l.gated = take(gate_pass ? t * static_cast<std::size_t>(g.attn_width()) * eb : 0);
  l.total = at;
  return l;
}

std::size_t GatedWorkspaceLayout::pad_offset(const GatedGeometry& g) const {
  return proj + static_cast<std::size_t>(g.tokens()) * static_cast<std::size_t>(g.n_qkvg()) * dtype_bytes(g.dtype());
}

std::size_t GatedWorkspaceLayout::pad_bytes(const GatedGeometry& g) const {
  return static_cast<std::size_t>(proj_rows - g.tokens()) * static_cast<std::size_t>(g.n_qkvg()) *
         dtype_bytes(g.dtype());
}

namespace {
bool fusion_knob(const KnobValues& knobs, const char* name, bool auto_value) {
  const std::string& v = knobs.get(name);
  return v == "auto" ? auto_value : v == "1";
}
}  // namespace

void apply_gated_knobs(const KnobValues& knobs, GatedOptions& o) {
  // auto, by the block's mode (kernels/NOTES.md, session 25, the fusion sweeps): the plain 16-bit block runs both
  // passes apart (the SDPA's gate epilogue cost it 2-4%, its Q prologue 0-2%); the FP8 block fuses both (each saves a
  // quantisation pass: together 3-6% at S >= 2048); the MX modes keep the gate fused, as before (not timed apart).
  const bool fp8 = o.fp8.has_value();
  o.fuse_gate = fusion_knob(knobs, "ATTNBENCH_GATED_FUSE_GATE", fp8 || o.mx.has_value());
  o.fuse_norm_rope = fusion_knob(knobs, "ATTNBENCH_GATED_FUSE_NORM_ROPE", fp8);
  o.q_gate_layout = parse_q_gate_layout(knobs.get("ATTNBENCH_GATED_QGATE_LAYOUT"));
}

GatedBlockParams make_gated_params(const GatedGeometry& g) {
  GatedBlockParams p;
  p.batch = g.batch();
  p.seqlen = g.seqlen();
  p.d_model = g.d_model();
  p.h_q = g.h_q();
  p.h_kv = g.h_kv();
  p.d_head = g.d_head();
  p.rope_dim = g.rope_dim();
  p.dtype = g.dtype();
  return p;
}

}  // namespace attnbench
