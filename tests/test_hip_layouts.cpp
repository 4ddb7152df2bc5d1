// The MFMA lane layouts (kernels/hip/device/mfma_layout.hpp) against the CDNA3 ISA's register tables, the
// properties the kernels rely on, the emulated atoms against a plain matrix product, and the emulator's own checks
// (divergent lanes, a barrier some threads never reach, an LDS overrun).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cases/inputs.hpp"
#include "hip/device/mfma_layout.hpp"
#include "hip/emulator/arch.hpp"
#include "hip/geometry.hpp"

namespace attnbench::hip {
namespace {

template <class Atom>
void expect_bijective() {
  std::set<std::pair<int, int>> a, b, acc;
  for (int l = 0; l < kWaveSize; ++l) {
    for (int i = 0; i < Atom::kOperand; ++i) {
      const Coord ea = Atom::a(l, i), eb = Atom::b(l, i);
      ASSERT_TRUE(ea.row >= 0 && ea.row < Atom::M && ea.col >= 0 && ea.col < Atom::K);
      ASSERT_TRUE(eb.row >= 0 && eb.row < Atom::K && eb.col >= 0 && eb.col < Atom::N);
      a.insert({ea.row, ea.col});
      b.insert({eb.row, eb.col});
    }
    for (int r = 0; r < Atom::kAcc; ++r) acc.insert({Atom::acc(l, r).row, Atom::acc(l, r).col});
  }
  EXPECT_EQ(a.size(), static_cast<std::size_t>(Atom::M * Atom::K));
  EXPECT_EQ(b.size(), static_cast<std::size_t>(Atom::K * Atom::N));
  EXPECT_EQ(acc.size(), static_cast<std::size_t>(Atom::M * Atom::N));
}

TEST(HipLayouts, MatchTheIsaRegisterTables) {
  // v_mfma_f32_32x32x8_f16: A[i][k]: lane i + 32 (k / 4), element k % 4; D: 4-row groups, lanes 32-63 the second half.
  EXPECT_EQ(Mfma32x32x8::a(0, 0), (Coord{0, 0}));
  EXPECT_EQ(Mfma32x32x8::a(31, 3), (Coord{31, 3}));
  EXPECT_EQ(Mfma32x32x8::a(32, 0), (Coord{0, 4}));
  EXPECT_EQ(Mfma32x32x8::b(33, 2), (Coord{6, 1}));
  EXPECT_EQ(Mfma32x32x8::acc(0, 0), (Coord{0, 0}));
  EXPECT_EQ(Mfma32x32x8::acc(0, 3), (Coord{3, 0}));
  EXPECT_EQ(Mfma32x32x8::acc(0, 4), (Coord{8, 0}));
  EXPECT_EQ(Mfma32x32x8::acc(32, 0), (Coord{4, 0}));
  EXPECT_EQ(Mfma32x32x8::acc(63, 15), (Coord{31, 31}));
  // v_mfma_f32_16x16x16_f16: A[i][k]: lane i + 16 (k / 4); D[4 (lane / 16) + r][lane % 16].
  EXPECT_EQ(Mfma16x16x16::a(16, 0), (Coord{0, 4}));
  EXPECT_EQ(Mfma16x16x16::a(63, 3), (Coord{15, 15}));
  EXPECT_EQ(Mfma16x16x16::b(17, 1), (Coord{5, 1}));
  EXPECT_EQ(Mfma16x16x16::acc(16, 0), (Coord{4, 0}));
  EXPECT_EQ(Mfma16x16x16::acc(47, 2), (Coord{10, 15}));
  expect_bijective<Mfma32x32x8>();
  expect_bijective<Mfma16x16x16>();
}

// A transposed accumulator map, the planted bug of the emulation tests.
struct TransposedAcc32 : Mfma32x32x8 {
  static constexpr Coord acc(int lane, int r) { return {Mfma32x32x8::acc(lane, r).col, Mfma32x32x8::acc(lane, r).row}; }
};

TEST(HipLayouts, PropertiesTheKernelsRelyOn) {
  static_assert(k_contiguous<Mfma32x32x8>() && k_contiguous<Mfma16x16x16>(), "one 8-byte load per operand");
  EXPECT_TRUE(acc_feeds_b<Mfma32x32x8>());  // the flash regime's P^T stays in registers
  EXPECT_FALSE(acc_feeds_b<TransposedAcc32>());
  EXPECT_FALSE(acc_feeds_a<Mfma16x16x16>());  // why the narrow regime (S = Q K^T) stages P through LDS
  EXPECT_FALSE(acc_feeds_a<Mfma32x32x8>());
  EXPECT_TRUE(acc_lanes_differ_in<Mfma32x32x8>(false, 32));   // a query's S^T values: lane and lane ^ 32
  EXPECT_FALSE(acc_lanes_differ_in<Mfma32x32x8>(false, 16));
  EXPECT_TRUE(acc_lanes_differ_in<Mfma16x16x16>(true, 15));  // a row's S values: the 16 lanes of lane / 16
  EXPECT_FALSE(acc_lanes_differ_in<Mfma16x16x16>(true, 7));
}

// D = A B + C through the emulated atom, operands scattered to lanes by the layout, against a plain product.
template <class Atom>
void expect_atom_is_matmul(emu::Atom kind, DType dt) {
  const std::vector<uint16_t> av = random_normal(Atom::M * Atom::K, dt, 3, 1);
  const std::vector<uint16_t> bv = random_normal(Atom::K * Atom::N, dt, 3, 2);
  const auto at = [&](const std::vector<uint16_t>& m, int row, int col, int cols) {
    return dt == DType::f16 ? half_to_float<DType::f16>(m[row * cols + col]) : half_to_float<DType::bf16>(m[row * cols + col]);
  };
  Frag a[kWaveSize], b[kWaveSize];
  std::vector<std::vector<float>> c(kWaveSize, std::vector<float>(16)), d(kWaveSize, std::vector<float>(16));
  const float* cp[kWaveSize];
  float* dp[kWaveSize];
  for (int l = 0; l < kWaveSize; ++l) {
    a[l] = b[l] = 0;
    for (int i = 0; i < Atom::kOperand; ++i) {
      const Coord ea = Atom::a(l, i), eb = Atom::b(l, i);
      a[l] |= static_cast<Frag>(av[ea.row * Atom::K + ea.col]) << (16 * i);
      b[l] |= static_cast<Frag>(bv[eb.row * Atom::N + eb.col]) << (16 * i);
    }
    for (int r = 0; r < Atom::kAcc; ++r) c[l][r] = 0.25f * r - l;
    cp[l] = c[l].data();
    dp[l] = d[l].data();
  }
  emu::run_atom(kind, dt, a, b, cp, dp);
  for (int l = 0; l < kWaveSize; ++l)
    for (int r = 0; r < Atom::kAcc; ++r) {
      const Coord e = Atom::acc(l, r);
      double want = c[l][r];
      for (int k = 0; k < Atom::K; ++k) want += at(av, e.row, k, Atom::K) * at(bv, k, e.col, Atom::N);
      ASSERT_NEAR(d[l][r], want, 1e-4) << "lane " << l << " reg " << r;
    }
}

TEST(HipLayouts, EmulatedAtomsAreMatrixProducts) {
  for (DType dt : {DType::f16, DType::bf16}) {
    expect_atom_is_matmul<Mfma32x32x8>(emu::Atom::mfma32x32x8, dt);
    expect_atom_is_matmul<Mfma16x16x16>(emu::Atom::mfma16x16x16, dt);
  }
}

std::string launch_error(int threads, std::size_t lds, const emu::Body& body) {
  try {
    emu::launch({1, 1, 1}, threads, lds, body);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(HipLayouts, EmulatorRefusesWhatHardwareWouldNotDo) {
  // A shuffle every lane takes part in works: lane l gets lane l ^ 1's value.
  std::vector<float> got(128);
  EXPECT_EQ(launch_error(128, 0, [&](const emu::EmuArch& a, unsigned char*) {
              got[a.thread()] = a.shfl_xor(static_cast<float>(a.thread()), 1);
            }), "");
  EXPECT_EQ(got[6], 7.f);
  EXPECT_EQ(got[71], 70.f);
  // Half a wave at a shuffle, the other half at a barrier: divergent.
  EXPECT_NE(launch_error(64, 0, [](const emu::EmuArch& a, unsigned char*) {
              if (a.thread() < 32) a.shfl_xor(1.f, 1);
              else a.barrier();
            }).find("divergent"), std::string::npos);
  // A wave that returned while the other waits at a barrier.
  EXPECT_NE(launch_error(128, 0, [](const emu::EmuArch& a, unsigned char*) {
              if (a.thread() < 64) a.barrier();
            }).find("returned before it"), std::string::npos);
  // A write one byte past the LDS.
  EXPECT_NE(launch_error(64, 16, [](const emu::EmuArch& a, unsigned char* lds) {
              if (a.thread() == 0) lds[16] = 0;
            }).find("LDS written past"), std::string::npos);
  // A read of LDS another wave writes, with and without the barrier between.
  for (const bool with_barrier : {false, true}) {
    int nan_reads = 0;
    launch_error(128, 128 * 4, [&](const emu::EmuArch& a, unsigned char* lds) {
      float* f = reinterpret_cast<float*>(lds);
      f[a.thread()] = 1.f;
      if (with_barrier) a.barrier();
      nan_reads += std::isnan(f[(a.thread() + 64) % 128]) ? 1 : 0;
    });
    EXPECT_EQ(nan_reads > 0, !with_barrier) << nan_reads;
  }
  // LDS starts as 0xFF bytes (NaN), so a read of what no thread wrote shows.
  float first = 0.f;
  launch_error(64, 16, [&](const emu::EmuArch& a, unsigned char* lds) {
    if (a.thread() == 0) first = bits_as<float>(*reinterpret_cast<const uint32_t*>(lds));
  });
  EXPECT_TRUE(std::isnan(first));
}

}  // namespace
}  // namespace attnbench::hip
