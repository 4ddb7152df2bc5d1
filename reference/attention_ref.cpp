// fp32 Eigen reference for paged attention.
//
// Work is organised around groups: one (sequence, kv head) pair and the requested rows (query token, query head)
// that read it. A group's rows, sorted by token, are cut into chunks; each chunk is one OpenMP task that gathers
// the keys its rows can see ([0, max visible end)) through the block table into thread-local fp32 K and V
// matrices, then computes S = Q_chunk * K^T (Eigen), a masked fp32 softmax per row, and O = P * V.
// A decode group (a few rows) is one chunk, so each K/V element is converted once per group; long groups
// (prefill rows) are split for parallelism, where the repeated gather costs ~2/(4 * rows per chunk) of the math.
// Only per-thread buffers are allocated: never an fp32 copy of the cache.
#define EIGEN_DONT_PARALLELIZE  // parallelism is ours (OpenMP over blocks and row chunks)
#include "attnbench/reference.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>

namespace attnbench::reference {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A row chunk's score matrix holds at most this many floats (rows are cut to fit).
constexpr int64_t kMaxScoreFloats = int64_t{1} << 22;
constexpr int kMaxChunkRows = 64;
constexpr int kMinChunkRows = 8;

// Storage -> fp32: fp16 through f16_table() (exact: it is f16_to_float), bf16 a shift, 8-bit codes through a
// 256-entry table; times `scale` (an 8-bit KV cache's dequantisation scale, 1 otherwise).
struct Converter {
  DType dt = DType::bf16;
  float scale = 1.f;
  const float* table = nullptr;  // fp16
  float fp8[256] = {};
  Converter(DType d, float s) : dt(d), scale(s) {
    if (dt == DType::f16) table = f16_table();
    if (!is_16bit(dt))
      for (int c = 0; c < 256; ++c) fp8[c] = fp8_to_float(static_cast<uint8_t>(c), dt);
  }
  // dst[0..n) = element i0.. of the buffer at base (contiguous elements).
  void row(const void* base, int64_t i0, float* dst, int n) const {
    if (!is_16bit(dt)) {
      const uint8_t* src = static_cast<const uint8_t*>(base) + i0;
      for (int i = 0; i < n; ++i) dst[i] = fp8[src[i]] * scale;
      return;
    }
    const uint16_t* src = static_cast<const uint16_t*>(base) + i0;
    if (table) {
      for (int i = 0; i < n; ++i) dst[i] = table[src[i]] * scale;
    } else {
      for (int i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]) * scale;
    }
  }
};

// The converters of one call: Q, K and V.
struct Converters {
  Converter q, k, v;
};

struct Row {
  int64_t out_index;  // position in the caller's row list
  int64_t token;
  int head;
  int pos;         // the row's key position i' (query_key_position)
  int qi;          // the row's index among its sequence's queries
  int begin, end;  // keys [begin, end) visible
};

struct Group {
  int seq;
  int kv_head;
  int64_t row_begin, row_end;  // into the sorted rows
  int keys;                    // keys the group's rows see: the largest `end` of its rows
};

struct Task {
  int group;
  int64_t row_begin, row_end;
};

struct Scratch {
  RowMat k, v, q, scores, o;
};

void check_params(const AttentionParams& p) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("reference::paged_attention: " + what); };
  if (!p.q || !p.k_cache || !p.v_cache || !p.cu_seqlens_q || !p.seqused_k || !p.block_table)
    bad("null input pointer");
  if (p.num_seqs <= 0 || p.heads <= 0 || p.kv_heads <= 0 || p.head_size <= 0 || p.block_size <= 0)
    bad("non-positive dimension");
  if (p.heads % p.kv_heads != 0) bad("heads is not a multiple of kv_heads");
  if (!(p.scale > 0.f) || !std::isfinite(p.scale)) bad("scale must be finite and > 0");
  const AttentionTypes& t = p.types;
  const bool sixteen = is_16bit(t.q) && t.o == t.q && (t.kv == t.q || !is_16bit(t.kv));
  const bool fp8_sdpa = !is_16bit(t.q) && !is_16bit(t.kv) && is_16bit(t.o);
  if (!sixteen && !fp8_sdpa)
    bad("types " + t.name() + ": O in a 16-bit dtype; Q in it with K/V in it or in an 8-bit one, or Q and K/V in 8-bit "
        "ones");
  const AttentionFeatureParams& f = p.features;
  if (f.window_left < -1 || f.window_right < -1) bad("window bounds must be >= -1");
  if (!(f.softcap >= 0.f) || !std::isfinite(f.softcap)) bad("softcap must be finite and >= 0");
  if (f.qq_bias_len < 0 || (f.qq_bias_len > 0) != (f.qq_bias != nullptr)) bad("qq_bias and qq_bias_len disagree");
  for (float sc : {f.k_scale, f.v_scale, f.q_scale})
    if (!(sc > 0.f) || !std::isfinite(sc)) bad("k_scale, v_scale and q_scale must be finite and > 0");
}

