// The fp32 Eigen reference against a naive double-precision loop, its row subsets, its strides and its mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attnbench/attention.hpp"
#include "attnbench/reference.hpp"
#include "cases/inputs.hpp"

namespace attnbench {
namespace {

using reference::RowId;

// Straightforward paged attention in doubles over the params' host pointers and strides.
std::vector<double> naive_attention(const AttentionParams& p) {
  const auto* q = static_cast<const uint16_t*>(p.q);
  const auto* kc = static_cast<const uint16_t*>(p.k_cache);
  const auto* vc = static_cast<const uint16_t*>(p.v_cache);
  const int d = p.head_size;
  const int group = p.heads / p.kv_heads;
  std::vector<double> out(static_cast<std::size_t>(p.total_q) * p.heads * d, 0.0);
  auto kv_off = [&](int s, int j, int kvh) {
    const int64_t phys = p.block_table[static_cast<int64_t>(s) * p.block_table_stride + j / p.block_size];
    return phys * p.kv_stride_block + (j % p.block_size) * p.kv_stride_token + kvh * p.kv_stride_head;
  };
  for (int s = 0; s < p.num_seqs; ++s) {
    const int q_len = p.cu_seqlens_q[s + 1] - p.cu_seqlens_q[s];
    const int kv_len = p.seqused_k[s];
    for (int i = 0; i < q_len; ++i) {
      const int64_t t = p.cu_seqlens_q[s] + i;
      const int end = p.causal ? std::min(kv_len, i + (kv_len - q_len) + 1) : kv_len;
      for (int h = 0; h < p.heads; ++h) {
        const int kvh = h / group;
        std::vector<double> sc(end);
        double m = -1e300;
        for (int j = 0; j < end; ++j) {
          double acc = 0;
          for (int c = 0; c < d; ++c)
            acc += static_cast<double>(half_to_float(q[t * p.q_stride_token + h * p.q_stride_head + c], p.types.q)) *
                   half_to_float(kc[kv_off(s, j, kvh) + c], p.types.q);
          sc[j] = acc * p.scale;
          m = std::max(m, sc[j]);
        }
        double sum = 0;
        for (int j = 0; j < end; ++j) sum += (sc[j] = std::exp(sc[j] - m));
        for (int c = 0; c < d; ++c) {
          double acc = 0;
          for (int j = 0; j < end; ++j) acc += sc[j] * half_to_float(vc[kv_off(s, j, kvh) + c], p.types.q);
          out[(t * p.heads + h) * d + c] = acc / sum;
        }
      }
    }
  }
  return out;
}

struct Shape {
  std::string name;
  std::vector<int> q_lens, kv_lens;
  int heads, kv_heads, head_size, block_size;
  BlockOrder order;
};

void PrintTo(const Shape& s, std::ostream* os) { *os << s.name; }

AttentionProblem make_problem(const Shape& s, bool causal, DType dt) {
  AttentionProblem p;
  p.q_lens = s.q_lens;
  p.kv_lens = s.kv_lens;
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.head_size = s.head_size;
  p.block_size = s.block_size;
  p.causal = causal;
  p.types = AttentionTypes::all(dt);
  return p;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
    if (std::abs(got[i] - want[i]) > tol * (1.0 + std::abs(want[i]))) {
      if (++bad <= 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

class ReferenceNaive : public ::testing::TestWithParam<std::tuple<Shape, bool, DType>> {};

TEST_P(ReferenceNaive, MatchesNaiveLoop) {
  const auto& [shape, causal, dt] = GetParam();
  const HostInputs in = build_inputs(make_problem(shape, causal, dt), 1234, shape.order);
  const AttentionParams p = in.params();
  std::vector<float> got(static_cast<std::size_t>(p.total_q) * p.heads * p.head_size, std::nanf(""));
  reference::paged_attention_all(p, got.data());
  expect_close(got, naive_attention(p), 1e-4);
}

const Shape kShapes[] = {
    // q_len != kv_len, group 1, kv_len not a multiple of the block.
    {"prefill_g1", {5, 17}, {37, 64}, 4, 4, 32, 16, BlockOrder::shuffled},
    // decode, group 4, including kv_len 1 and 1 below/above a block boundary.
    {"decode_g4", {1, 1, 1, 1}, {1, 100, 33, 15}, 8, 2, 64, 16, BlockOrder::shuffled},
    // group 7, odd head size, tiny blocks.
    {"mixed_g7", {3, 9, 1}, {9, 50, 21}, 14, 2, 24, 8, BlockOrder::shuffled},
    // q_len == kv_len (square causal), MQA, one block size bigger than the sequence.
    {"square_mqa", {20}, {20}, 7, 1, 16, 64, BlockOrder::contiguous},
    // a longer sequence spanning many blocks, contiguous table.
    {"long_g4", {3, 1}, {700, 333}, 8, 2, 128, 64, BlockOrder::contiguous},
    {"long_g4_shuffled", {3, 1}, {700, 333}, 8, 2, 128, 64, BlockOrder::shuffled},
    // blocks shared across and within sequences
    {"long_g4_repeated", {3, 1}, {700, 333}, 8, 2, 128, 16, BlockOrder::repeated},
};

std::string param_name(const ::testing::TestParamInfo<ReferenceNaive::ParamType>& info) {
  const auto& [shape, causal, dt] = info.param;
  return shape.name + (causal ? "_causal_" : "_full_") + dtype_name(dt);
}

INSTANTIATE_TEST_SUITE_P(ReferenceShapes, ReferenceNaive,
                         ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::Bool(),
                                            ::testing::Values(DType::f16, DType::bf16)),
                         param_name);

// A subset of rows, in shuffled order and with a repeat, equals the corresponding rows of the full output.
TEST(ReferenceRows, SubsetMatchesAll) {
  for (const bool causal : {true, false}) {
    AttentionProblem pr;
    pr.q_lens = {7, 1, 40, 2};
    pr.kv_lens = {7, 90, 130, 65};
    pr.heads = 12;
    pr.kv_heads = 4;
    pr.head_size = 64;
    pr.block_size = 16;
    pr.causal = causal;
    pr.types = AttentionTypes::all(DType::bf16);
    const HostInputs in = build_inputs(pr, 99, BlockOrder::shuffled);
    const AttentionParams p = in.params();
    const int d = p.head_size;
    std::vector<float> all(static_cast<std::size_t>(p.total_q) * p.heads * d);
    reference::paged_attention_all(p, all.data());

    std::vector<RowId> rows;
    for (int64_t t = 0; t < p.total_q; ++t)
      for (int h = 0; h < p.heads; ++h)
        if ((t * 7 + h * 3) % 5 == 0) rows.push_back({t, h});
    rows.push_back(rows[3]);  // a repeated row
    rows.push_back({p.total_q - 1, p.heads - 1});
    std::mt19937 rng(5);
    std::shuffle(rows.begin(), rows.end(), rng);

    std::vector<float> sub(rows.size() * d, std::nanf(""));
    reference::paged_attention(p, rows, sub.data());
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (int c = 0; c < d; ++c) {
        const float want = all[(rows[r].token * p.heads + rows[r].head) * d + c];
        ASSERT_NEAR(sub[r * d + c], want, 1e-5 * (1 + std::abs(want)))
            << "row " << r << " (token " << rows[r].token << ", head " << rows[r].head << ") dim " << c;
      }
  }
}

TEST(ReferenceRows, RejectsOutOfRangeRows) {
  AttentionProblem pr;
  pr.q_lens = {2};
  pr.kv_lens = {4};
  pr.heads = 2;
  pr.kv_heads = 1;
  pr.head_size = 8;
  const HostInputs in = build_inputs(pr, 1);
  std::vector<float> out(8);
  EXPECT_THROW(reference::paged_attention(in.params(), {{2, 0}}, out.data()), std::out_of_range);
  EXPECT_THROW(reference::paged_attention(in.params(), {{0, 2}}, out.data()), std::out_of_range);
  EXPECT_NO_THROW(reference::paged_attention(in.params(), {}, out.data()));
}

// The reference honours the params' strides: the same data in a padded Q and a [block, head, token, dim] cache
// layout with a padded block table gives the same output.
TEST(ReferenceStrides, NonPackedLayoutsGiveSameResult) {
  AttentionProblem pr;
  pr.q_lens = {3, 1};
  pr.kv_lens = {40, 17};
  pr.heads = 6;
  pr.kv_heads = 2;
  pr.head_size = 16;
  pr.block_size = 8;
  pr.types = AttentionTypes::all(DType::f16);
  const HostInputs in = build_inputs(pr, 7, BlockOrder::shuffled);
  const AttentionParams p = in.params();
  const int d = p.head_size, H = p.heads, KV = p.kv_heads, bs = p.block_size;

  AttentionParams s = p;
  // Q: heads padded to 2*d apart, tokens padded by one extra head slot.
  s.q_stride_head = 2 * d;
  s.q_stride_token = (H + 1) * s.q_stride_head;
  std::vector<uint16_t> q(static_cast<std::size_t>(p.total_q) * s.q_stride_token, 0x7e00);
  for (int64_t t = 0; t < p.total_q; ++t)
    for (int h = 0; h < H; ++h)
      for (int c = 0; c < d; ++c)
        q[t * s.q_stride_token + h * s.q_stride_head + c] = in.q.halves()[t * p.q_stride_token + h * p.q_stride_head + c];
  // Cache: [block, kv_head, token, dim] with one spare token per head.
  s.kv_stride_token = d;
  s.kv_stride_head = static_cast<int64_t>(bs + 1) * d;
  s.kv_stride_block = KV * s.kv_stride_head;
  std::vector<uint16_t> k(static_cast<std::size_t>(in.num_blocks) * s.kv_stride_block, 0x7e00), v = k;
  for (int64_t b = 0; b < in.num_blocks; ++b)
    for (int t = 0; t < bs; ++t)
      for (int kh = 0; kh < KV; ++kh)
        for (int c = 0; c < d; ++c) {
          const int64_t from = b * p.kv_stride_block + t * p.kv_stride_token + kh * p.kv_stride_head + c;
          const int64_t to = b * s.kv_stride_block + t * s.kv_stride_token + kh * s.kv_stride_head + c;
          k[to] = in.k_cache.halves()[from];
          v[to] = in.v_cache.halves()[from];
        }
  // Block table rows padded with -1 columns that must never be read.
  s.block_table_stride = p.block_table_stride + 3;
  std::vector<int32_t> table(static_cast<std::size_t>(p.num_seqs) * s.block_table_stride, -1);
  for (int sq = 0; sq < p.num_seqs; ++sq)
    for (int j = 0; j < p.block_table_stride; ++j)
      table[sq * s.block_table_stride + j] = in.block_table[sq * p.block_table_stride + j];
  s.q = q.data();
  s.k_cache = k.data();
  s.v_cache = v.data();
  s.block_table = table.data();

  std::vector<float> a(static_cast<std::size_t>(p.total_q) * H * d), b(a.size());
  reference::paged_attention_all(p, a.data());
  reference::paged_attention_all(s, b.data());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "element " << i;
  expect_close(b, naive_attention(p), 1e-4);
}

// Bottom-right causal alignment: q_len 2, kv_len 5 -> row 0 sees keys 0..3, row 1 sees 0..4. With all keys
// equal the softmax is uniform over the visible keys, and V[j] = e_j makes the output spell out that set.
TEST(ReferenceMask, CausalIsBottomRightAligned) {
  for (const bool causal : {true, false}) {
    AttentionProblem pr;
    pr.q_lens = {2};
    pr.kv_lens = {5};
    pr.heads = 2;
    pr.kv_heads = 1;
    pr.head_size = 8;
    pr.block_size = 2;  // 3 blocks, the last half full
    pr.causal = causal;
    pr.types = AttentionTypes::all(DType::bf16);
    HostInputs in = build_inputs(pr, 3, BlockOrder::shuffled);
    const AttentionParams p0 = in.params();
    for (int j = 0; j < 5; ++j) {
      const int64_t phys = in.block_table[j / pr.block_size];
      for (int c = 0; c < pr.head_size; ++c) {
        const int64_t off = phys * p0.kv_stride_block + (j % pr.block_size) * p0.kv_stride_token + c;
        in.k_cache.halves()[off] = float_to_bf16(0.5f);
        in.v_cache.halves()[off] = float_to_bf16(c == j ? 1.f : 0.f);
      }
    }
    const AttentionParams p = in.params();
    std::vector<float> out(2 * 2 * 8, std::nanf(""));
    reference::paged_attention_all(p, out.data());
    for (int h = 0; h < 2; ++h) {
      const float* row0 = out.data() + (0 * 2 + h) * 8;
      const float* row1 = out.data() + (1 * 2 + h) * 8;
      for (int c = 0; c < 8; ++c) {
        const float want0 = causal ? (c < 4 ? 0.25f : 0.f) : (c < 5 ? 0.2f : 0.f);
        const float want1 = c < 5 ? 0.2f : 0.f;
        EXPECT_NEAR(row0[c], want0, 1e-6) << (causal ? "causal" : "full") << " row 0 head " << h << " dim " << c;
        EXPECT_NEAR(row1[c], want1, 1e-6) << (causal ? "causal" : "full") << " row 1 head " << h << " dim " << c;
      }
    }
    // Asking for row 0 alone gives the same answer.
    std::vector<float> one(8);
    reference::paged_attention(p, {{0, 1}}, one.data());
    for (int c = 0; c < 8; ++c) EXPECT_EQ(one[c], out[(0 * 2 + 1) * 8 + c]);
  }
}

}  // namespace
}  // namespace attnbench
