// The rules shared by the CPU and CUDA kernels (kernels/common/device/): visibility against a naive loop over
// (row, key), the tile predicates against the same loop, paged addressing, the work model built on the rule, and the
// launch-constant division.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/common/device/fast_div.hpp"
#include "../kernels/common/device/paged.hpp"
#include "../kernels/common/device/visibility.hpp"
#include "attnbench/attention.hpp"

namespace attnbench::device {
namespace {

// The rule as stated, one pair at a time.
bool naive_visible(int i, int j, int q_len, int kv_len, bool causal, bool top_left, int left, int right) {
  const int ip = top_left ? i : i + kv_len - q_len;
  if (j < 0 || j >= kv_len) return false;
  if (causal && j > ip) return false;
  if (left >= 0 && j < ip - left) return false;
  if (right >= 0 && j > ip + right) return false;
  return true;
}

struct Case {
  int q_len, kv_len;
  bool causal;
  int left, right;
  bool top_left = false;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const int windows[] = {-1, 0, 1, 2, 5, 17, 100};
  for (int q = 1; q <= 13; ++q)
    for (int kv = 0; kv <= 23; ++kv)
      for (int causal = 0; causal < 2; ++causal)
        for (int left : windows)
          for (int right : windows)
            for (bool top_left : {false, true}) out.push_back({q, kv, causal == 1, left, right, top_left});
  for (int q : {1, 64, 100, 129})  // longer sequences, prefill and chunked
    for (int kv : {q, q + 1, q + 63, 3 * q + 7})
      for (int causal = 0; causal < 2; ++causal)
        for (bool top_left : {false, true}) out.push_back({q, kv, causal == 1, -1, -1, top_left});
  return out;
}

Visibility make(const Case& c) { return Visibility(c.q_len, c.kv_len, c.causal, c.top_left, c.left, c.right); }
bool naive_visible(const Case& c, int i, int j) {
  return naive_visible(i, j, c.q_len, c.kv_len, c.causal, c.top_left, c.left, c.right);
}

TEST(DeviceVisibility, MatchesNaiveLoopPerPair) {
  int64_t checked = 0;
  for (const Case& c : cases()) {
    const Visibility v = make(c);
    for (int i = 0; i < c.q_len; ++i) {
      int count = 0, first = -1, last = -1;
      for (int j = -3; j < c.kv_len + 3; ++j) {
        const bool want = naive_visible(c, i, j);
        ASSERT_EQ(v.visible(i, j), want) << "q " << c.q_len << " kv " << c.kv_len << " causal " << c.causal
                                         << " window " << c.left << "," << c.right << " top_left " << c.top_left << " row " << i
                                         << " key " << j;
        if (want) {
          if (first < 0) first = j;
          last = j;
          ++count;
        }
        ++checked;
      }
      const std::string at = "q " + std::to_string(c.q_len) + " kv " + std::to_string(c.kv_len) + " causal " +
                             std::to_string(c.causal) + " window " + std::to_string(c.left) + "," +
                             std::to_string(c.right) + " row " + std::to_string(i);
      EXPECT_EQ(v.visible_count(i), count) << at;
      EXPECT_LE(v.visible_end(i), c.kv_len) << at;
      if (count > 0) {
        EXPECT_EQ(last - first + 1, count) << at << ": the visible keys are one range";
        EXPECT_EQ(v.first_visible(i), first) << at;
        EXPECT_EQ(v.visible_end(i), last + 1) << at;
      } else {
        EXPECT_LE(v.visible_end(i), v.first_visible(i)) << at;
      }
      if (i > 0) {  // kernels bound a block of rows by its first and last row
        EXPECT_LE(v.first_visible(i - 1), v.first_visible(i)) << at;
        EXPECT_LE(v.visible_end(i - 1), v.visible_end(i)) << at;
      }
    }
  }
  EXPECT_GT(checked, 1000000);
}

// The key's side of the rule (the backward walks query tiles under a key row) against the same loop.
TEST(DeviceVisibility, RowsSeeingAKeyMatchNaiveLoop) {
  for (const Case& c : cases()) {
    const Visibility v = make(c);
    for (int j = -2; j < c.kv_len + 2; ++j) {
      int lo = 0, hi = 0;
      v.rows_seeing(j, lo, hi);
      for (int i = -2; i < c.q_len + 2; ++i)
        ASSERT_EQ(i >= lo && i < hi, naive_visible(c, i, j))  // rows past either end by the same formula
            << "q " << c.q_len << " kv " << c.kv_len << " causal " << c.causal << " window " << c.left << ","
            << c.right << " top_left " << c.top_left << " row " << i << " key " << j;
    }
  }
}

// The block and packed forms kernels use for tile counts and GQA-packed rows, and the carried-alignment factory.
TEST(DeviceVisibility, BlockPackedAndAlignedFormsAgree) {
  for (const Case& c : cases()) {
    const Visibility v = make(c);
    const Visibility a =
        Visibility::aligned(c.q_len, c.kv_len, c.top_left ? 0 : c.kv_len - c.q_len, c.causal, c.left, c.right);
    for (int i = 0; i < c.q_len; ++i) {
      ASSERT_EQ(a.visible_end(i), v.visible_end(i));
      ASSERT_EQ(a.first_visible(i), v.first_visible(i));
    }
    for (int row_end = 1; row_end <= c.q_len + 5; ++row_end) {
      int naive_end = 0;  // one past the last key any row < row_end sees
      for (int i = 0; i < std::min(row_end, c.q_len); ++i)
        for (int j = 0; j < c.kv_len; ++j)
          if (naive_visible(c, i, j)) naive_end = std::max(naive_end, j + 1);
      ASSERT_EQ(v.rows_end(row_end), v.visible_end(std::min(row_end, c.q_len) - 1)) << "row_end " << row_end;
      if (naive_end > 0) ASSERT_EQ(v.rows_end(row_end), naive_end) << "row_end " << row_end;
      else ASSERT_LE(v.rows_end(row_end), 0 + std::max(0, v.first_visible(std::min(row_end, c.q_len) - 1)));
    }
    for (int group : {1, 2, 3, 8})
      for (int r = 0; r < c.q_len * group; ++r) ASSERT_EQ(v.visible_end_packed(r, group), v.visible_end(r / group));
  }
}

// The KV tiles a block of rows reads (tiles_end, first_tile: the wide kernel and the L2 walk's cost model): every key
// a row of the block sees lies in [first, end), the last tile holds one, the first holds its first row's first key,
// and the span is never negative (a block that sees no key may still read a masked tile).
TEST(DeviceVisibility, ABlocksTilesHoldEveryKeyItSees) {
  for (const Case& c : cases())
    for (int tq : {1, 3, 4})
      for (int bn : {1, 2, 4, 16}) {
        const Visibility v = make(c);
        for (int m0 = 0; m0 < c.q_len; m0 += tq) {
          const int end = v.tiles_end(m0 + tq, bn), first = v.first_tile(m0, bn, end);
          int lo = c.kv_len, hi = -1, first_row_lo = -1;  // the block's first and last visible keys; row m0's first
          for (int i = m0; i < std::min(m0 + tq, c.q_len); ++i)
            for (int j = 0; j < c.kv_len; ++j)
              if (naive_visible(c, i, j)) {
                lo = std::min(lo, j), hi = std::max(hi, j);
                if (i == m0 && first_row_lo < 0) first_row_lo = j;
              }
          SCOPED_TRACE("q " + std::to_string(c.q_len) + " kv " + std::to_string(c.kv_len) + " window " +
                       std::to_string(c.left) + "," + std::to_string(c.right) + " m0 " + std::to_string(m0) +
                       " tq " + std::to_string(tq) + " bn " + std::to_string(bn));
          ASSERT_GE(end, 0);
          ASSERT_LE(first, end);
          if (hi < 0) continue;
          ASSERT_LE(first, lo / bn);
          ASSERT_EQ(end, hi / bn + 1);
          if (first_row_lo >= 0) {
            ASSERT_EQ(first, first_row_lo / bn);
          }
        }
      }
}

TEST(DeviceVisibility, TilePredicatesMatchNaiveLoop) {
  for (const Case& c : cases()) {  // the smaller cases: the naive check is quartic
    if (c.q_len > 7 || c.kv_len > 12 || c.left == 1 || c.left > 5 || c.right == 1 || c.right > 5) continue;
    const Visibility v = make(c);
    for (int r0 = 0; r0 < c.q_len; ++r0)
      for (int r1 = r0; r1 < c.q_len; ++r1)
        for (int n0 = 0; n0 < c.kv_len + 2; ++n0)
          for (int n1 = n0 + 1; n1 <= c.kv_len + 3; ++n1) {
            bool any = false, all = true;
            for (int i = r0; i <= r1; ++i)
              for (int j = n0; j < n1; ++j) {
                const bool vis = naive_visible(c, i, j);
                any = any || vis;
                all = all && vis;
              }
            ASSERT_EQ(v.tile_fully_masked(n0, n1, r0, r1), !any)
                << "q " << c.q_len << " kv " << c.kv_len << " causal " << c.causal << " window " << c.left << ","
                << c.right << " rows " << r0 << ".." << r1 << " keys " << n0 << ".." << n1;
            ASSERT_EQ(v.tile_fully_visible(n0, n1, r0, r1), all)
                << "q " << c.q_len << " kv " << c.kv_len << " causal " << c.causal << " window " << c.left << ","
                << c.right << " rows " << r0 << ".." << r1 << " keys " << n0 << ".." << n1;
          }
  }
}

TEST(DeviceVisibility, BottomRightCausalExamples) {
  const Visibility prefill(8, 8, true, false, -1, -1);  // square: row i sees keys [0, i]
  EXPECT_EQ(prefill.visible_end(0), 1);
  EXPECT_EQ(prefill.visible_end(7), 8);
  const Visibility chunk(4, 10, true, false, -1, -1);  // the last 4 of 10 tokens: row 0 sees keys [0, 6]
  EXPECT_EQ(chunk.visible_end(0), 7);
  EXPECT_EQ(chunk.visible_end(3), 10);
  const Visibility decode(1, 4096, true, false, -1, -1);  // a decode row sees every key
  EXPECT_EQ(decode.visible_end(0), 4096);
  EXPECT_EQ(decode.first_visible(0), 0);
  const Visibility short_kv(6, 2, true, false, -1, -1);  // more queries than keys: rows 0-3 see nothing
  EXPECT_EQ(short_kv.visible_count(3), 0);
  EXPECT_EQ(short_kv.visible_count(4), 1);
  const Visibility full(5, 9, false, false, -1, -1);
  EXPECT_EQ(full.visible_end(0), 9);
  const Visibility local(16, 16, true, false, 3, -1);  // sliding window: row 10 sees keys [7, 10]
  EXPECT_EQ(local.first_visible(10), 7);
  EXPECT_EQ(local.visible_end(10), 11);
  EXPECT_EQ(local.visible_count(1), 2);
}

TEST(DeviceVisibility, TopLeftExamples) {
  const Visibility chunk(4, 10, true, true, -1, -1);  // row i sits at key i: row 0 sees key 0 only
  EXPECT_EQ(chunk.visible_end(0), 1);
  EXPECT_EQ(chunk.visible_end(3), 4);
  const Visibility decode(1, 4096, true, true, -1, -1);  // a decode row sees key 0
  EXPECT_EQ(decode.visible_count(0), 1);
  const Visibility padded(6, 2, true, true, -1, -1);  // keys shorter than the queries: every row sees some
  EXPECT_EQ(padded.visible_count(0), 1);
  EXPECT_EQ(padded.visible_count(5), 2);
  const Visibility window(8, 20, false, true, 2, 1);  // the window around i too: row 5 sees keys [3, 6]
  EXPECT_EQ(window.first_visible(5), 3);
  EXPECT_EQ(window.visible_end(5), 7);
}

TEST(DevicePaged, PositionAndOffsetMatchDivision) {
  for (int bs : {1, 3, 16, 32, 48, 64, 80, 128, 192, 256, 1000, 4096})
    for (int tok = 0; tok < 5 * bs + 3; ++tok) {
      const PagedPos pp = PageDivisor(bs).pos(tok);
      ASSERT_EQ(pp.page, tok / bs) << "block_size " << bs << " tok " << tok;
      ASSERT_EQ(pp.offset, tok % bs);
    }
  // The multiply-high is exact up to 2^31 - 1, the largest token a sequence can have.
  std::mt19937 rng(7);
  for (int bs : {3, 7, 16, 48, 80, 100, 192, 1000, 65535, (1 << 30) + 1}) {
    const PageDivisor pd(bs);
    for (int tok : {0, bs - 1, bs, 0x7fffffff, 0x7fffffff - 1, 0x40000000})
      ASSERT_EQ(pd.page(tok), tok / bs) << "block_size " << bs << " tok " << tok;
    for (int i = 0; i < 100000; ++i) {
      const int tok = static_cast<int>(rng() & 0x7fffffffu);
      ASSERT_EQ(pd.page(tok), tok / bs) << "block_size " << bs << " tok " << tok;
    }
  }
  // Strides of [num_blocks, block_size, kv_heads, head_size] with a physical block past 2^31 elements.
  const int64_t stride_token = 8 * 128, stride_block = 64 * stride_token;
  EXPECT_EQ(paged_offset(40000, 5, stride_block, stride_token), int64_t{40000} * stride_block + 5 * stride_token);
  EXPECT_GT(paged_offset(40000, 5, stride_block, stride_token), int64_t{1} << 31);
  // Offsets inside a page are 32-bit: a page of 64 rows x 8 heads x 128 fits, one past 2^31 elements does not.
  EXPECT_TRUE(page_fits_int32(64, 8, 128, stride_token, 128));
  EXPECT_TRUE(page_fits_int32(64, 8, 128, 128, 64 * 128));  // head-major page
  EXPECT_FALSE(page_fits_int32(2, 1, 128, int64_t{1} << 31, 128));
  EXPECT_FALSE(page_fits_int32(64, 8, 128, -stride_token, 128));
}

// A sequence's block-table row starts seq x stride entries in, past 2^31 too (the product widens before it can
// overflow).
TEST(DevicePaged, BlockTableRowIsSeqTimesStride) {
  EXPECT_EQ(block_table_row_offset(0, 512), 0u);
  EXPECT_EQ(block_table_row_offset(3, 512), 1536u);
  EXPECT_EQ(block_table_row_offset(40000, 60000), uint64_t{2400000000});  // past INT32_MAX
  EXPECT_EQ(block_table_row_offset(0x7fffffff, 0x7fffffff), uint64_t{0x7fffffff} * 0x7fffffff);
}

// The work model counts visible pairs with the rule, and reads once each key some row sees; the same counts from
// the naive loop, with and without a sliding window.
TEST(DeviceVisibility, WorkModelCountsVisiblePairsAndKeys) {
  for (bool causal : {false, true})
    for (bool top_left : {false, true})
      for (auto [left, right] : {std::pair{-1, -1}, {20, -1}, {10, 5}, {0, 0}}) {
        AttentionProblem p;
        p.q_lens = {1, 7, 64, 5, 130};
        p.kv_lens = {33, 7, 200, 3, 130};
        p.heads = 4;
        p.kv_heads = 2;
        p.head_size = 64;
        p.causal = causal;
        p.top_left = top_left;
        p.types = AttentionTypes::all(DType::bf16);
        p.features.window_left = left;
        p.features.window_right = right;
        double pairs = 0, keys = 0, q_rows = 0;
        for (int s = 0; s < p.num_seqs(); ++s) {
          q_rows += p.q_lens[s];
          for (int j = 0; j < p.kv_lens[s]; ++j) {
            bool seen = false;
            for (int i = 0; i < p.q_lens[s]; ++i) {
              const bool v = naive_visible(i, j, p.q_lens[s], p.kv_lens[s], causal, top_left, left, right);
              pairs += v ? 1 : 0;
              seen = seen || v;
            }
            keys += seen ? 1 : 0;
          }
        }
        const WorkModel w = attention_work(p);
        EXPECT_EQ(w.flops, 4.0 * pairs * p.heads * p.head_size)
            << "causal " << causal << " top_left " << top_left << " window " << left;
        EXPECT_EQ(w.bytes, 2.0 * (2.0 * q_rows * p.heads + 2.0 * keys * p.kv_heads) * p.head_size)
            << "causal " << causal << " window " << left << "," << right;
      }
}

// Division by a launch constant (page sizes, the wide kernel's work walk) as a multiply-high, add and shift: exact
// for every dividend below 2^31, at divisors 1, powers of two and their neighbours, and random ones.
TEST(DeviceFastDiv, MatchesIntegerDivision) {
  std::vector<int> divisors;
  for (int d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int k = 1; k < 31; ++k)
    for (int delta : {-1, 0, 1}) divisors.push_back((1 << k) + delta);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<int>(rng() % 0x7ffffffeu));
  divisors.push_back(0x7fffffff);
  for (int d : divisors) {
    const FastDiv f(d);
    const int64_t dd = d;
    std::vector<int64_t> ns = {0, 1, dd - 1, dd, dd + 1, 2 * dd - 1, 2 * dd, 0x7fffffff, 0x7ffffffe, 0x40000000};
    for (int i = 0; i < 64; ++i) ns.push_back(rng() % 0x80000000u);
    for (int64_t m = 1; m * dd <= 0x7fffffff; m = m * 3 + 1) ns.push_back(m * dd - 1), ns.push_back(m * dd);
    for (int64_t n64 : ns) {
      if (n64 > 0x7fffffff) continue;
      const int n = static_cast<int>(n64);
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    }
  }
}

}  // namespace
}  // namespace attnbench::device
