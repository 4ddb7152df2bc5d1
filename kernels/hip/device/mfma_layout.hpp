// The lane layouts of the two MFMA atoms hip.unified uses (CDNA2/CDNA3 ISA, wave64), as constexpr index functions.
// The kernels compute every operand address, mask and output index from them; the CPU emulator builds each atom's
// matrices with them (kernels/hip/emulator). Element i of lane l of an operand sits at A[row][col] / B[row][col]
// (row = M or K index), accumulator register r of lane l at D[row][col].
//   v_mfma_f32_32x32x8_{f16,bf16}: D[32x32] += A[32x8] B[8x32]; lane holds 4 A, 4 B, 16 D values.
//   v_mfma_f32_16x16x16_{f16,bf16}: D[16x16] += A[16x16] B[16x16]; lane holds 4 A, 4 B, 4 D values.
#pragma once

#include "common/device/host_device.hpp"

namespace attnbench::hip {

struct Coord {
  int row, col;
  constexpr bool operator==(const Coord& o) const { return row == o.row && col == o.col; }
};

struct Mfma32x32x8 {
  static constexpr int M = 32, N = 32, K = 8, kOperand = 4, kAcc = 16;
  static constexpr Coord a(int lane, int i) { return {lane % 32, 4 * (lane / 32) + i}; }
  static constexpr Coord b(int lane, int i) { return {4 * (lane / 32) + i, lane % 32}; }
  static constexpr Coord acc(int lane, int r) { return {8 * (r / 4) + 4 * (lane / 32) + r % 4, lane % 32}; }
};

struct Mfma16x16x16 {
  static constexpr int M = 16, N = 16, K = 16, kOperand = 4, kAcc = 4;
  static constexpr Coord a(int lane, int i) { return {lane % 16, 4 * (lane / 16) + i}; }
  static constexpr Coord b(int lane, int i) { return {4 * (lane / 16) + i, lane % 16}; }
  static constexpr Coord acc(int lane, int r) { return {4 * (lane / 16) + r, lane % 16}; }
};

// The layouts a kernel is compiled with: the hardware's. The emulation tests compile the kernels with wrong ones
// as well, to show that a layout mistake fails the gate.
struct HwLayouts {
  using Wide = Mfma32x32x8;    // the flash regime
  using Narrow = Mfma16x16x16;  // the narrow regime and the decode kernel
};

// Properties the kernels rely on, checked for the hardware layouts by the layout tests.
// An operand's 4 values of a lane are consecutive along K, so that one 8-byte load fetches them.
template <class Atom>
constexpr bool k_contiguous() {
  for (int l = 0; l < 64; ++l)
    for (int i = 0; i < Atom::kOperand; ++i) {
      const Coord a0 = Atom::a(l, 0), b0 = Atom::b(l, 0);
      if (!(Atom::a(l, i) == Coord{a0.row, a0.col + i}) || !(Atom::b(l, i) == Coord{b0.row + i, b0.col})) return false;
    }
  return true;
}

// The flash regime keeps P^T in registers: accumulator registers 4j..4j+3 of S^T (keys 8j.. of a 32-key tile) are
// exactly the B operand of k-step j of O^T += V^T P^T.
template <class Atom>
constexpr bool acc_feeds_b() {
  for (int l = 0; l < 64; ++l)
    for (int j = 0; j < Atom::kAcc / Atom::kOperand; ++j)
      for (int i = 0; i < Atom::kOperand; ++i) {
        const Coord b = Atom::b(l, i);
        if (!(Atom::acc(l, Atom::kOperand * j + i) == Coord{Atom::K * j + b.row, b.col})) return false;
      }
  return true;
}

// The narrow regime computes S = Q K^T, so its P is the A operand of O = P V: the accumulator registers would have
// to hold the A layout, which they do not (they hold it transposed), hence P's trip through LDS.
template <class Atom>
constexpr bool acc_feeds_a() {
  for (int l = 0; l < 64; ++l)
    for (int j = 0; j < Atom::kAcc / Atom::kOperand; ++j)
      for (int i = 0; i < Atom::kOperand; ++i) {
        const Coord a = Atom::a(l, i);
        if (!(Atom::acc(l, Atom::kOperand * j + i) == Coord{a.row, Atom::K * j + a.col})) return false;
      }
  return true;
}

// The lanes holding one accumulator column (or row, by_row) differ in the lane bits of `mask` only. 32x32 columns
// (one query of S^T) sit in lanes l and l ^ 32: a query's max and sum are one xor-32 shuffle away; 16x16 rows (one
// query row of S) sit in the 16 lanes of lane / 16: reduced by xor 1, 2, 4, 8.
template <class Atom>
constexpr bool acc_lanes_differ_in(bool by_row, int mask) {
  const auto key = [by_row](Coord e) { return by_row ? e.row : e.col; };
  for (int l = 0; l < 64; ++l)
    for (int r = 0; r < Atom::kAcc; ++r)
      for (int l2 = 0; l2 < 64; ++l2)
        for (int r2 = 0; r2 < Atom::kAcc; ++r2)
          if (key(Atom::acc(l, r)) == key(Atom::acc(l2, r2)) && ((l ^ l2) & ~mask) != 0) return false;
  return true;
}

}  // namespace attnbench::hip
