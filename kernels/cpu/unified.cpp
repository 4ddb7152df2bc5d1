// cpu.unified: paged attention on the host. One work item is (sequence, kv head, q-tile, KV split): the q-tile's
// rows times the GQA group of query heads form M query vectors that stream over the item's KV range in tiles with
// the online-softmax recurrence. Each K/V tile is converted once to fp32 and serves all M vectors through two small
// GEMMs (S^T = K Q^T, O += P V); query vectors are the columns of S^T so the softmax vectorises across them. splits == 1 writes the output directly (prefill); splits > 1 writes (max, sum-exp,
// partial output) into the workspace and a combine step merges them (decode). The math is in the README.
#include "cpu/unified.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/codes.hpp"
#include "cpu/gemm.hpp"
#include "cpu/norm_rope.hpp"
#include "attnbench/backends.hpp"
#include "common/device/paged.hpp"
#include "common/device/score_mods.hpp"
#include "common/device/visibility.hpp"

namespace attnbench {
namespace {

using cpu::convert_kv_row;
using cpu::fast_exp;
using cpu::CodeLut;
using cpu::gemm;
using cpu::keep_if;

constexpr int kNB = 8;              // micro-kernel columns of the PV gemm (two SSE / one AVX vector)
constexpr int kPrefetchTokens = 8;     // K/V rows in flight ahead of the conversion (measured: 4..16 are close)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct WorkTile {
  int seq = 0;
  int q_tile = 0;  // index of the q-tile inside the sequence
};

struct CpuPlan : AttentionPlan {
  int num_seqs = 0, heads = 0, kv_heads = 0, head_size = 0, block_size = 0;
  int64_t total_q = 0;
  DType dtype = DType::bf16;  // O (Q and K/V in it, or 8-bit codes read through a CodeLut)
  AttentionTypes types;
  CodeLut lut;  // the 8-bit codes' decoding (cache, Q), under the problem's scales
  bool causal = true, top_left = false, return_lse = false;
  AttentionFusion fusion;
  int q_tile = 1, kv_tile = 64, splits = 1, threads = 1;
  int vec_cols = 8;   // query vectors per micro-kernel column block of the QK gemm: 4 or 8
  int m_pad = 8;      // q_tile * group rounded up to vec_cols: leading dimension of the transposed buffers
  std::vector<WorkTile> tiles;          // costliest first, so dynamic scheduling ends balanced
  std::size_t scratch_floats = 0;       // per thread
  mutable std::vector<float> scratch;  // threads * scratch_floats, written only by run()
};

// One thread's fp32 scratch, carved from the plan's buffer. Query vectors are columns of the transposed buffers
// (qt, st) so that the softmax vectorises across them.
struct Scratch {
  float* qt;   // [d, m_pad]: Q transposed, pre-scaled
  float* st;   // [kv_tile, m_pad]: scores, then probabilities
  float* k;    // [kv_tile, d]
  float* v;    // [kv_tile, d]
  float* acc;  // [m_pad, d]: unnormalised output
  float* m;    // [m_pad] running max
  float* l;    // [m_pad] running sum of exponentials
  float* vis;    // [m_pad] visible end (keys [first, vis) are visible) of each query vector
  float* first;  // [m_pad] first visible key (0 without a left window)
  float* tmp;  // [3 * m_pad] per-tile max, rescale factor, sum
};

std::size_t round16(std::size_t n) { return (n + 15) / 16 * 16; }

// Floats of one thread's scratch; with a base, also points the Scratch's arrays into it.
std::size_t scratch_layout(int m_pad, int d, int kv_tile, float* base, Scratch* s) {
  const std::size_t mp = m_pad, dd = d, t = kv_tile;
  const std::size_t sizes[] = {dd * mp, t * mp, t * dd, t * dd, mp * dd, mp, mp, mp, mp, 3 * mp};
  float* Scratch::*parts[] = {&Scratch::qt, &Scratch::st, &Scratch::k,   &Scratch::v,     &Scratch::acc,
                              &Scratch::m,  &Scratch::l,  &Scratch::vis, &Scratch::first, &Scratch::tmp};
  std::size_t off = 0;
  for (int i = 0; i < 10; ++i) {
    if (base) s->*parts[i] = base + off;
    off += round16(sizes[i]);  // arrays start 64 bytes apart (multiples of 16 floats)
  }
  return off + 16;  // a 64-byte gap between threads
}

Scratch carve(const CpuPlan& pl, int thread) {
  Scratch s;
  scratch_layout(pl.m_pad, pl.head_size, pl.kv_tile, pl.scratch.data() + thread * pl.scratch_floats, &s);
  return s;
}

// The Q prologue of one row (AttentionParams): decoded, normalised (w: the decoded q_norm_weight, null without
// q_norm) and rotated in fp32 with the gated block's own row function, rounded once to the dtype.
template <DType DT>
void q_prologue_row(const AttentionParams& p, const float* w, int64_t token, const uint16_t* src, float* x) {
  const int d = p.head_size, rd = p.prologue.q_rope_dim;
  float c[512], s[512];  // rd <= head_size <= 512; only [0, rd) is read
  for (int i = 0; i < d; ++i) x[i] = half_to_float(src[i], DT);
  for (int i = 0; i < rd; ++i) {
    c[i] = half_to_float(static_cast<const uint16_t*>(p.prologue.rope_cos)[token * rd + i], DT);
    s[i] = half_to_float(static_cast<const uint16_t*>(p.prologue.rope_sin)[token * rd + i], DT);
  }
  const bool roped = rd > 0;
  cpu::norm_rope_row(x, d, w != nullptr, w, p.prologue.q_norm_offset, p.prologue.q_norm_eps, rd, roped ? c : nullptr, roped ? s : nullptr);
  for (int i = 0; i < d; ++i) x[i] = half_to_float(float_to_half(x[i], DT), DT);
}

// Applies the score features (softcap, ALiBi, qq-bias: device::ScoreMods) to the tile's scores of query vectors
// [0, M), keys j0 + [0, n): column mi of S^T is the row (row0 + mi / g, head kh g + mi % g).
void apply_score_mods(const AttentionParams& p, const Scratch& sc, int mp, int M, int g, int kh, int row0,
                      const device::Visibility& vis, int j0, int n) {
  const AttentionFeatureParams& f = p.features;
  for (int mi = 0; mi < M; ++mi) {
    const device::ScoreMods md = device::score_mods(f.softcap, f.alibi_slopes, f.qq_bias, f.qq_bias_len,
                                                    row0 + mi / g, vis.q_len, vis.kv_len, vis.diag, kh * g + mi % g);
    for (int j = 0; j < n; ++j) {
      float& v = sc.st[static_cast<std::size_t>(j) * mp + mi];
      v = md.apply(v, j0 + j);
    }
  }
}

// Attends rows [row0, row0 + rows) of sequence `seq` (all heads of kv head `kh`) to keys [k0, k1): leaves the
// unnormalised output in sc.acc and the running max / sum in sc.m / sc.l. VC: the QK gemm's column block.
template <DType DT, int VC>
void attend(const AttentionParams& p, const CpuPlan& pl, const CodeLut& lut, const Scratch& sc, int seq, int kh,
            int row0, int rows, int q_len, int kv_len, int k0, int k1) {
  const int g = p.heads / p.kv_heads, d = p.head_size, M = rows * g, T = pl.kv_tile, mp = pl.m_pad;
  const int mcols = (M + VC - 1) / VC * VC;  // query columns the loops touch; [M, mcols) are padding
  const char* kc = static_cast<const char*>(p.k_cache);  // for the prefetches: bytes
  const char* vc = static_cast<const char*>(p.v_cache);
  const int64_t kvb = static_cast<int64_t>(dtype_bytes(p.types.kv));
  const int64_t q_token0 = p.cu_seqlens_q[seq] + row0;
  const device::Visibility visibility(q_len, kv_len, p.causal, p.top_left, p.features.window_left,
                                      p.features.window_right);
  const bool mods = p.features.softcap > 0.f || p.features.alibi_slopes || p.features.qq_bias;

  const bool prologue = p.prologue.q_norm_weight != nullptr || p.prologue.q_rope_dim > 0;
  float wq[512];  // the Q prologue's norm weight, decoded once per call of attend
  if (p.prologue.q_norm_weight)
    for (int c = 0; c < d; ++c) wq[c] = half_to_float(static_cast<const uint16_t*>(p.prologue.q_norm_weight)[c], DT);
  for (int mi = 0; mi < mcols; ++mi) {
    if (mi < M) {
      const int64_t q_off = (q_token0 + mi / g) * p.q_stride_token + static_cast<int64_t>(kh * g + mi % g) * p.q_stride_head;
      const uint16_t* src = static_cast<const uint16_t*>(p.q) + q_off;
      if (lut.q_on) {  // an 8-bit Q (the FP8 SDPA; no prologue)
        const uint8_t* codes = static_cast<const uint8_t*>(p.q) + q_off;
        for (int c = 0; c < d; ++c) sc.qt[static_cast<std::size_t>(c) * mp + mi] = lut.q[codes[c]] * p.scale;
      } else if (prologue) {
        float x[512];  // head_size <= 512 (cpu::resolve)
        q_prologue_row<DT>(p, p.prologue.q_norm_weight ? wq : nullptr, q_token0 + mi / g, src, x);
        for (int c = 0; c < d; ++c) sc.qt[static_cast<std::size_t>(c) * mp + mi] = x[c] * p.scale;
      } else {
        for (int c = 0; c < d; ++c) sc.qt[static_cast<std::size_t>(c) * mp + mi] = half_to_float(src[c], DT) * p.scale;
      }
      sc.vis[mi] = static_cast<float>(visibility.visible_end(row0 + mi / g));
      sc.first[mi] = static_cast<float>(visibility.first_visible(row0 + mi / g));
    } else {
      for (int c = 0; c < d; ++c) sc.qt[static_cast<std::size_t>(c) * mp + mi] = 0.f;
      sc.vis[mi] = -1.f;  // sees nothing
      sc.first[mi] = 0.f;
    }
    sc.m[mi] = kNegInf;
    sc.l[mi] = 0.f;
  }
  std::fill(sc.acc, sc.acc + static_cast<std::size_t>(M) * d, 0.f);
  float* __restrict tile_max = sc.tmp;
  float* __restrict alpha = sc.tmp + mp;
  float* __restrict tile_sum = sc.tmp + 2 * mp;
  float* __restrict run_max = sc.m;
  const float* __restrict vis = sc.vis;
  const float* __restrict first = sc.first;

  k1 = std::min(k1, visibility.rows_end(row0 + rows));  // tiles past the last row's visible end: skipped
  k0 = std::max(k0, visibility.first_visible(row0));    // and keys before the first row's window
  const int32_t* table = p.block_table + device::block_table_row_offset(seq, p.block_table_stride);

  int ahead = std::min(k1, k0 + kPrefetchTokens);  // the next token to prefetch, and where it lives
  int ahead_blk = ahead / p.block_size, ahead_off = ahead % p.block_size;
  for (int j0 = k0; j0 < k1; j0 += T) {
    const int n = std::min(T, k1 - j0);
    // Convert the tile, token by token through the block table, prefetching kPrefetchTokens ahead: a kv head's
    // row is a short piece of each token's run of lines, which the hardware prefetcher does not run ahead on.
    int blk = j0 / p.block_size, off = j0 % p.block_size;
    for (int t = 0; t < n; ++t) {
      if (ahead < k1) {
        const int64_t pb = (static_cast<int64_t>(table[ahead_blk]) * p.kv_stride_block +
                            ahead_off * p.kv_stride_token + static_cast<int64_t>(kh) * p.kv_stride_head) * kvb;
        for (int64_t c = 0; c < d * kvb; c += 64) __builtin_prefetch(kc + pb + c), __builtin_prefetch(vc + pb + c);
        ++ahead;
        if (++ahead_off == p.block_size) ahead_off = 0, ++ahead_blk;
      }
      const int64_t base = static_cast<int64_t>(table[blk]) * p.kv_stride_block + off * p.kv_stride_token +
                           static_cast<int64_t>(kh) * p.kv_stride_head;
      convert_kv_row<DT>(p, lut, base, sc.k + static_cast<std::size_t>(t) * d, sc.v + static_cast<std::size_t>(t) * d);
      if (++off == p.block_size) off = 0, ++blk;
    }

    // S^T[n x mcols] = K_tile[n x d] * Q^T[d x mcols]
    gemm<6, VC, false>(n, mcols, d, sc.k, d, 1, sc.qt, mp, sc.st, mp);
    if (mods) apply_score_mods(p, sc, mp, M, g, kh, row0, visibility, j0, n);

    // Online softmax, vectorised across query vectors; key j is visible to vector m iff first[m] <= j0 + j < vis[m].
    // Operands
    // are loaded into values first: std::max on references, or a load under a condition, is control flow too.
    const float jbase = static_cast<float>(j0);
    for (int mi = 0; mi < mcols; ++mi) tile_max[mi] = kNegInf, tile_sum[mi] = 0.f;
    for (int j = 0; j < n; ++j) {
      const float* __restrict row = sc.st + static_cast<std::size_t>(j) * mp;
      const float key = jbase + static_cast<float>(j);
#pragma omp simd
      for (int mi = 0; mi < mcols; ++mi) {
        const float v = row[mi], lim = vis[mi], lo = first[mi], t = tile_max[mi];
        const float masked = key < lim && key >= lo ? v : kNegInf;
        tile_max[mi] = t < masked ? masked : t;
      }
    }
#pragma omp simd
    for (int mi = 0; mi < mcols; ++mi) {
      const float m_old = run_max[mi], t = tile_max[mi];
      const float m_new = m_old < t ? t : m_old;
      alpha[mi] = keep_if(m_old != kNegInf, fast_exp(m_old - m_new));  // the exp is NaN when both are -inf
      run_max[mi] = m_new;
      tile_max[mi] = keep_if(m_new != kNegInf, m_new);  // the exponent base; a vector that saw nothing yet gets 0
    }
    for (int j = 0; j < n; ++j) {
      float* __restrict row = sc.st + static_cast<std::size_t>(j) * mp;
      const float key = jbase + static_cast<float>(j);
#pragma omp simd
      for (int mi = 0; mi < mcols; ++mi) {
        const float v = row[mi], base = tile_max[mi], lim = vis[mi], lo = first[mi];
        const float pe = keep_if(key < lim && key >= lo, fast_exp(v - base));
        row[mi] = pe;
        tile_sum[mi] += pe;
      }
    }
    for (int mi = 0; mi < M; ++mi) {
      sc.l[mi] = sc.l[mi] * alpha[mi] + tile_sum[mi];
      if (alpha[mi] != 1.f) {
        float* a = sc.acc + static_cast<std::size_t>(mi) * d;
        const float f = alpha[mi];
        for (int c = 0; c < d; ++c) a[c] *= f;
      }
    }

    // O[M x d] += P[M x n] * V_tile[n x d], P read transposed out of S^T.
    gemm<4, kNB, true>(M, d, n, sc.st, 1, mp, sc.v, d, sc.acc, d);
  }
}

// The epilogue of one output row: acc * inv, times sigmoid(gate) when the call carries an output gate, rounded
// to the dtype.
template <DType DT>
void store_row(const AttentionParams& p, int64_t token, int head, const float* acc, float inv) {
  uint16_t* dst = static_cast<uint16_t*>(p.out) + token * p.o_stride_token + static_cast<int64_t>(head) * p.o_stride_head;
  const int d = p.head_size;
  if (p.epilogue.gate) {
    const uint16_t* gt =
        static_cast<const uint16_t*>(p.epilogue.gate) + token * p.epilogue.gate_stride_token + static_cast<int64_t>(head) * p.epilogue.gate_stride_head;
    for (int c = 0; c < d; ++c)
      dst[c] = float_to_half(acc[c] * inv / (1.f + std::exp(-half_to_float(gt[c], DT))), DT);
  } else {
    for (int c = 0; c < d; ++c) dst[c] = float_to_half(acc[c] * inv, DT);
  }
}

// params.lse of row i of the sequence at q_start, head h, from its running max m and sum l over its keys (natural
// units; l == 0: it saw none).
void store_lse(const AttentionParams& p, int64_t q_start, int i, int h, float m, float l) {
  if (p.lse == nullptr) return;
  const float lse2 = l == 0.f ? kNegInf : (m + std::log(l)) * 1.4426950408889634f;
  p.lse[device::lse_offset(p.lse_stride_start, p.lse_stride_row, p.lse_stride_head, q_start, i, h)] =
      device::row_lse(p.features.sinks, h, lse2);
}

// Normalised output of the item's rows, rounded to the dtype.
template <DType DT>
void write_out(const AttentionParams& p, const Scratch& sc, int seq, int kh, int row0, int rows) {
  const int g = p.heads / p.kv_heads, d = p.head_size;
  const int64_t token0 = p.cu_seqlens_q[seq] + row0;
  for (int r = 0; r < rows; ++r)
    for (int hh = 0; hh < g; ++hh) {
      const int mi = r * g + hh;
      const float den = sc.l[mi] + device::sink_weight(p.features.sinks, kh * g + hh, sc.m[mi]);
      const float inv = den > 0.f ? 1.f / den : 0.f;  // a row that sees no key writes zeros
      store_row<DT>(p, token0 + r, kh * g + hh, sc.acc + static_cast<std::size_t>(mi) * d, inv);
      store_lse(p, p.cu_seqlens_q[seq], row0 + r, kh * g + hh, sc.m[mi], sc.l[mi]);
    }
}

// Workspace of the split path: partial outputs [total_q, heads, splits, d], then (max, sum) [total_q, heads,
// splits, 2].
struct Partials {
  float* acc;
  float* ml;
};

Partials partials(const AttentionParams& p, const CpuPlan& pl) {
  float* ws = static_cast<float*>(p.workspace);
  const std::size_t slots = static_cast<std::size_t>(pl.total_q) * pl.heads * pl.splits;
  return {ws, ws + slots * pl.head_size};
}

void write_partial(const AttentionParams& p, const CpuPlan& pl, const Scratch& sc, int seq, int kh, int row0,
                   int rows, int split) {
  const int g = p.heads / p.kv_heads, d = p.head_size;
  const Partials w = partials(p, pl);
  const int64_t token0 = p.cu_seqlens_q[seq] + row0;
  for (int r = 0; r < rows; ++r)
    for (int hh = 0; hh < g; ++hh) {
      const int mi = r * g + hh;
      const std::size_t slot = ((token0 + r) * p.heads + kh * g + hh) * pl.splits + split;
      std::memcpy(w.acc + slot * d, sc.acc + static_cast<std::size_t>(mi) * d, sizeof(float) * d);
      w.ml[slot * 2] = sc.m[mi];
      w.ml[slot * 2 + 1] = sc.l[mi];
    }
}

// Merges the splits of one (token, head): out = sum_k e^(m_k - M) acc_k / sum_k e^(m_k - M) l_k.
template <DType DT>
void combine(const AttentionParams& p, const CpuPlan& pl, const Scratch& sc, int64_t token, int h) {
  const int d = p.head_size, S = pl.splits;
  const Partials w = partials(p, pl);
  const std::size_t slot0 = (static_cast<std::size_t>(token) * p.heads + h) * S;
  float mx = kNegInf;
  for (int k = 0; k < S; ++k)
    if (w.ml[(slot0 + k) * 2 + 1] != 0.f) mx = std::max(mx, w.ml[(slot0 + k) * 2]);
  float* o = sc.acc;
  std::fill(o, o + d, 0.f);
  float total = 0.f;
  for (int k = 0; k < S; ++k) {
    const float l = w.ml[(slot0 + k) * 2 + 1];
    if (l == 0.f) continue;  // an empty split (past the sequence, or fully masked); a NaN one is merged
    const float wk = fast_exp(w.ml[(slot0 + k) * 2] - mx);
    total += wk * l;
    const float* a = w.acc + (slot0 + k) * d;
    for (int c = 0; c < d; ++c) o[c] += wk * a[c];
  }
  if (p.lse) {  // the token's sequence: the last one starting at or before it
    const int32_t* cu = p.cu_seqlens_q;
    const int64_t q_start = *(std::upper_bound(cu, cu + p.num_seqs + 1, token) - 1);
    store_lse(p, q_start, static_cast<int>(token - q_start), h, mx, total);
  }
  total += device::sink_weight(p.features.sinks, h, mx);
  store_row<DT>(p, token, h, o, total > 0.f ? 1.f / total : 0.f);
}

template <DType DT, int VC>
void run_typed(const CpuPlan& pl, const AttentionParams& p) {
  const int64_t per_tile = static_cast<int64_t>(p.kv_heads) * pl.splits;
  const int64_t items = static_cast<int64_t>(pl.tiles.size()) * per_tile;
  const int64_t rows_out = p.total_q * p.heads;
  const CodeLut& lut = pl.lut;
#pragma omp parallel num_threads(pl.threads)
  {
    const Scratch sc = carve(pl, omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const WorkTile& wt = pl.tiles[it / per_tile];
      const int kh = static_cast<int>(it % per_tile) / pl.splits, split = static_cast<int>(it % pl.splits);
      const int q_len = p.cu_seqlens_q[wt.seq + 1] - p.cu_seqlens_q[wt.seq], kv_len = p.seqused_k[wt.seq];
      const int row0 = wt.q_tile * pl.q_tile, rows = std::min(pl.q_tile, q_len - row0);
      if (rows <= 0) continue;
      if (pl.splits == 1) {
        attend<DT, VC>(p, pl, lut, sc, wt.seq, kh, row0, rows, q_len, kv_len, 0, kv_len);
        write_out<DT>(p, sc, wt.seq, kh, row0, rows);
      } else {
        // Split boundaries on KV-tile multiples; trailing splits of a short sequence are empty.
        const int chunk = ((kv_len + pl.splits - 1) / pl.splits + pl.kv_tile - 1) / pl.kv_tile * pl.kv_tile;
        const int k0 = std::min(kv_len, split * chunk), k1 = std::min(kv_len, k0 + chunk);
        attend<DT, VC>(p, pl, lut, sc, wt.seq, kh, row0, rows, q_len, kv_len, k0, k1);
        write_partial(p, pl, sc, wt.seq, kh, row0, rows, split);
      }
    }
    if (pl.splits > 1) {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_out; ++r) combine<DT>(p, pl, sc, r / p.heads, static_cast<int>(r % p.heads));
    }
  }
}

