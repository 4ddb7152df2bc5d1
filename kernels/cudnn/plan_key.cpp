#include "cudnn/plan_key.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace attnbench::cudnn {

Layout layout_of(const AttentionParams& a) {
  return {a.q_stride_token, a.q_stride_head, a.o_stride_token,  a.o_stride_head,
          a.kv_stride_block, a.kv_stride_token, a.kv_stride_head, a.block_table_stride};
}

Layout planned_layout(const AttentionProblem& p) {
  AttentionParams a = make_attention_params(p);
  a.block_table_stride = p.max_blocks_per_seq() + 1;
  return layout_of(a);
}

bool q_is_kv(const AttentionProblem& p) {
  for (std::size_t s = 0; s < p.q_lens.size(); ++s)
    if (p.q_lens[s] != p.kv_lens[s]) return false;
  return true;
}

bool ragged_q(const AttentionProblem& p) {
  for (int q : p.q_lens)
    if (q != p.q_lens.front()) return true;
  return false;
}

int64_t container_blocks(const AttentionProblem& p, const Layout& l) {
  const bool unused_slots = p.num_blocks() < static_cast<int64_t>(p.num_seqs()) * l.table_stride;
  return p.num_blocks() + (unused_slots ? 1 : 0);
}

namespace {
// The table's check, thrown: values that did not come through KnobValues::resolve get the same message.
void check(const char* knob, const std::string& value) {
  if (const std::string err = check_knob(knob, value); !err.empty()) throw std::invalid_argument(err);
}

const char* name_of(Heuristic h) {
  switch (h) {
    case Heuristic::a:
      return "a";
    case Heuristic::b:
      return "b";
    case Heuristic::fallback:
      return "fallback";
  }
  return "?";
}
}  // namespace

std::vector<Heuristic> parse_heuristics(const std::string& value) {
  check(kHeuristicsKnob, value);
  std::vector<Heuristic> out;
  std::stringstream items(value);
  std::string item;
  while (std::getline(items, item, ','))
    out.push_back(item == "a" ? Heuristic::a : item == "b" ? Heuristic::b : Heuristic::fallback);
  return out;
}

PlanChoice parse_plan_choice(const std::string& heuristics, const std::string& plan,
                             const std::string& implementation) {
  PlanChoice c;
  check(kImplKnob, implementation);
  c.implementation = implementation == "composite" ? Implementation::composite
                     : implementation == "unified" ? Implementation::unified
                                                   : Implementation::automatic;
  c.heuristics = parse_heuristics(heuristics);
  check(kPlanKnob, plan);
  if (plan == "autotune") {
    c.pick = PlanChoice::Pick::autotune;
  } else if (plan != "first") {
    c.pick = PlanChoice::Pick::index;
    c.index = std::stoll(plan);  // the table's check: digits only, fewer than ten
  }
  return c;
}

PlanChoice plan_choice(const KnobValues& knobs) {
  PlanChoice c = parse_plan_choice(knobs.get(kHeuristicsKnob), knobs.get(kPlanKnob), knobs.get(kImplKnob));
  c.diagonal = diagonal_choice(knobs);
  return c;
}

Diagonal diagonal_choice(const KnobValues& knobs) {
  const std::string v = knobs.get(kDiagonalKnob);
  check(kDiagonalKnob, v);
  return v == "declared" ? Diagonal::declared : Diagonal::automatic;
}

std::string implementation_text(Implementation i) {
  switch (i) {
    case Implementation::automatic:
      return "auto";
    case Implementation::composite:
      return "composite";
    case Implementation::unified:
      return "unified";
  }
  return "?";
}

std::string heuristics_text(const std::vector<Heuristic>& h) {
  std::string out;
  for (Heuristic m : h) out += (out.empty() ? "" : ",") + std::string(name_of(m));
  return out;
}

std::string pick_text(const PlanChoice& c) {
  switch (c.pick) {
    case PlanChoice::Pick::first:
      return "first";
    case PlanChoice::Pick::index:
      return std::to_string(c.index);
    case PlanChoice::Pick::autotune:
      return "autotune";
  }
  return "?";
}

bool cudnn_alibi_slopes(const std::vector<float>& slopes) {
  const int heads = static_cast<int>(slopes.size());
  if (heads == 0 || (heads & (heads - 1)) != 0) return false;  // its formula past a power of two is another
  for (int h = 0; h < heads; ++h) {
    const double want = std::exp2(-8.0 * (h + 1) / heads);
    if (std::abs(slopes[h] - want) > 1e-3 * want) return false;  // a shape file's rounded digits still match
  }
  return true;
}

