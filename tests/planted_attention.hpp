// A test-only attention kernel with switchable planted bugs: the defects real kernels have (loop bounds, masks,
// head maps, paging, pipelines, epilogues), so the gate can be shown to catch each one on every shape.
// Written as a tensor-core kernel computes: fp32 scores over 64-key tiles, P rounded to O's dtype before P.V (to
// e4m3 after a 2^5 scale on the FP8 SDPA's rows: cuda.unified's wide kernel scales p by 2^5 against a max up to
// 2^3 below the row's, so 2^5 is its coarsest rounding),
// fp32 row sums, the output rounded once.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbench/attention.hpp"
#include "cases/inputs.hpp"

namespace attnbench::testing {

enum class Bug {
  none,
  zeros,               // writes zeros
  half_kv,             // reads only the first half of each sequence's keys
  quarter_kv,          // reads only the first quarter
  first_tile_dropped,  // the key loop starts at the second 64-key tile
  last_tile_dropped,   // the key loop stops one tile early
  times_half,          // the output scaled by 0.5
  missing_scale,       // scores not multiplied by the softmax scale
  gqa_off_by_one,      // query head h reads kv head h / group + 1
  mask_off_by_one,     // one key past the causal diagonal (decode: past the sequence's end) is visible
  block_table_entry,   // one entry of the last sequence's block table names the wrong block
  stale_tile,          // the last tile's K/V come from the previous tile (a missing pipeline wait)
  skip_last_row,       // the last row of the last sequence is never written
  // the attention features' defects (each on a problem with its feature)
  window_off_by_one,    // the sliding window sees one key more on its left
  softcap_after_mask,   // the cap applied after masking: masked keys get -softcap, not -inf, and weigh in
  alibi_sign,           // the ALiBi bias with its sign flipped: slope * (i' - j)
  sink_in_numerator,    // the sink also weighs a value row (the first visible key's), not the denominator alone
  kv_scale_ignored,     // an 8-bit cache's k_scale / v_scale not applied
  qq_bias_transposed,   // the qq-bias read as [key][query]
  alignment_flipped,    // rows placed bottom-right on a top-left problem (and top-left on a bottom-right one)
  q_scale_ignored,      // an 8-bit Q's q_scale not applied (the FP8 SDPA's missing descale)
  pv_not_rescaled,      // the running P V sum not rescaled by e^(m_old - m_new) when a tile raises the row max
  // local defects (one unit of the output wrong) and the subtle numerical ones
  one_seq_head,         // one (sequence, head) pair's output x 0.95 (the middle sequence, the middle head)
  one_tile_head,        // one 64-row tile of one head x 0.95 (the longest sequence's middle tile, the last head)
  one_split,            // one split of a split-KV walk lost: the middle 1/16 of each row's keys, one (seq, kv head)
  cta_skipped,          // one CTA of a persistent walk never runs: a (tile, kv head group) unit left unwritten
  causal_clamped,       // the causal diagonal one key late, clamped to the sequence: a real future key, no poison
  one_key_short,        // each row's last visible key dropped
  o_acc_16bit,          // the O accumulator held in O's 16-bit dtype between 64-key tiles
  no_max_subtraction,   // the softmax without its row maximum: e^s overflows once scores pass ~88 ("scores": "wide")
};

// The feature a feature bug needs on the problem ("" for the plain bugs).
inline const char* bug_feature(Bug b) {
  switch (b) {
    case Bug::window_off_by_one: return "window_left";
    case Bug::softcap_after_mask: return "softcap";
    case Bug::alibi_sign: return "alibi_slopes";
    case Bug::sink_in_numerator: return "sinks";
    case Bug::kv_scale_ignored: return "k_scale";
    case Bug::qq_bias_transposed: return "qq_bias";
    case Bug::alignment_flipped: return "top_left";
    case Bug::q_scale_ignored: return "q_scale";
    case Bug::pv_not_rescaled: return "q_scale";  // on the FP8 SDPA's rows
    default: return "";
  }
}

inline const std::vector<Bug>& every_feature_bug() {
  static const std::vector<Bug> all = {Bug::window_off_by_one, Bug::softcap_after_mask, Bug::alibi_sign,
                                       Bug::sink_in_numerator, Bug::kv_scale_ignored, Bug::qq_bias_transposed,
                                       Bug::alignment_flipped, Bug::q_scale_ignored, Bug::pv_not_rescaled};
  return all;
}

inline const std::vector<Bug>& every_bug() {
  static const std::vector<Bug> all = {Bug::zeros,          Bug::half_kv,           Bug::quarter_kv,
                                       Bug::first_tile_dropped, Bug::last_tile_dropped, Bug::times_half,
                                       Bug::missing_scale,  Bug::gqa_off_by_one,    Bug::mask_off_by_one,
                                       Bug::block_table_entry, Bug::stale_tile,     Bug::skip_last_row};
  return all;
}

// The local and numerical defects (each fails the gate on every shape it can show on: bug_shows_on).
inline const std::vector<Bug>& every_local_bug() {
  static const std::vector<Bug> all = {Bug::one_seq_head,   Bug::one_tile_head, Bug::one_split,
                                       Bug::cta_skipped,    Bug::causal_clamped, Bug::one_key_short,
                                       Bug::o_acc_16bit};
  return all;
}

// Why no gate bound can see bug b on problem p ("" when the gate must fail it; README, "The gate"): a causal
// diagonal one key late moves no row that already sees every key (decode, non-causal); a 16-bit O accumulator's
// rounding grows like the square root of a row's tiles, within 2.2x of a correct kernel's error (P rounded to 16
// bits, the output's own rounding) below 3000 keys; one key among 16384 or more moves a bf16 row past its bound only
// on some of 64 rows; an unsubtracted maximum only overflows on wide scores.
inline std::string bug_shows_on(Bug b, const AttentionProblem& p, bool wide_scores) {
  if (b == Bug::causal_clamped) {
    bool moved = false;
    for (int s = 0; s < p.num_seqs(); ++s) moved = moved || (p.causal && p.q_lens[s] > 1);
    if (!moved) return "every row sees every key of its sequence";
  }
  if (b == Bug::o_acc_16bit && p.max_seqlen_k() < 3000) return "rows of fewer than 3000 keys";
  if (b == Bug::one_key_short && p.types.o == DType::bf16 && p.max_seqlen_k() >= 16384 && p.total_q() * p.heads < 64)
    return "one bf16 key among 16384 or more, on fewer than 64 rows";
  if (b == Bug::no_max_subtraction && !wide_scores) return "scores of N(0, 1) inputs stay far from e^s's overflow";
  return "";
}

inline const char* bug_name(Bug b) {
  switch (b) {
    case Bug::none: return "none";
    case Bug::zeros: return "zeros";
    case Bug::half_kv: return "half_kv";
    case Bug::quarter_kv: return "quarter_kv";
    case Bug::first_tile_dropped: return "first_tile_dropped";
    case Bug::last_tile_dropped: return "last_tile_dropped";
    case Bug::times_half: return "times_half";
    case Bug::missing_scale: return "missing_scale";
    case Bug::gqa_off_by_one: return "gqa_off_by_one";
    case Bug::mask_off_by_one: return "mask_off_by_one";
    case Bug::block_table_entry: return "block_table_entry";
    case Bug::stale_tile: return "stale_tile";
    case Bug::skip_last_row: return "skip_last_row";
    case Bug::window_off_by_one: return "window_off_by_one";
    case Bug::softcap_after_mask: return "softcap_after_mask";
    case Bug::alibi_sign: return "alibi_sign";
    case Bug::sink_in_numerator: return "sink_in_numerator";
    case Bug::kv_scale_ignored: return "kv_scale_ignored";
    case Bug::qq_bias_transposed: return "qq_bias_transposed";
    case Bug::alignment_flipped: return "alignment_flipped";
    case Bug::q_scale_ignored: return "q_scale_ignored";
    case Bug::pv_not_rescaled: return "pv_not_rescaled";
    case Bug::one_seq_head: return "one_seq_head";
    case Bug::one_tile_head: return "one_tile_head";
    case Bug::one_split: return "one_split";
    case Bug::cta_skipped: return "cta_skipped";
    case Bug::causal_clamped: return "causal_clamped";
    case Bug::one_key_short: return "one_key_short";
    case Bug::o_acc_16bit: return "o_acc_16bit";
    case Bug::no_max_subtraction: return "no_max_subtraction";
  }
  return "?";
}

// The inputs widened to fp32 once, shared by every bug's run.
class PlantedKernel {
 public:
  static constexpr int kTile = 64;

