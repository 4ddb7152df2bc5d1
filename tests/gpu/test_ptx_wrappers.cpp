// Device unit tests of the sm_90a PTX wrappers (kernels/cuda/wgmma.cuh, mbarrier.cuh): each wrapper runs in a tiny
// kernel (ptx_wrapper_kernels.cu) and is compared against a host-computed result. Inputs are small integers, so
// every fp32 result is exact and compared with ==. Skipped (with the reason) without an sm_90 device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/runtime.hpp"
#include "ptx_wrapper_kernels.hpp"

namespace attnbench::gputest {
namespace {

// The kernels are built for sm_90a only.
std::string why_no_sm90() {
  if (cuda::device_count() == 0) return "no CUDA device";
  const cuda::DeviceProps d = cuda::device_props(0);
  if (d.cc_major != 9 || d.cc_minor != 0)
    return "needs sm_90 (device 0 is " + d.name + ", sm_" + std::to_string(d.cc_major * 10 + d.cc_minor) + ")";
  return "";
}

#define ATTNBENCH_SKIP_WITHOUT_SM90()                     \
  do {                                                    \
    const std::string why_ = why_no_sm90();               \
    if (!why_.empty()) GTEST_SKIP() << why_;              \
  } while (0)

// A matrix of seeded integers in [-4, 4]: values (for the host reference) and their 16-bit bit patterns. Random
// values make a transposed operand, a wrong row / slab offset or a wrong swizzle read different numbers.
struct Matrix {
  std::vector<float> val;
  std::vector<uint16_t> bits;
};
Matrix small_ints(DType dt, std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Matrix m;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    m.val.push_back(v);
    m.bits.push_back(dt == DType::bf16 ? float_to_bf16(v) : float_to_f16(v));
  }
  return m;
}

// C[rows][cols] = sum_k A[r][k] B(k, c) for k in [k0, k0 + depth); B stored [cols][k_stride] (b_nk) or
// [k_stride][cols]. Exact: |sum| <= 128 * 16.
std::vector<float> matmul(const Matrix& a, const Matrix& b, int rows, int cols, int k_stride, int k0, int depth,
                          bool b_nk) {
  std::vector<float> c(static_cast<std::size_t>(rows) * cols, 0.f);
  for (int r = 0; r < rows; ++r)
    for (int n = 0; n < cols; ++n) {
      float s = 0.f;
      for (int k = k0; k < k0 + depth; ++k)
        s += a.val[r * k_stride + k] * (b_nk ? b.val[n * k_stride + k] : b.val[k * cols + n]);
      c[r * cols + n] = s;
    }
  return c;
}

// Every element, exactly; names the first few wrong (row, col) and counts the rest.
void expect_same(const std::vector<float>& got, const std::vector<float>& want, int cols, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (bad++ < 5)
      ADD_FAILURE() << what << ": C[" << i / cols << "][" << i % cols << "] = " << got[i] << ", expected " << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": wrong elements of " << got.size();
}

enum class Mode { ss, rs };

// One m64nNk16 wrapper over K = kWgmmaK (8 k16 steps, two 64-wide K slabs): SS computes A B^T with B [N][K],
// RS computes A B with B [K][N] (V-like, MN-major in shared memory).
void check_wgmma(Mode mode, DType dt, int n) {
  const Matrix a = small_ints(dt, 64 * kWgmmaK, 11 + n);
  const Matrix b = small_ints(dt, static_cast<std::size_t>(n) * kWgmmaK, 29 + n);
  const bool ss = mode == Mode::ss;
  const std::vector<float> got = ss ? run_wgmma_ss(dt, n, a.bits, b.bits) : run_wgmma_rs(dt, n, a.bits, b.bits);
  expect_same(got, matmul(a, b, 64, n, kWgmmaK, 0, kWgmmaK, ss), n,
              std::string(ss ? "wgmma_ss<" : "wgmma_rs<") + dtype_name(dt) + ", " + std::to_string(n) + ">");
}

TEST(PtxWrappers, WgmmaSsBf16N64) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::ss, DType::bf16, 64); }
TEST(PtxWrappers, WgmmaSsBf16N128) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::ss, DType::bf16, 128); }
TEST(PtxWrappers, WgmmaSsBf16N256) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::ss, DType::bf16, 256); }
TEST(PtxWrappers, WgmmaSsF16N64) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::ss, DType::f16, 64); }
TEST(PtxWrappers, WgmmaSsF16N128) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::ss, DType::f16, 128); }
TEST(PtxWrappers, WgmmaSsF16N256) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::ss, DType::f16, 256); }
TEST(PtxWrappers, WgmmaRsBf16N64) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::rs, DType::bf16, 64); }
TEST(PtxWrappers, WgmmaRsBf16N128) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::rs, DType::bf16, 128); }
TEST(PtxWrappers, WgmmaRsBf16N256) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::rs, DType::bf16, 256); }
TEST(PtxWrappers, WgmmaRsF16N64) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::rs, DType::f16, 64); }
TEST(PtxWrappers, WgmmaRsF16N128) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::rs, DType::f16, 128); }
TEST(PtxWrappers, WgmmaRsF16N256) { ATTNBENCH_SKIP_WITHOUT_SM90(); check_wgmma(Mode::rs, DType::f16, 256); }