// s (already scaled) of row r at key j after the score features: softcap, then ALiBi and qq-bias.
float modified_score(const AttentionParams& p, const Row& r, int j, int new_from, float s) {
  const AttentionFeatureParams& f = p.features;
  if (f.softcap > 0.f) s = f.softcap * std::tanh(s / f.softcap);
  if (f.alibi_slopes) s += f.alibi_slopes[r.head] * static_cast<float>(j - r.pos);
  if (f.qq_bias && j >= new_from) s += f.qq_bias[static_cast<int64_t>(r.qi) * f.qq_bias_len + (j - new_from)];
  return s;
}

// Computes one chunk of rows (sorted by token) of one group: gathers the visible K/V, then scores, softmax, PV.
void run_chunk(const AttentionParams& p, const Converters& cvt, const Group& g, const Row* rows, int64_t n,
               float* out, float* lse, Scratch& w) {
  const int d = p.head_size;
  int keys = 0;
  for (int64_t r = 0; r < n; ++r) keys = std::max(keys, rows[r].end);
  if (keys <= 0) {  // nothing visible: zeros, and the LSE of the sink alone
    for (int64_t r = 0; r < n; ++r) {
      std::fill_n(out + rows[r].out_index * d, d, 0.f);
      if (lse)
        lse[rows[r].out_index] =
            p.features.sinks ? p.features.sinks[rows[r].head] : -std::numeric_limits<float>::infinity();
    }
    return;
  }
  // Gather keys [0, keys) of (g.seq, g.kv_head) through the block table.
  w.k.resize(keys, d);
  w.v.resize(keys, d);
  const int32_t* table = p.block_table + static_cast<int64_t>(g.seq) * p.block_table_stride;
  for (int key0 = 0, b = 0; key0 < keys; key0 += p.block_size, ++b) {
    const int64_t base = static_cast<int64_t>(table[b]) * p.kv_stride_block + g.kv_head * p.kv_stride_head;
    const int t_end = std::min(p.block_size, keys - key0);
    for (int t = 0; t < t_end; ++t) {
      const int64_t off = base + t * p.kv_stride_token;
      cvt.k.row(p.k_cache, off, w.k.row(key0 + t).data(), d);
      cvt.v.row(p.v_cache, off, w.v.row(key0 + t).data(), d);
    }
  }
  // Q rows in fp32.
  w.q.resize(n, d);
  for (int64_t r = 0; r < n; ++r)
    cvt.q.row(p.q, rows[r].token * p.q_stride_token + static_cast<int64_t>(rows[r].head) * p.q_stride_head,
              w.q.row(r).data(), d);
  w.scores.resize(n, keys);
  w.scores.noalias() = w.q * w.k.transpose();
  const int new_from = std::max(0, p.seqused_k[g.seq]) - (p.cu_seqlens_q[g.seq + 1] - p.cu_seqlens_q[g.seq]);
  for (int64_t r = 0; r < n; ++r) {
    float* s = w.scores.row(r).data();
    const int begin = rows[r].begin, end = rows[r].end;
    // The sink is a logit in the denominator only: it starts the running max and the sum.
    const bool sink = p.features.sinks != nullptr;
    float m = sink ? p.features.sinks[rows[r].head] : -std::numeric_limits<float>::infinity();
    for (int j = begin; j < end; ++j) {
      s[j] = modified_score(p, rows[r], j, new_from, s[j] * p.scale);
      m = std::max(m, s[j]);
    }
    float sum = sink ? std::exp(p.features.sinks[rows[r].head] - m) : 0.f;
    for (int j = begin; j < end; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    if (lse) lse[rows[r].out_index] = sum > 0.f || sum != sum ? m + std::log(sum) : -std::numeric_limits<float>::infinity();
    for (int j = 0; j < keys; ++j) s[j] = j >= begin && j < end ? s[j] * inv : 0.f;  // masked keys weigh 0
  }
  w.o.resize(n, d);
  w.o.noalias() = w.scores * w.v;
  for (int64_t r = 0; r < n; ++r) std::memcpy(out + rows[r].out_index * d, w.o.row(r).data(), sizeof(float) * d);
}

}  // namespace