class CpuUnified final : public AttentionKernel {
 public:
  explicit CpuUnified(CpuUnifiedOptions opts) : opts_(opts) {}
  std::string name() const override { return "cpu.unified"; }
  Backend backend() const override { return Backend::cpu; }

  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    return resolve(p, knobs).support;
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const cpu::Resolution r = resolve(p, knobs);
    if (!r.ok()) throw std::invalid_argument("cpu.unified declines: " + r.support.reason);
    const cpu::UnifiedInstance& in = r.instance;
    auto pl = std::make_unique<CpuPlan>();
    pl->num_seqs = p.num_seqs();
    pl->heads = p.heads;
    pl->kv_heads = p.kv_heads;
    pl->head_size = p.head_size;
    pl->block_size = p.block_size;
    pl->total_q = p.total_q();
    pl->dtype = p.types.o;
    pl->types = p.types;
    pl->lut = CodeLut(p.types, p.features);
    pl->causal = p.causal;
    pl->top_left = p.top_left;
    pl->return_lse = p.return_lse;
    pl->fusion = p.fusion;
    pl->threads = in.threads;
    pl->q_tile = in.q_tile;
    pl->kv_tile = in.kv_tile;
    pl->splits = in.splits;
    pl->vec_cols = in.vec_cols;
    pl->m_pad = in.m_pad;
    pl->workspace_bytes = in.workspace_bytes;
    pl->graph_replay = false;
    pl->summary = in.summary;