std::string feature_conflict(const AttentionProblem& p) {
  const AttentionFeatures& f = p.features;
  if (f.softcap != 0.f)
    return "feature 'softcap': cuDNN's SDPA node has none (its score_mod, the only way to one, excludes the "
           "padding mask the paged inputs need)";
  if (!f.qq_bias.empty() || f.qq_bias_len != 0) return "feature 'qq_bias': cuDNN's SDPA node takes no such bias";
  if (!f.alibi_slopes.empty()) {
    if (!cudnn_alibi_slopes(f.alibi_slopes))
      return "feature 'alibi_slopes': cuDNN's ALiBi mask has its own slopes 2^(-8 (h + 1) / H) for a power-of-two "
             "H, and these are other";
    if (!p.causal) return "feature 'alibi_slopes': cuDNN's ALiBi mask needs the causal mask";
    for (std::size_t s = 0; s < p.q_lens.size(); ++s)
      if (p.q_lens[s] != p.kv_lens[s])
        return "feature 'alibi_slopes': cuDNN's ALiBi mask is top-left aligned, so q_len must equal kv_len (" +
               std::to_string(p.q_lens[s]) + " vs " + std::to_string(p.kv_lens[s]) + ")";
  }
  if (!f.sinks.empty())
    for (int q : p.q_lens)
      if (q == 1)
        return "feature 'sinks': cuDNN's sink token is wrong on a sequence of one query (cuDNN 9.19, measured: "
               "max_abs 0.11 with a diagonal band, 0.91 without)";
  return "";
}

bool fp8_graph(const AttentionProblem& p) {
  const AttentionTypes& t = p.types;
  return (t.q == DType::e4m3 || t.q == DType::e5m2) && t.kv == t.q && is_16bit(t.o);
}

Fp8Scalars fp8_scalars_of(const AttentionProblem& p) {
  const AttentionFeatures& f = p.features;
  Fp8Scalars s;
  s.descale_q = f.q_scale;
  s.descale_k = f.k_scale;
  s.descale_v = f.v_scale;
  s.scale_s = 256.f;
  s.descale_s = 1.f / 256.f;
  s.scale_o = 1.f / f.v_scale;
  return s;
}

Band band_of(const AttentionProblem& p, Diagonal d) {
  const AttentionFeatures& f = p.features;
  Band b;
  b.top_left = p.top_left || !f.alibi_slopes.empty() || ((fp8_graph(p) || d == Diagonal::automatic) && q_is_kv(p));
  if (masked(p) || (p.causal && f.window_left >= 0) || !f.alibi_slopes.empty()) {
    b.right = 0;
  } else if (f.window_right >= 0) {
    b.right = f.window_right;
  }
  if (f.window_left >= 0) b.left = static_cast<int64_t>(f.window_left) + 1;
  return b;
}

std::string band_text(const AttentionProblem& p, Diagonal d) {
  const Band b = band_of(p, d);
  if (!b.left && !b.right) return p.causal ? ", causal at q_len 1 (no mask)" : ", non-causal";
  if (!b.left && b.right == 0) return b.top_left ? ", top-left causal" : ", bottom-right causal";
  std::string out = std::string(", band ") + (b.top_left ? "top-left" : "bottom-right");
  if (b.left) out += " left " + std::to_string(*b.left);
  if (b.right) out += " right " + std::to_string(*b.right);
  return out;
}

std::string version_text(int64_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string graph_key(const AttentionProblem& p, const Layout& l, const PlanChoice& c) {
  std::ostringstream k;
  k << p.types.name() << ' ' << p.num_seqs() << ' ' << p.heads << ' ' << p.kv_heads << ' ' << p.head_size
    << ' ' << p.block_size << ' ' << p.max_seqlen_q() << ' ' << p.max_seqlen_k() << ' ' << container_blocks(p, l) << ' '
    << ragged_q(p) << ' ' << p.causal << ' ' << std::hexfloat << p.softmax_scale();
  const Band b = band_of(p, c.diagonal);
  k << " band " << b.top_left << ' ' << b.left.value_or(-1) << ' ' << b.right.value_or(-1) << " sinks "
    << !p.features.sinks.empty();
  for (int64_t v : {l.q_token, l.q_head, l.o_token, l.o_head, l.kv_block, l.kv_token, l.kv_head, l.table_stride})
    k << ' ' << v;
  k << " node " << implementation_text(c.implementation) << " heuristics " << heuristics_text(c.heuristics)
    << " plan " << pick_text(c);
  if (c.pick == PlanChoice::Pick::autotune)  // the times it picks by depend on the lengths, not only on the dims
    for (std::size_t i = 0; i < p.q_lens.size(); ++i) k << ' ' << p.q_lens[i] << ':' << p.kv_lens[i];
  return k.str();
}

}  // namespace attnbench::cudnn