  explicit PlantedKernel(const HostInputs& in) : in_(in), a_(in.params()) {
    q_ = widen(in.q);
    k_ = widen(in.k_cache);
    v_ = widen(in.v_cache);
  }

  std::vector<uint16_t> run(Bug bug) const {
    const AttentionProblem& p = in_.problem;
    std::vector<int32_t> table = in_.block_table;
    if (bug == Bug::block_table_entry) corrupt_one_entry(table);
    std::vector<uint16_t> out(in_.q.size(), 0xFFFF);
    for (int s = 0; s < p.num_seqs(); ++s) {
      const int rows = p.q_lens[s] * p.heads;
#pragma omp parallel for schedule(dynamic, 4)
      for (int r = 0; r < rows; ++r) row(bug, table, s, r / p.heads, r % p.heads, out);
    }
    return out;
  }

 private:
  static std::vector<float> widen(const HostTensor& x) {
    std::vector<float> f(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) f[i] = x.get(i);
    return f;
  }

  void corrupt_one_entry(std::vector<int32_t>& table) const {
    const AttentionProblem& p = in_.problem;
    const int s = p.num_seqs() - 1;
    const int nb = (p.kv_lens[s] + p.block_size - 1) / p.block_size;
    int32_t* t = table.data() + static_cast<std::size_t>(s) * a_.block_table_stride;
    const int b = nb / 2;
    t[b] = nb > 1 ? t[(b + 1) % nb] : static_cast<int32_t>(in_.sentinel_block);
  }