void paged_attention(const AttentionParams& p, const std::vector<RowId>& request, float* out, float* lse) {
  if (request.empty()) return;
  check_params(p);
  const int group_size = p.heads / p.kv_heads;
  const Converters cvt{Converter(p.types.q, p.features.q_scale), Converter(p.types.kv, p.features.k_scale),
                       Converter(p.types.kv, p.features.v_scale)};
  const int32_t* cu = p.cu_seqlens_q;
  const int64_t total_q = cu[p.num_seqs];

  // Map each row to its sequence and group; count rows per group.
  const int64_t num_groups = static_cast<int64_t>(p.num_seqs) * p.kv_heads;
  const int64_t n_rows = static_cast<int64_t>(request.size());
  std::vector<int64_t> group_of(n_rows);
  std::vector<int64_t> count(num_groups + 1, 0);
  for (int64_t r = 0; r < n_rows; ++r) {
    const RowId& id = request[r];
    if (id.token < 0 || id.token >= total_q || id.head < 0 || id.head >= p.heads)
      throw std::out_of_range("reference::paged_attention: row (token " + std::to_string(id.token) + ", head " +
                              std::to_string(id.head) + ") outside [0, " + std::to_string(total_q) + ") x [0, " +
                              std::to_string(p.heads) + ")");
    // Sequence s with cu[s] <= token < cu[s+1] (empty sequences are skipped by upper_bound).
    const int s = static_cast<int>(std::upper_bound(cu, cu + p.num_seqs + 1, id.token) - cu) - 1;
    group_of[r] = static_cast<int64_t>(s) * p.kv_heads + id.head / group_size;
    ++count[group_of[r] + 1];
  }
  for (int64_t g = 0; g < num_groups; ++g) count[g + 1] += count[g];

  // Rows sorted by group (stable), then by token within a group so a chunk's rows have similar visible ends.
  std::vector<Row> rows(n_rows);
  {
    std::vector<int64_t> next(count.begin(), count.end() - 1);
    for (int64_t r = 0; r < n_rows; ++r) {
      const RowId& id = request[r];
      const int64_t g = group_of[r];
      const int s = static_cast<int>(g / p.kv_heads);
      const int q_len = cu[s + 1] - cu[s];
      const int kv_len = std::max(0, p.seqused_k[s]);
      const int qi = static_cast<int>(id.token - cu[s]);
      const int pos = query_key_position(qi, q_len, kv_len, p.top_left);
      int end = kv_len, begin = 0;
      if (p.causal) end = std::clamp(causal_visible_end(qi, q_len, kv_len, p.top_left), 0, kv_len);
      if (p.features.window_right >= 0) end = std::clamp(pos + p.features.window_right + 1, 0, end);
      if (p.features.window_left >= 0) begin = std::clamp(pos - p.features.window_left, 0, kv_len);
      rows[next[g]++] = Row{r, id.token, id.head, pos, qi, begin, std::max(begin, end)};
    }
  }
  std::vector<Group> groups;
  for (int64_t g = 0; g < num_groups; ++g) {
    if (count[g] == count[g + 1]) continue;
    Group grp;
    grp.seq = static_cast<int>(g / p.kv_heads);
    grp.kv_head = static_cast<int>(g % p.kv_heads);
    grp.row_begin = count[g];
    grp.row_end = count[g + 1];
    std::sort(rows.begin() + grp.row_begin, rows.begin() + grp.row_end, [](const Row& a, const Row& b) {
      return a.token != b.token ? a.token < b.token : a.head < b.head;
    });
    grp.keys = 0;
    for (int64_t r = grp.row_begin; r < grp.row_end; ++r) grp.keys = std::max(grp.keys, rows[r].end);
    groups.push_back(std::move(grp));
  }

  // Chunks: big enough to amortise the gather (>= kMinChunkRows rows), small enough to give every thread
  // several tasks, bounded in rows and in score-matrix size.
  const int nthreads = std::max(1, omp_get_max_threads());
  const int64_t balanced = (n_rows + 4 * nthreads - 1) / (4 * nthreads);
  std::vector<Task> tasks;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    const int64_t mem_rows = std::max<int64_t>(1, kMaxScoreFloats / std::max(1, g.keys));
    const int64_t chunk =
        std::max<int64_t>(1, std::min<int64_t>({std::max<int64_t>(balanced, kMinChunkRows), kMaxChunkRows, mem_rows}));
    for (int64_t r = g.row_begin; r < g.row_end; r += chunk)
      tasks.push_back(Task{static_cast<int>(gi), r, std::min(g.row_end, r + chunk)});
  }
  // Longest first (rows x keys; a chunk's last row sees the most keys), so a long task does not start last.
  auto cost = [&](const Task& t) { return static_cast<double>(rows[t.row_end - 1].end) * (t.row_end - t.row_begin); };
  std::stable_sort(tasks.begin(), tasks.end(), [&](const Task& a, const Task& b) { return cost(a) > cost(b); });
  // An exception may not leave an OpenMP region: the first one is kept and rethrown after it (e.g. bad_alloc).
  std::exception_ptr failure;
#pragma omp parallel
  {
    Scratch w;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < static_cast<int64_t>(tasks.size()); ++t) {
      try {
        const Task& task = tasks[t];
        run_chunk(p, cvt, groups[task.group], rows.data() + task.row_begin, task.row_end - task.row_begin, out, lse,
                  w);
      } catch (...) {
#pragma omp critical(attnbench_reference_failure)
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

void paged_attention_all(const AttentionParams& p, float* out, float* lse) {
  check_params(p);
  const int64_t total_q = p.cu_seqlens_q[p.num_seqs];
  std::vector<RowId> rows(static_cast<std::size_t>(total_q) * p.heads);
  for (int64_t t = 0; t < total_q; ++t)
    for (int h = 0; h < p.heads; ++h) rows[t * p.heads + h] = RowId{t, h};
  paged_attention(p, rows, out, lse);
}

}  // namespace attnbench::reference
