// cpu.unified: paged attention on the host. One work item is (sequence, kv head, q-tile, KV split): the q-tile's
// rows times the GQA group of query heads form M query vectors that stream over the item's KV range in tiles with
// the online-softmax recurrence. Each K/V tile is converted once to fp32 (K transposed) and serves all M vectors
// through two small GEMMs. splits == 1 writes the output directly (prefill); splits > 1 writes (max, sum-exp,
// partial output) into the workspace and a combine step merges them (decode). The math lives in DESIGN.md.
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

#include "attnbench/backends.hpp"

namespace attnbench {
namespace {

constexpr int kNB = 8;           // micro-kernel columns (two SSE / one AVX vector)
constexpr int kMR = 4;           // micro-kernel rows
constexpr int kTargetVectors = 64;  // query vectors per work item
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// e^x, branch-free so loops over it vectorise; x <= 0 here. Cephes expf polynomial, ~1 ulp; below -87 it returns
// ~1e-38 instead of 0, which no softmax weight can notice.
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float t = x * 1.44269504088896341f;
  const int n = static_cast<int>(t + (t < 0.f ? -0.5f : 0.5f));  // round to nearest
  const float fn = static_cast<float>(n);
  const float r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return e * scale;
}

// C[R x kNB] (+)= A[R x K] * B[K x kNB]; the accumulators stay in registers (the local copy of B's row and the
// simd pragmas are what lets g++ -O3 keep them there as packed vectors).
template <int R, bool Accumulate>
inline void micro_kernel(int K, const float* __restrict A, int lda, const float* __restrict B, int ldb,
                         float* __restrict C, int ldc) {
  float c[R][kNB];
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int n = 0; n < kNB; ++n) c[r][n] = Accumulate ? C[r * ldc + n] : 0.f;
  for (int k = 0; k < K; ++k) {
    const float* b = B + static_cast<std::size_t>(k) * ldb;
    float bk[kNB];
    for (int n = 0; n < kNB; ++n) bk[n] = b[n];
    for (int r = 0; r < R; ++r) {
      const float a = A[r * lda + k];
#pragma omp simd
      for (int n = 0; n < kNB; ++n) c[r][n] += a * bk[n];
    }
  }
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int n = 0; n < kNB; ++n) C[r * ldc + n] = c[r][n];
}

// C[M x N] (+)= A[M x K] * B[K x N], row-major, N a multiple of kNB.
template <bool Accumulate>
void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  for (int n0 = 0; n0 < N; n0 += kNB) {
    int m0 = 0;
    for (; m0 + kMR <= M; m0 += kMR)
      micro_kernel<kMR, Accumulate>(K, A + m0 * lda, lda, B + n0, ldb, C + m0 * ldc + n0, ldc);
    const float* a = A + m0 * lda;
    float* c = C + m0 * ldc + n0;
    switch (M - m0) {
      case 3: micro_kernel<3, Accumulate>(K, a, lda, B + n0, ldb, c, ldc); break;
      case 2: micro_kernel<2, Accumulate>(K, a, lda, B + n0, ldb, c, ldc); break;
      case 1: micro_kernel<1, Accumulate>(K, a, lda, B + n0, ldb, c, ldc); break;
      default: break;
    }
  }
}

struct WorkTile {
  int seq = 0;
  int q_tile = 0;  // index of the q-tile inside the sequence
};

struct CpuPlan : AttentionPlan {
  int num_seqs = 0, heads = 0, kv_heads = 0, head_size = 0, block_size = 0;
  int64_t total_q = 0;
  DType dtype = DType::bf16;
  bool causal = true;
  int q_tile = 1, kv_tile = 64, kv_tile_pad = 64, splits = 1, threads = 1;
  std::vector<WorkTile> tiles;  // costliest first, so dynamic scheduling ends balanced
  std::size_t scratch_floats = 0;       // per thread
  mutable std::vector<float> scratch;  // threads * scratch_floats, written only by run()
};