  int64_t kv_offset(const std::vector<int32_t>& table, int s, int j, int kvh) const {
    const int64_t blk = table[static_cast<std::size_t>(s) * a_.block_table_stride + j / in_.problem.block_size];
    return blk * a_.kv_stride_block + (j % in_.problem.block_size) * a_.kv_stride_token + kvh * a_.kv_stride_head;
  }

  // The keys [begin, end) this row reads, after the bug's loop bounds.
  void key_range(Bug bug, int s, int i, int* begin, int* end) const {
    const AttentionProblem& p = in_.problem;
    const int q_len = p.q_lens[s], kv_len = p.kv_lens[s];
    const AttentionFeatures& f = p.features;
    const bool top_left = p.top_left != (bug == Bug::alignment_flipped);
    const int pos = query_key_position(i, q_len, kv_len, top_left);
    int e = p.causal ? std::min(kv_len, causal_visible_end(i, q_len, kv_len, top_left)) : kv_len;
    if (f.window_right >= 0) e = std::min(e, pos + f.window_right + 1);
    if (bug == Bug::mask_off_by_one) ++e;
    if (bug == Bug::causal_clamped && p.causal) e = std::min(kv_len, e + 1);
    if (bug == Bug::half_kv) e = std::min(e, (kv_len + 1) / 2);
    if (bug == Bug::quarter_kv) e = std::min(e, (kv_len + 3) / 4);
    const int tiles = (e + kTile - 1) / kTile;
    int b = f.window_left >= 0 ? std::max(0, pos - f.window_left - (bug == Bug::window_off_by_one)) : 0;
    if (bug == Bug::softcap_after_mask) b = 0, e = kv_len;  // every key scored; the mask comes later
    *begin = bug == Bug::first_tile_dropped ? std::min(e, b + kTile) : b;
    *end = bug == Bug::last_tile_dropped ? std::max(0, (tiles - 1) * kTile) : e;
    if (bug == Bug::one_key_short) --*end;
    if (*end < *begin) *end = *begin;
  }

