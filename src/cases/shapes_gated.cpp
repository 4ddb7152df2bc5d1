// The gated block's shape fields (ops gated_block and gated_block_backward), parsed into GatedShape.
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cases/shape_parse.hpp"
#include "core/json_file.hpp"

using nlohmann::json;

namespace attnbench::shape_parse {

namespace {

// "mx": {"w_qkvg": codes, "w_o": codes, "o": "mxfp8" | "nvfp4" | "mxfp4", "scale_o": x, "descale_w_o": x}, codes
// "e4m3" or "e2m1" ("e5m2" parses, and the block declines it); every key optional.
MxQuantSpec parse_mx(const json& v, const Where& w) {
  if (!v.is_object()) w.fail("mx", "expected an object, got " + compact_value(v.dump()));
  MxQuantSpec m;
  for (const auto& [key, val] : v.items()) {
    const std::string field = "mx." + key;
    if (key == "w_qkvg" || key == "w_o") {
      const auto c = val.is_string() ? parse_mx_codes(val.get<std::string>()) : std::nullopt;
      if (!c) w.fail(field, "expected \"e4m3\" (MXFP8) or \"e2m1\" (MXFP4), got " + compact_value(val.dump()));
      (key == "w_qkvg" ? m.w_qkvg : m.w_o) = *c;
    } else if (key == "o") {
      const std::string o = val.is_string() ? val.get<std::string>() : "";
      const auto f = parse_fp4_format(o);
      if (!f && o != "mxfp8") w.fail(field, "expected \"mxfp8\", \"nvfp4\" or \"mxfp4\", got " + compact_value(val.dump()));
      m.o_fp4 = f.has_value();
      if (f) m.o_format = *f;
    } else if (key == "scale_o" || key == "descale_w_o") {
      if (!val.is_number() || !(val.get<double>() > 0) || val.get<double>() > 3e38)
        w.fail(field, "expected a number > 0 that fits a float, got " + compact_value(val.dump()));
      (key == "scale_o" ? m.scale_o : m.descale_w_o) = static_cast<float>(val.get<double>());
    } else {
      w.fail(field, "unknown key (known: w_qkvg, w_o, o, scale_o, descale_w_o)");
    }
  }
  return m;
}

// The FP8 mode's scales: each given one replaces the default the geometry gives (gated_fp8_defaults).
Fp8QuantSpec parse_fp8(const json& v, const Where& w, int d_model, int64_t attn_width) {
  if (!v.is_object()) w.fail("fp8", "expected an object, got " + compact_value(v.dump()));
  Fp8QuantSpec f = gated_fp8_defaults(d_model, attn_width);
  for (const auto& [key, val] : v.items()) {
    float* dst = nullptr;
    std::string known;
    for (const Fp8Factor& k : kFp8Factors) {
      if (key == k.name) dst = &(f.*k.field);
      known += std::string(known.empty() ? "" : ", ") + k.name;
    }
    if (!dst) w.fail("fp8." + key, "unknown key (known: " + known + ")");
    // Bounded so that the reciprocal is a normal float too.
    if (!val.is_number() || !(val.get<double>() >= 1e-30) || val.get<double>() > 1e30)
      w.fail("fp8." + key, "expected a number in [1e-30, 1e30], got " + compact_value(val.dump()));
    *dst = static_cast<float>(val.get<double>());
  }
  return f;
}

}  // namespace

// The keys a gated_block shape may have. Function-local statics: shapes.cpp reads them, and the order in which two
// files' globals are built is not defined.
const std::set<std::string>& gated_keys() {
  static const std::set<std::string> kGatedKeys = {"name", "batch",  "seqlen",  "d_model", "h_q",    "h_kv",
                                                   "d_head", "rope_dim", "qk_norm", "causal", "dtypes", "window_left",
                                                   "window_right", "causal_bottom_right", "seq_lens", "return_lse", "mx",
                                                   "fp8"};
  return kGatedKeys;
}

// The backward's: the forward's (what it declines, it declines by name: validate_gated_bwd), the recompute policy and
// the gradients asked for.
const std::set<std::string>& gated_bwd_keys() {
  static const std::set<std::string> kGatedBwdKeys = [] {
    std::set<std::string> k = gated_keys();
    k.insert({"recompute", "need"});
    return k;
  }();
  return kGatedBwdKeys;
}

GatedShape parse_gated(const json& s, const Where& w) {
  GatedShape g;
  for (const char* k : {"seqlen", "d_model", "h_q", "h_kv", "d_head", "rope_dim"}) require(s, k, w);
  if (s.contains("batch")) g.batch = get_int(s, "batch", w, kMaxBatch);
  g.seqlen = get_int(s, "seqlen", w, kMaxLength);
  g.d_model = get_int(s, "d_model", w, kMaxWidth);
  g.h_q = get_int(s, "h_q", w, kMaxHeads);
  g.h_kv = get_int(s, "h_kv", w, kMaxHeads);
  g.d_head = get_int(s, "d_head", w, kMaxWidth);
  g.rope_dim = get_int(s, "rope_dim", w, kMaxWidth, 0);
  if (s.contains("qk_norm")) g.qk_norm = get_bool(s, "qk_norm", w);
  if (s.contains("causal")) g.causal = get_bool(s, "causal", w);
  if (s.contains("window_left")) g.window_left = get_int(s, "window_left", w, kMaxLength, -1);
  if (s.contains("window_right")) g.window_right = get_int(s, "window_right", w, kMaxLength, -1);
  if (s.contains("causal_bottom_right")) g.causal_bottom_right = get_bool(s, "causal_bottom_right", w);
  if (s.contains("return_lse")) g.return_lse = get_bool(s, "return_lse", w);
  if (s.contains("mx")) g.mx = parse_mx(s.at("mx"), w);
  if (s.contains("fp8")) {
    if (g.mx) w.fail("fp8", "excludes mx (the FP8 mode and the MX modes are two pipelines; give one)");
    g.fp8 = parse_fp8(s.at("fp8"), w, g.d_model, static_cast<int64_t>(g.h_q) * g.d_head);
  }
  if (s.contains("seq_lens")) {
    const json& v = s.at("seq_lens");
    if (!v.is_array() || static_cast<long long>(v.size()) != g.batch)
      w.fail("seq_lens", "expected a list of batch = " + std::to_string(g.batch) + " integers, got " +
                             compact_value(v.dump()));
    for (const auto& e : v) {
      if (!e.is_number_integer() || e.get<long long>() < 0 || e.get<long long>() > g.seqlen)
        w.fail("seq_lens", "each length must be an integer in [0, seqlen = " + std::to_string(g.seqlen) + "], got " +
                               compact_value(e.dump()));
      g.seq_lens.push_back(static_cast<int>(e.get<long long>()));
    }
  }
  if (g.h_q % g.h_kv != 0) w.fail("h_kv", "h_q " + std::to_string(g.h_q) + " is not a multiple of h_kv " + std::to_string(g.h_kv));
  if (g.rope_dim > g.d_head || g.rope_dim % 2 != 0)
    w.fail("rope_dim", "must be even and <= d_head, got " + std::to_string(g.rope_dim));
  return g;
}

// "recompute": "recompute_qk_pre" | "save_all"; "need": the gradients asked for, a non-empty list of "dh",
// "dw_qkvg", "dw_o", "dw_norms" (absent: all, the norms' following qk_norm).
GatedBwdOptions parse_gated_bwd(const json& s, const Where& w) {
  GatedBwdOptions b;
  if (s.contains("recompute")) {
    const json& v = s.at("recompute");
    if (v == "recompute_qk_pre") b.recompute = RecomputePolicy::recompute_qk_pre;
    else if (v == "save_all") b.recompute = RecomputePolicy::save_all;
    else w.fail("recompute", "expected \"recompute_qk_pre\" or \"save_all\", got " + compact_value(v.dump()));
  }
  if (!s.contains("need")) return b;
  const json& v = s.at("need");
  const std::string known = "\"dh\", \"dw_qkvg\", \"dw_o\", \"dw_norms\"";
  if (!v.is_array() || v.empty()) w.fail("need", "expected a non-empty list of " + known + ", got " + compact_value(v.dump()));
  b.need_dh = b.need_dw_qkvg = b.need_dw_o = false;
  b.need_dw_norms = false;
  for (const json& e : v) {
    if (e == "dh") b.need_dh = true;
    else if (e == "dw_qkvg") b.need_dw_qkvg = true;
    else if (e == "dw_o") b.need_dw_o = true;
    else if (e == "dw_norms") b.need_dw_norms = true;
    else w.fail("need", "unknown gradient " + compact_value(e.dump()) + " (known: " + known + ")");
  }
  return b;
}

}  // namespace attnbench::shape_parse