// One thread's fp32 scratch, carved from the plan's buffer.
struct Scratch {
  float* q;    // [M, d], pre-scaled
  float* acc;  // [M, d]
  float* s;    // [M, kv_tile_pad], scores then probabilities
  float* kt;   // [d, kv_tile_pad], K tile transposed
  float* v;    // [kv_tile, d]
  float* m;    // [M] running max
  float* l;    // [M] running sum of exponentials
};

std::size_t round16(std::size_t n) { return (n + 15) / 16 * 16; }

Scratch carve(const CpuPlan& pl, int thread) {
  const std::size_t M = static_cast<std::size_t>(pl.q_tile) * (pl.heads / pl.kv_heads);
  const std::size_t d = pl.head_size, tp = pl.kv_tile_pad;
  float* base = pl.scratch.data() + thread * pl.scratch_floats;
  Scratch s;
  s.q = base;
  s.acc = s.q + round16(M * d);
  s.s = s.acc + round16(M * d);
  s.kt = s.s + round16(M * tp);
  s.v = s.kt + round16(d * tp);
  s.m = s.v + round16(static_cast<std::size_t>(pl.kv_tile) * d);
  s.l = s.m + round16(M);
  return s;
}

std::size_t scratch_floats_for(int M, int d, int kv_tile, int kv_tile_pad) {
  const std::size_t m = M, dd = d, tp = kv_tile_pad;
  return round16(m * dd) * 2 + round16(m * tp) + round16(dd * tp) + round16(static_cast<std::size_t>(kv_tile) * dd) +
         round16(m) * 2 + 16;  // + 16: a 64-byte gap between threads
}

// Attends rows [row0, row0 + rows) of sequence `seq` (all heads of kv head `kh`) to keys [k0, k1): leaves the
// unnormalised output in sc.acc and the running max / sum in sc.m / sc.l.
template <DType DT>
void attend(const AttentionParams& p, const CpuPlan& pl, const Scratch& sc, int seq, int kh, int row0, int rows,
            int q_len, int kv_len, int k0, int k1) {
  const int g = p.heads / p.kv_heads, d = p.head_size, M = rows * g, T = pl.kv_tile, tp = pl.kv_tile_pad;
  const uint16_t* q = static_cast<const uint16_t*>(p.q);
  const uint16_t* kc = static_cast<const uint16_t*>(p.k_cache);
  const uint16_t* vc = static_cast<const uint16_t*>(p.v_cache);
  const int64_t q_token0 = p.cu_seqlens_q[seq] + row0;

  for (int r = 0; r < rows; ++r)
    for (int hh = 0; hh < g; ++hh) {
      const uint16_t* src = q + (q_token0 + r) * p.q_stride_token + static_cast<int64_t>(kh * g + hh) * p.q_stride_head;
      float* dst = sc.q + static_cast<std::size_t>(r * g + hh) * d;
      for (int c = 0; c < d; ++c) dst[c] = half_to_float(src[c], DT) * p.scale;
    }
  std::fill(sc.acc, sc.acc + static_cast<std::size_t>(M) * d, 0.f);
  std::fill(sc.m, sc.m + M, kNegInf);
  std::fill(sc.l, sc.l + M, 0.f);

  // Bottom-right causal: row i sees keys [0, i + kv_len - q_len]; keys past the last row's end are skipped.
  const int shift = kv_len - q_len;
  if (p.causal) k1 = std::min(k1, row0 + rows + shift);
  const int32_t* table = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;

  for (int j0 = k0; j0 < k1; j0 += T) {
    const int n = std::min(T, k1 - j0), npad = (n + kNB - 1) / kNB * kNB;
    int blk = j0 / p.block_size, off = j0 % p.block_size;
    for (int t = 0; t < n; ++t) {
      const int64_t base = static_cast<int64_t>(table[blk]) * p.kv_stride_block + off * p.kv_stride_token +
                           static_cast<int64_t>(kh) * p.kv_stride_head;
      const uint16_t* ks = kc + base;
      const uint16_t* vs = vc + base;
      float* vd = sc.v + static_cast<std::size_t>(t) * d;
      for (int c = 0; c < d; ++c) sc.kt[static_cast<std::size_t>(c) * tp + t] = half_to_float(ks[c], DT);
      for (int c = 0; c < d; ++c) vd[c] = half_to_float(vs[c], DT);
      if (++off == p.block_size) off = 0, ++blk;
    }
    for (int c = 0; c < d; ++c)
      for (int t = n; t < npad; ++t) sc.kt[static_cast<std::size_t>(c) * tp + t] = 0.f;

    gemm<false>(M, npad, d, sc.q, d, sc.kt, tp, sc.s, tp);

    for (int mi = 0; mi < M; ++mi) {
      float* s = sc.s + static_cast<std::size_t>(mi) * tp;
      const int visible = p.causal ? row0 + mi / g + shift + 1 : k1;
      const int nvalid = std::max(0, std::min(n, visible - j0));
      if (nvalid == 0) {  // this row sees none of the tile (other rows of the q-tile do)
        std::fill(s, s + n, 0.f);
        continue;
      }
      float mx = kNegInf;
#pragma omp simd reduction(max : mx)
      for (int j = 0; j < nvalid; ++j) mx = std::max(mx, s[j]);
      const float m_new = std::max(sc.m[mi], mx);
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < nvalid; ++j) {
        const float e = fast_exp(s[j] - m_new);
        s[j] = e;
        sum += e;
      }
      for (int j = nvalid; j < n; ++j) s[j] = 0.f;
      const float alpha = sc.m[mi] == kNegInf ? 0.f : fast_exp(sc.m[mi] - m_new);
      sc.l[mi] = sc.l[mi] * alpha + sum;
      sc.m[mi] = m_new;
      if (alpha != 1.f) {
        float* a = sc.acc + static_cast<std::size_t>(mi) * d;
        for (int c = 0; c < d; ++c) a[c] *= alpha;
      }
    }

    gemm<true>(M, d, n, sc.s, tp, sc.v, d, sc.acc, d);
  }
}