  // The sequence with the most query rows (the first of them), and the unit the local bugs pick in it.
  int longest_seq() const {
    const auto& q = in_.problem.q_lens;
    return static_cast<int>(std::max_element(q.begin(), q.end()) - q.begin());
  }
  // Whether row i of sequence s under head h (kv head kvh) is the unit a local bug spoils.
  bool in_spoiled_unit(Bug bug, int s, int i, int h, int kvh) const {
    const AttentionProblem& p = in_.problem;
    const int longest = longest_seq(), tiles = (p.q_lens[longest] + kTile - 1) / kTile;
    switch (bug) {
      case Bug::one_seq_head: return s == p.num_seqs() / 2 && h == p.heads / 2;
      case Bug::one_tile_head: return s == longest && i / kTile == tiles / 2 && h == p.heads - 1;
      case Bug::one_split: return s == p.num_seqs() - 1 && kvh == 0;
      case Bug::cta_skipped: return s == longest && i / kTile == tiles - 1 && kvh == p.kv_heads - 1;
      default: return false;
    }
  }

  void row(Bug bug, const std::vector<int32_t>& table, int s, int i, int h, std::vector<uint16_t>& out) const {
    const AttentionProblem& p = in_.problem;
    const int hs = p.head_size, group = p.heads / p.kv_heads;
    const int kvh = bug == Bug::gqa_off_by_one ? (h / group + 1) % p.kv_heads : h / group;
    const float scale = bug == Bug::missing_scale ? 1.f : a_.scale;
    const int64_t tok = in_.cu_seqlens_q[s] + i;
    const float* q = q_.data() + tok * a_.q_stride_token + h * a_.q_stride_head;
    int begin = 0, end = 0;
    key_range(bug, s, i, &begin, &end);
    const int last_tile = end > 0 ? (end - 1) / kTile : 0;
    auto data_key = [&](int j) {  // the key whose K/V the kernel reads at position j
      return bug == Bug::stale_tile && last_tile > 0 && j / kTile == last_tile ? j - kTile : j;
    };
    const bool spoiled = in_spoiled_unit(bug, s, i, h, kvh);
    if (bug == Bug::cta_skipped && spoiled) return;  // its rows keep the output's poison
    // Bug::one_split: the keys [lost_from, lost_to) of the row, the middle sixteenth, are never merged in.
    const int lost_from = bug == Bug::one_split && spoiled ? begin + (end - begin) / 2 : end;
    const int lost_to = lost_from + std::max(1, (end - begin + 15) / 16);
    const AttentionFeatures& f = p.features;
    const bool scaled = bug != Bug::kv_scale_ignored;
    const float ks = scaled ? f.k_scale : 1.f, vs = scaled ? f.v_scale : 1.f;
    const float qs = bug == Bug::q_scale_ignored ? 1.f : f.q_scale;
    const int pos = query_key_position(i, p.q_lens[s], p.kv_lens[s], p.top_left != (bug == Bug::alignment_flipped));
    const int new_from = p.kv_lens[s] - p.q_lens[s];
    int vis_begin = 0, vis_end = 0;  // the true visible keys (softcap_after_mask scores the rest as -softcap)
    key_range(Bug::none, s, i, &vis_begin, &vis_end);
    std::vector<float> sc(std::max(0, end - begin));
    float m = f.sinks.empty() ? -INFINITY : f.sinks[h];
    for (int j = begin; j < end; ++j) {
      const float* k = k_.data() + kv_offset(table, s, data_key(j), kvh);
      float d = 0;
      for (int x = 0; x < hs; ++x) d += q[x] * k[x];
      float v = d * scale * ks * qs;
      if (bug == Bug::softcap_after_mask && (j < vis_begin || j >= vis_end)) v = -INFINITY;
      if (f.softcap > 0.f) v = f.softcap * std::tanh(v / f.softcap);
      if (!f.alibi_slopes.empty())
        v += f.alibi_slopes[h] * static_cast<float>(bug == Bug::alibi_sign ? pos - j : j - pos);
      if (!f.qq_bias.empty() && j >= new_from) {
        const bool t = bug == Bug::qq_bias_transposed;
        const int a = t ? j - new_from : i, b = t ? i : j - new_from;
        v += f.qq_bias[static_cast<std::size_t>(a) * f.qq_bias_len + b];
      }
      sc[j - begin] = v;
      m = std::max(m, v);
    }
    if (bug == Bug::no_max_subtraction) m = 0.f;
    for (int j = lost_from; j < std::min(end, lost_to); ++j) sc[j - begin] = -INFINITY;
    float l = f.sinks.empty() ? 0.f : std::exp(f.sinks[h] - m);
    std::vector<float> acc(hs, 0.f);
    auto weigh = [&](float w, int j) {
      const float pw = is_16bit(p.types.q) ? half_to_float(float_to_half(w, p.types.o), p.types.o)
                                           : fp8_to_float(float_to_fp8(w * 32.f, DType::e4m3), DType::e4m3) / 32.f;
      const float* v = v_.data() + kv_offset(table, s, data_key(j), kvh);
      for (int x = 0; x < hs; ++x) acc[x] += pw * v[x] * vs;
    };
    if (bug == Bug::sink_in_numerator && !f.sinks.empty() && end > begin) weigh(l, begin);
    if (bug == Bug::pv_not_rescaled) {
      online_without_rescale(sc, begin, end, weigh, &l);
    } else if (bug == Bug::o_acc_16bit) {
      online_16bit_accumulator(sc, begin, end, weigh, acc, p.types.o, &l);
    } else {
      for (int j = begin; j < end; ++j) {
        const float w = std::exp(sc[j - begin] - m);
        l += w;
        weigh(w, j);
      }
    }
    const bool skip = bug == Bug::skip_last_row && s == p.num_seqs() - 1 && i == p.q_lens[s] - 1;
    if (skip) return;
    uint16_t* o = out.data() + tok * a_.o_stride_token + h * a_.o_stride_head;
    for (int x = 0; x < hs; ++x) {
      float val = l > 0 ? acc[x] / l : 0.f;
      if (bug == Bug::zeros) val = 0.f;
      if (bug == Bug::times_half) val *= 0.5f;
      if (spoiled && (bug == Bug::one_seq_head || bug == Bug::one_tile_head)) val *= 0.95f;
      o[x] = float_to_half(val, p.types.o);
    }
  }