// wgmma_commit / wgmma_wait<1> / wgmma_wait<0>: the older group's accumulator is complete after wait<1>.
TEST(PtxWrappers, WgmmaCommitWaitGroups) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  const Matrix a = small_ints(DType::bf16, 64 * kWgmmaK, 7), b = small_ints(DType::bf16, 64 * kWgmmaK, 8);
  const std::vector<float> got = run_wgmma_wait_groups(DType::bf16, a.bits, b.bits);
  const std::vector<float> lo(got.begin(), got.begin() + 64 * 64), hi(got.begin() + 64 * 64, got.end());
  expect_same(lo, matmul(a, b, 64, 64, kWgmmaK, 0, 64, true), 64, "group 1 (after wait<1>)");
  expect_same(hi, matmul(a, b, 64, 64, kWgmmaK, 64, 64, true), 64, "group 2 (after wait<0>)");
}

// The descriptor bits, from the PTX field table (the PTX ISA's matrix descriptor): start >> 4 at 0-13, LBO >> 4 at
// 16-29, SBO >> 4 at 32-45, 128B swizzle = 1 at 62-63. Literal expectations, not the formula again.
TEST(PtxWrappers, SmemDescSw128Fields) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  // K-major Q tile at 0x2400 + 32 (k16 step 1): LBO 16, SBO 1024.
  EXPECT_EQ(run_smem_desc_sw128(0x2420, 16, 1024), 0x4000004000010242ull);
  // V-like MN-major tile: LBO 128 rows x 128 B = 16 KB, SBO 1024; the start address keeps its low 18 bits only.
  EXPECT_EQ(run_smem_desc_sw128(0x40000 + 0x8800, 16384, 1024), 0x4000004004000880ull);
  // The split form: a tile's base descriptor plus a k-step offset is the descriptor of base + offset.
  EXPECT_EQ(run_sw128_desc_at(0x2400, 16, 0x20), 0x4000004000010242ull);
  EXPECT_EQ(run_sw128_desc_at(0x40000 + 0x8000, 16384, 0x800), 0x4000004004000880ull);
}

// fence_proxy_async_smem after cp.async: tiles written by cp.async, then one SS wgmma (N = 128) reads them.
TEST(PtxWrappers, FenceProxyAsyncCpAsyncThenWgmma) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  const Matrix a = small_ints(DType::bf16, 64 * kWgmmaK, 3), b = small_ints(DType::bf16, 128 * kWgmmaK, 4);
  expect_same(run_wgmma_ss(DType::bf16, 128, a.bits, b.bits, /*cp_async_fill=*/true),
              matmul(a, b, 64, 128, kWgmmaK, 0, kWgmmaK, true), 128, "cp.async-filled wgmma_ss<bf16, 128>");
}