// Normalised output of the item's rows, rounded to the dtype.
template <DType DT>
void write_out(const AttentionParams& p, const Scratch& sc, int seq, int kh, int row0, int rows) {
  const int g = p.heads / p.kv_heads, d = p.head_size;
  uint16_t* o = static_cast<uint16_t*>(p.out);
  const int64_t token0 = p.cu_seqlens_q[seq] + row0;
  for (int r = 0; r < rows; ++r)
    for (int hh = 0; hh < g; ++hh) {
      const int mi = r * g + hh;
      const float inv = sc.l[mi] > 0.f ? 1.f / sc.l[mi] : 0.f;  // a row that sees no key writes zeros
      const float* a = sc.acc + static_cast<std::size_t>(mi) * d;
      uint16_t* dst = o + (token0 + r) * p.o_stride_token + static_cast<int64_t>(kh * g + hh) * p.o_stride_head;
      for (int c = 0; c < d; ++c) dst[c] = float_to_half(a[c] * inv, DT);
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
    if (w.ml[(slot0 + k) * 2 + 1] > 0.f) mx = std::max(mx, w.ml[(slot0 + k) * 2]);
  float* o = sc.acc;
  std::fill(o, o + d, 0.f);
  float total = 0.f;
  for (int k = 0; k < S; ++k) {
    const float l = w.ml[(slot0 + k) * 2 + 1];
    if (!(l > 0.f)) continue;  // an empty split (past the sequence, or fully masked)
    const float wk = fast_exp(w.ml[(slot0 + k) * 2] - mx);
    total += wk * l;
    const float* a = w.acc + (slot0 + k) * d;
    for (int c = 0; c < d; ++c) o[c] += wk * a[c];
  }
  const float inv = total > 0.f ? 1.f / total : 0.f;
  uint16_t* dst = static_cast<uint16_t*>(p.out) + token * p.o_stride_token + static_cast<int64_t>(h) * p.o_stride_head;
  for (int c = 0; c < d; ++c) dst[c] = float_to_half(o[c] * inv, DT);
}

template <DType DT>
void run_typed(const CpuPlan& pl, const AttentionParams& p) {
  const int64_t per_tile = static_cast<int64_t>(p.kv_heads) * pl.splits;
  const int64_t items = static_cast<int64_t>(pl.tiles.size()) * per_tile;
  const int64_t rows_out = p.total_q * p.heads;
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
        attend<DT>(p, pl, sc, wt.seq, kh, row0, rows, q_len, kv_len, 0, kv_len);
        write_out<DT>(p, sc, wt.seq, kh, row0, rows);
      } else {
        // Split boundaries on KV-tile multiples; trailing splits of a short sequence are empty.
        const int chunk = ((kv_len + pl.splits - 1) / pl.splits + pl.kv_tile - 1) / pl.kv_tile * pl.kv_tile;
        const int k0 = std::min(kv_len, split * chunk), k1 = std::min(kv_len, k0 + chunk);
        attend<DT>(p, pl, sc, wt.seq, kh, row0, rows, q_len, kv_len, k0, k1);
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

  Support supports(const AttentionProblem& p) const override {
    try {
      return cpu_unified_support(p, KnobValues::resolve());
    } catch (const std::invalid_argument& e) {
      return Support::no(e.what());
    }
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const Support s = cpu_unified_support(p, knobs);
    if (!s.ok) throw std::invalid_argument("cpu.unified declines: " + s.reason);
    auto pl = std::make_unique<CpuPlan>();
    pl->num_seqs = p.num_seqs();
    pl->heads = p.heads;
    pl->kv_heads = p.kv_heads;
    pl->head_size = p.head_size;
    pl->block_size = p.block_size;
    pl->total_q = p.total_q();
    pl->dtype = p.dtype;
    pl->causal = p.causal;
    pl->threads = std::max(1, omp_get_max_threads());
    pl->q_tile = opts_.q_tile > 0 ? std::min(opts_.q_tile, p.max_seqlen_q()) : cpu_q_tile(p);
    pl->kv_tile = cpu_kv_tile(p);
    pl->kv_tile_pad = (pl->kv_tile + kNB - 1) / kNB * kNB;

    // Split path: decode, or queries that fit one q-tile against a long KV (too few items to fill the threads).
    const bool split_path = opts_.split_path || opts_.splits > 0 || p.max_seqlen_q() == 1 ||
                            (p.max_seqlen_q() <= pl->q_tile && p.max_seqlen_k() >= 16 * p.max_seqlen_q());
    pl->splits = !split_path ? 1
                 : opts_.splits > 0 ? opts_.splits
                                    : cpu_decode_splits(p, pl->threads, pl->q_tile, pl->kv_tile);

    for (int s = 0; s < p.num_seqs(); ++s)
      for (int t = 0; t * pl->q_tile < p.q_lens[s]; ++t) pl->tiles.push_back({s, t});
    auto cost = [&](const WorkTile& w) {  // visible keys of the tile's last row
      const int last = std::min(p.q_lens[w.seq], (w.q_tile + 1) * pl->q_tile) - 1;
      return p.causal ? static_cast<int64_t>(last + p.kv_lens[w.seq] - p.q_lens[w.seq] + 1) : p.kv_lens[w.seq];
    };
    std::stable_sort(pl->tiles.begin(), pl->tiles.end(),
                     [&](const WorkTile& a, const WorkTile& b) { return cost(a) > cost(b); });

    const int M = pl->q_tile * p.group_size();
    pl->scratch_floats = scratch_floats_for(M, p.head_size, pl->kv_tile, pl->kv_tile_pad);
    pl->scratch.assign(pl->scratch_floats * pl->threads, 0.f);
    pl->workspace_bytes = pl->splits > 1 ? sizeof(float) * static_cast<std::size_t>(pl->total_q) * p.heads *
                                               pl->splits * (p.head_size + 2)
                                         : 0;
    pl->graph_replay = false;
    pl->summary = (split_path ? "decode splits=" + std::to_string(pl->splits) + " q_tile="
                              : std::string("prefill q_tile=")) +
                  std::to_string(pl->q_tile) + " kv_tile=" + std::to_string(pl->kv_tile) +
                  " threads=" + std::to_string(pl->threads);
    return pl;
  }

  void run(const AttentionPlan& plan, const AttentionParams& p, void* /*stream*/) const override {
    const auto* pl = dynamic_cast<const CpuPlan*>(&plan);
    if (!pl) throw std::invalid_argument("cpu.unified: plan was not made by cpu.unified");
    if (p.num_seqs != pl->num_seqs || p.heads != pl->heads || p.kv_heads != pl->kv_heads ||
        p.head_size != pl->head_size || p.block_size != pl->block_size || p.dtype != pl->dtype ||
        p.causal != pl->causal || p.total_q != pl->total_q)
      throw std::invalid_argument("cpu.unified: params do not describe the planned problem (" + pl->summary + ")");
    if (!p.q || !p.k_cache || !p.v_cache || !p.out || !p.cu_seqlens_q || !p.seqused_k || !p.block_table)
      throw std::invalid_argument("cpu.unified: a params pointer is null");
    if (pl->workspace_bytes > 0 && !p.workspace)
      throw std::invalid_argument("cpu.unified: plan needs " + std::to_string(pl->workspace_bytes) +
                                  " workspace bytes, params.workspace is null");
    if (p.dtype == DType::f16)
      run_typed<DType::f16>(*pl, p);
    else
      run_typed<DType::bf16>(*pl, p);
  }

 private:
  CpuUnifiedOptions opts_;
};

}  // namespace