  // The online softmax over 64-key tiles with the rescale of the running sums applied to l only: the P V sum keeps
  // the weights of the max it was accumulated under (Bug::pv_not_rescaled, planted on rows without sinks).
  template <class Weigh>
  static void online_without_rescale(const std::vector<float>& sc, int begin, int end, Weigh& weigh, float* l) {
    float m = -INFINITY, sum = 0.f;
    for (int t0 = begin; t0 < end; t0 += kTile) {
      const int t1 = std::min(end, t0 + kTile);
      const float mt = std::max(m, *std::max_element(sc.begin() + (t0 - begin), sc.begin() + (t1 - begin)));
      if (mt == -INFINITY) continue;
      sum *= std::exp(m - mt);
      m = mt;
      for (int j = t0; j < t1; ++j) {
        const float w = std::exp(sc[j - begin] - m);
        sum += w;
        weigh(w, j);
      }
    }
    *l = sum;
  }

  // The online softmax over 64-key tiles, rescaled as it should be, with the O accumulator rounded to O's dtype
  // after each tile's P V (the row sum stays fp32): Bug::o_acc_16bit, on rows without sinks.
  template <class Weigh>
  static void online_16bit_accumulator(const std::vector<float>& sc, int begin, int end, Weigh& weigh,
                                       std::vector<float>& acc, DType dt, float* l) {
    float m = -INFINITY, sum = 0.f;
    for (int t0 = begin; t0 < end; t0 += kTile) {
      const int t1 = std::min(end, t0 + kTile);
      const float mt = std::max(m, *std::max_element(sc.begin() + (t0 - begin), sc.begin() + (t1 - begin)));
      if (mt == -INFINITY) continue;
      const float alpha = std::exp(m - mt);
      sum *= alpha;
      for (float& a : acc) a *= alpha;
      m = mt;
      for (int j = t0; j < t1; ++j) {
        const float w = std::exp(sc[j - begin] - m);
        sum += w;
        weigh(w, j);
      }
      for (float& a : acc) a = half_to_float(float_to_half(a, dt), dt);
    }
    *l = sum;
  }

  const HostInputs& in_;
  AttentionParams a_;
  std::vector<float> q_, k_, v_;
};

}  // namespace attnbench::testing