TEST(PtxWrappers, MbarrierTwoPhases) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  const MbarPhaseResult r = run_mbar_phases();
  EXPECT_EQ(r.done_after_31, 0) << "phase 0 completed before its 32nd arrival (init count)";
  EXPECT_EQ(r.seen_phase0, 1) << "mbar_wait(parity 0) returned before phase 0 completed";
  EXPECT_EQ(r.seen_phase1, 2) << "mbar_wait(parity 1) returned before phase 1 completed";
  EXPECT_EQ(r.phase2_open, 1) << "not exactly two phases completed";
}

// mbar_arrive_expect_tx + tma_load_4d: 64 tokens in {64 d, 1 head, block_size tokens, 1 block} boxes, one per page,
// 128B swizzle, non-zero coordinates in every dimension. Every cache element holds a distinct pattern, so the smem
// bytes pin the coordinate order, the strides and the swizzle: token t (of page pages[t / block_size]), d j at byte
// t 128 + ((j/8) ^ (t%8)) 16 + (j%8) 2, the same place for every page size.
void check_tma_boxes(int block_size, const std::vector<int>& pages) {
  constexpr int kHeads = 2, kHs = 128, kD0 = 64, kHead = 1;
  const int blocks = 49152 / (block_size * kHeads * kHs);  // distinct 16-bit patterns: 3, 6 or 12 pages
  std::vector<uint16_t> cache(blocks * block_size * kHeads * kHs);
  for (std::size_t i = 0; i < cache.size(); ++i) cache[i] = static_cast<uint16_t>(i);  // < 0xFFFF, the poison
  const std::vector<uint16_t> smem =
      run_tma_load_box(DType::bf16, cache, blocks, block_size, kHeads, kHs, kD0, kHead, pages);
  ASSERT_EQ(smem.size(), 64u * 64u);
  int bad = 0;
  for (int t = 0; t < 64; ++t)
    for (int j = 0; j < 64; ++j) {
      const int word = (t * 128 + (((j / 8) ^ (t % 8)) * 16) + (j % 8) * 2) / 2;
      const int page = pages[t / block_size], tok = t % block_size;
      const uint16_t want = cache[((page * block_size + tok) * kHeads + kHead) * kHs + kD0 + j];
      if (smem[word] != want && bad++ < 5)
        ADD_FAILURE() << "block_size " << block_size << ", token " << t << ", d " << kD0 + j << ": smem word "
                      << word << " = " << smem[word] << ", expected " << want;
    }
  EXPECT_EQ(bad, 0);
}

TEST(PtxWrappers, TmaLoad4dSwizzledBox) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  check_tma_boxes(64, {2});
}

// Pages of 16 and 32 tokens (the wide kernel's small pages): a box per page, out of order, at its rows of the tile.
TEST(PtxWrappers, TmaLoad4dABoxPerPage) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  check_tma_boxes(16, {5, 2, 11, 0});
  check_tma_boxes(32, {4, 1});
}

// named_bar_sync / named_bar_arrive: four producer -> consumer rounds; round r's buffer sums to (r + 1) 528.
TEST(PtxWrappers, NamedBarrierHandOff) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  const std::vector<int> sums = run_named_barrier_handoff(4);
  ASSERT_EQ(sums.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(sums[r], (r + 1) * 528) << "round " << r;
}

// setmaxnreg_dec / setmaxnreg_inc in a 384-thread CTA: the producer's cp.async loads under 40 registers, the two
// consumers' N = 256 accumulators (128 registers) under 232; both halves of C must be right.
TEST(PtxWrappers, SetmaxnregProducerConsumer) {
  ATTNBENCH_SKIP_WITHOUT_SM90();
  const Matrix a = small_ints(DType::bf16, 128 * 64, 1), b = small_ints(DType::bf16, 256 * 64, 2);
  expect_same(run_setmaxnreg_roles(a.bits, b.bits), matmul(a, b, 128, 256, 64, 0, 64, true), 256,
              "setmaxnreg roles");
}

}  // namespace
}  // namespace attnbench::gputest
