// Which keys a query row of one sequence sees: the one statement of the masking rule for every kernel (the Eigen
// reference keeps its own). Row i sits at key position i' = i + diag: aligned bottom-right (the default), diag =
// kv_len - q_len (a decode row is the last key's); aligned top-left, diag = 0. Key j is visible to row i iff
//   0 <= j < kv_len, and j <= i' when causal, and i' - window_left <= j <= i' + window_right,
// a window bound of -1 being unbounded. Both ends of the visible range grow with i.
#pragma once

#include "host_device.hpp"

namespace attnbench::device {

struct Visibility {
  int q_len, kv_len;
  int diag;  // kv_len - q_len bottom-right, 0 top-left
  bool causal;
  int window_left = -1;
  int window_right = -1;

  Visibility() = default;
  // Every argument explicit: a call written for an older signature does not compile into a different rule.
  ATTNBENCH_HD_INLINE Visibility(int q_len_, int kv_len_, bool causal_, bool top_left, int left, int right)
      : q_len(q_len_), kv_len(kv_len_), diag(top_left ? 0 : kv_len_ - q_len_), causal(causal_), window_left(left),
        window_right(right) {}
  // The same rule where diag was computed earlier and is carried.
  ATTNBENCH_HD_INLINE static Visibility aligned(int q_len, int kv_len, int diag, bool causal, int left, int right) {
    Visibility v;
    v.q_len = q_len;
    v.kv_len = kv_len;
    v.diag = diag;
    v.causal = causal;
    v.window_left = left;
    v.window_right = right;
    return v;
  }

  // One past the last key row i sees; at most kv_len, and <= first_visible(i) (possibly negative) when it sees none.
  ATTNBENCH_HD_INLINE int visible_end(int i) const {
    int end = causal ? imin(kv_len, i + 1 + diag) : kv_len;
    if (window_right >= 0) end = imin(end, i + 1 + diag + window_right);
    return end;
  }
  // One past the last key any of rows [0, row_end) sees: visible_end(min(row_end, q_len) - 1), the KV extent of a
  // block of rows that may run past the sequence.
  ATTNBENCH_HD_INLINE int rows_end(int row_end) const {
    int end = causal ? imin(kv_len, imin(row_end, q_len) + diag) : kv_len;
    if (window_right >= 0) end = imin(end, imin(row_end, q_len) + diag + window_right);
    return end;
  }
  // The KV tiles of bn keys that rows [0, row_end) read: up to the one holding the last key any of them sees.
  ATTNBENCH_HD_INLINE int tiles_end(int row_end, int bn) const { return (imax(0, rows_end(row_end)) + bn - 1) / bn; }
  // The tile of bn keys holding the first key row i sees, at most `end` (a block of rows from i starts there).
  ATTNBENCH_HD_INLINE int first_tile(int i, int bn, int end) const { return imin(end, first_visible(i) / bn); }
  // visible_end(r / group): row r of a block where each token's `group` query heads are packed as consecutive rows.
  ATTNBENCH_HD_INLINE int visible_end_packed(int r, int group) const {
    int end = causal ? imin(kv_len, r / group + 1 + diag) : kv_len;
    if (window_right >= 0) end = imin(end, r / group + 1 + diag + window_right);
    return end;
  }
  // The first key row i sees (0 without a left window).
  ATTNBENCH_HD_INLINE int first_visible(int i) const {
    return window_left >= 0 ? imax(0, i + diag - window_left) : 0;
  }
  ATTNBENCH_HD_INLINE bool visible(int i, int j) const { return j >= first_visible(i) && j < visible_end(i); }
  // The same rule from the key's side, for kernels that walk queries under a key row: the rows [lo, hi) with key
  // 0 <= j < kv_len visible (rows past q_len included: callers bound them), empty (lo >= hi) for any other j.
  ATTNBENCH_HD_INLINE void rows_seeing(int j, int& lo, int& hi) const {
    constexpr int kAll = 0x3fffffff;
    lo = causal ? j - diag : -kAll;
    if (window_right >= 0) lo = imax(lo, j - diag - window_right);
    hi = window_left >= 0 ? j - diag + window_left + 1 : kAll;
    if (j < 0 || j >= kv_len) hi = lo;
  }
  ATTNBENCH_HD_INLINE int visible_count(int i) const { return imax(0, visible_end(i) - first_visible(i)); }

  // Keys [n0, n1) against rows [r0, r1] (n0 < n1, r0 <= r1): no row sees any of them (the tile can be skipped) ...
  // Rows that see no key sit at one end of a sequence (the first ones bottom-right when q_len > kv_len, the last
  // ones top-left), so both ends empty means every row between is.
  ATTNBENCH_HD_INLINE bool tile_fully_masked(int n0, int n1, int r0, int r1) const {
    return n0 >= visible_end(r1) || n1 <= first_visible(r0) || (visible_count(r0) == 0 && visible_count(r1) == 0);
  }
  // ... or every row sees all of them (the tile needs no per-element mask).
  ATTNBENCH_HD_INLINE bool tile_fully_visible(int n0, int n1, int r0, int r1) const {
    return n1 <= visible_end(r0) && n0 >= first_visible(r1);
  }
};

}  // namespace attnbench::device