int cpu_q_tile(const AttentionProblem& p) {
  return std::max(1, std::min(kTargetVectors / std::max(1, p.group_size()), p.max_seqlen_q()));
}

int cpu_kv_tile(const AttentionProblem& p) { return p.block_size >= 16 && p.block_size <= 128 ? p.block_size : 64; }

int cpu_decode_splits(const AttentionProblem& p, int threads, int q_tile, int kv_tile) {
  int64_t units = 0;  // (sequence, kv head, q-tile) items before splitting
  for (int q : p.q_lens) units += (q + q_tile - 1) / q_tile;
  units *= p.kv_heads;
  const int64_t target = 4 * static_cast<int64_t>(std::max(1, threads));
  const int64_t want = (target + units - 1) / std::max<int64_t>(1, units);
  const int64_t most = std::max(1, p.max_seqlen_k() / (2 * kv_tile));
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({want, most, 64})));
}

Support cpu_unified_support(const AttentionProblem& p, const KnobValues& knobs) {
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    return Support::no(e.what());
  }
  if (p.head_size % 8 != 0 || p.head_size > 512)
    return Support::no("head_size " + std::to_string(p.head_size) + " is not a multiple of 8 in [8, 512]");
  const int limit = knobs.get_int("ATTNBENCH_CPU_MAX_GFLOP");
  const double gflop = attention_work(p).flops * 1e-9;
  if (limit > 0 && gflop > limit) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", gflop);
    return Support::no("problem needs " + std::string(buf) + " GFLOP, above the CPU limit of " +
                       std::to_string(limit) + " GFLOP (knob ATTNBENCH_CPU_MAX_GFLOP, 0 = no limit)");
  }
  return Support::yes();
}

std::unique_ptr<AttentionKernel> make_cpu_unified(const CpuUnifiedOptions& opts) {
  return std::make_unique<CpuUnified>(opts);
}

std::unique_ptr<AttentionKernel> make_cpu_unified() { return make_cpu_unified(CpuUnifiedOptions{}); }

}  // namespace attnbench