    for (int s = 0; s < p.num_seqs(); ++s)
      for (int t = 0; t * pl->q_tile < p.q_lens[s]; ++t) pl->tiles.push_back({s, t});
    auto cost = [&](const WorkTile& w) -> int64_t {  // keys the tile's rows see, first to last
      const int first = w.q_tile * pl->q_tile, last = std::min(p.q_lens[w.seq], first + pl->q_tile) - 1;
      const device::Visibility vis(p.q_lens[w.seq], p.kv_lens[w.seq], p.causal, p.top_left, p.features.window_left,
                                   p.features.window_right);
      return vis.visible_end(last) - vis.first_visible(first);
    };
    std::stable_sort(pl->tiles.begin(), pl->tiles.end(),
                     [&](const WorkTile& a, const WorkTile& b) { return cost(a) > cost(b); });
    pl->scratch_floats = scratch_layout(pl->m_pad, p.head_size, pl->kv_tile, nullptr, nullptr);
    pl->scratch.assign(pl->scratch_floats * pl->threads, 0.f);
    return pl;
  }

  void run(const AttentionPlan& plan, const AttentionParams& p, void* /*stream*/) const override {
    const auto* pl = dynamic_cast<const CpuPlan*>(&plan);
    if (!pl) throw std::invalid_argument("cpu.unified: plan was not made by cpu.unified");
    if (p.num_seqs != pl->num_seqs || p.heads != pl->heads || p.kv_heads != pl->kv_heads ||
        p.head_size != pl->head_size || p.block_size != pl->block_size || p.types != pl->types ||
        p.causal != pl->causal || p.top_left != pl->top_left || p.total_q != pl->total_q || p.features.k_scale != pl->lut.k_scale ||
        p.features.v_scale != pl->lut.v_scale || p.features.q_scale != pl->lut.q_scale)
      throw std::invalid_argument("cpu.unified: params do not describe the planned problem (" + pl->summary + ")");
    if (!p.q || !p.k_cache || !p.v_cache || !p.out || !p.cu_seqlens_q || !p.seqused_k || !p.block_table)
      throw std::invalid_argument("cpu.unified: a params pointer is null");
    if ((p.epilogue.gate != nullptr) != pl->fusion.output_gate)
      throw std::invalid_argument(pl->fusion.output_gate ? "cpu.unified: the plan has an output gate, params.epilogue.gate is null"
                                                  : "cpu.unified: params.epilogue.gate is set but the plan has no output gate");
    check_q_prologue_params("cpu.unified", pl->fusion, p.prologue);
    check_lse_params("cpu.unified", pl->return_lse, p);
    check_block_table("cpu.unified", p);
    if (pl->workspace_bytes > 0 && !p.workspace)
      throw std::invalid_argument("cpu.unified: plan needs " + std::to_string(pl->workspace_bytes) +
                                  " workspace bytes, params.workspace is null");
    // The one dispatch point: runtime dtype and column block become template parameters.
    if (pl->dtype == DType::f16)
      pl->vec_cols == 4 ? run_typed<DType::f16, 4>(*pl, p) : run_typed<DType::f16, 8>(*pl, p);
    else
      pl->vec_cols == 4 ? run_typed<DType::bf16, 4>(*pl, p) : run_typed<DType::bf16, 8>(*pl, p);
  }

 private:
  // The resolve step under this kernel's options, on the threads OpenMP gives a plan.
  cpu::Resolution resolve(const AttentionProblem& p, const KnobValues& knobs) const {
    return cpu::resolve(p, cpu::CpuKnobs::parse(knobs), cpu::CpuDevice{omp_get_max_threads()}, opts_);
  }

  CpuUnifiedOptions opts_;
};

}  // namespace

float cpu_unified_exp(float x) { return fast_exp(x); }

std::unique_ptr<AttentionKernel> make_cpu_unified(const CpuUnifiedOptions& opts) {
  return std::make_unique<CpuUnified>(opts);
}

std::unique_ptr<AttentionKernel> make_cpu_unified() { return make_cpu_unified(CpuUnifiedOptions{}); }

}  // namespace attnbench
