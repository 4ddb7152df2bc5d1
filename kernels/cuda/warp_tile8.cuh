// One warp's share of flash attention over an 8-bit K/V tile (e4m3 or e5m2 codes) in shared memory, widened in
// registers: ldmatrix moves the codes as b16 pairs, one cvt turns two codes into an f16x2 register, and the mma runs
// in fp16 (every e4m3 and e5m2 value is exact in fp16; the probabilities P gain three bits over bf16). Q's fp16
// fragments are laid out in the order the K fragments arrive: within each 16-wide k-step, mma index k = 2c + {0, 1} and
// 2c + 8 + {0, 1} of quad lane c read head dims 4c + {0..3}, the four codes one ldmatrix lane receives. The dot
// product is a sum, so the permutation changes nothing but the order of the adds. V's fragments come from
// ldmatrix.trans of the code pairs: one register holds two keys x two adjacent dims, split by a byte permute into
// the even dim's and the odd dim's B fragments, so the n8 tiles of O cover interleaved columns (o_col8).
#pragma once
#include <cstdint>

#include "cuda/feature_tile.cuh"
#include "cuda/mma_sm80.cuh"

namespace attnbench::cuda::dev {

// fp32 -> fp16 within its finite range: a bf16 Q beyond 65504 saturates rather than turning the scores into NaN.
__device__ __forceinline__ float f16_saturate(float x) {
  constexpr float kMax = 65504.f;
  return isnan(x) ? x : fminf(fmaxf(x, -kMax), kMax);  // fminf/fmaxf would turn a NaN into -65504
}
__device__ __forceinline__ uint32_t pack2_f16_sat(float lo, float hi) {
  return pack2<DType::f16>(f16_saturate(lo), f16_saturate(hi));
}

// Q fragments (A operand, rows [row0, row0 + 16) x D of the swizzled DT tile at sq) in fp16, k permuted as above.
template <DType DT, int D>
__device__ __forceinline__ void load_q_frags8(uint32_t (&qf)[D / 16][4], uint32_t sq, int row0, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int chunk = 2 * ks + c / 2, byte = 8 * (c % 2);  // dims ks*16 + 4c .. +3
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows g, g + 8
      const uint2 v = ld_shared_v2(sq + swz<D>(row0 + g + 8 * h, chunk) + byte);
      if constexpr (DT == DType::f16) {
        qf[ks][h] = v.x, qf[ks][h + 2] = v.y;
      } else {
        const float2 lo = unpack2<DT>(v.x), hi = unpack2<DT>(v.y);
        qf[ks][h] = pack2_f16_sat(lo.x, lo.y);
        qf[ks][h + 2] = pack2_f16_sat(hi.x, hi.y);
      }
    }
  }
}

// An 8-bit Q's codes, plain [BM][D] rows in the upper half of the 16-bit Q tile at sq (load_q_codes) -> fp16 values
// in the tile's swizzled layout (exact), by NT threads; every thread reads its codes before any writes.
template <DType KV, int D, int BM, int NT>
__device__ __forceinline__ void widen_q_codes(uint32_t sq) {
  constexpr int kChunks = BM * D / 16;
  static_assert(kChunks <= NT, "one 16-code chunk per thread");
  const int i = threadIdx.x, row = i / (D / 16), ch = i % (D / 16);
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (i < kChunks) v = ld_shared_v4(sq + BM * D + row * D + ch * 16);
  __syncthreads();
  if (i < kChunks) {
    uint4 lo, hi;
    widen16<DType::f16, KV>(v, lo, hi);
    st_shared_v4(sq + swz<D>(row, 2 * ch), lo);
    st_shared_v4(sq + swz<D>(row, 2 * ch + 1), hi);
  }
  __syncthreads();
}

// The Q fragments as an image in shared memory at sqf, [k-step][lane] x 16 bytes (32 D bytes, the size of a 16 x D
// 16-bit tile): a lane's four registers of a k-step come back in one conflict-free 16-byte load, so they need not
// stay in registers across the KV loop.
template <int D>
__device__ __forceinline__ void store_q_frags8(uint32_t sqf, const uint32_t (&qf)[D / 16][4], int lane) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    st_shared_v4(sqf + (ks * 32 + lane) * 16, make_uint4(qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3]));
}
__device__ __forceinline__ void load_q_frag8(uint32_t (&a)[4], uint32_t sqf, int ks, int lane) {
  const uint4 v = ld_shared_v4(sqf + (ks * 32 + lane) * 16);
  a[0] = v.x, a[1] = v.y, a[2] = v.z, a[3] = v.w;
}

// s[NT8][4] = Q (fp16 fragments, the store_q_frags8 image at sqf) * K^T for keys [krow0, krow0 + 8 * NT8) of the
// 8-bit K tile (swz8). One ldmatrix.x4 (two key octets x two k-steps) feeds four mma. The next k-step pair's
// fragments (K and Q) are loaded before the current pair's mma (the asm keeps program order, so the load's latency
// would otherwise sit on the chain), and the mma walk every accumulator before returning to one.
template <DType KV, int D, int NT8>
__device__ __forceinline__ void qk_tile8(float (&s)[NT8][4], uint32_t sqf, uint32_t sk, int krow0, int lane) {
  static_assert(NT8 % 2 == 0 && D % 32 == 0, "keys come in pairs of n8 tiles, k-steps in pairs");
  constexpr int NP = NT8 / 2, KP = D / 32;  // key pairs of octets; k-step pairs
#pragma unroll
  for (int n = 0; n < NT8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
  const int m = lane / 8;  // the matrix this lane addresses: key octet m % 2, k-step m / 2 of the pair
  auto load = [&](uint32_t (&b)[NP][4], int kp) {  // [np][key octet 0, 1 of k-step 2 kp, then of 2 kp + 1]
#pragma unroll
    for (int np = 0; np < NP; ++np)
      ldmatrix_x4(b[np], sk + swz8<D>(krow0 + np * 16 + (m % 2) * 8 + lane % 8, 2 * kp + m / 2));
  };
  uint32_t b[2][NP][4], a[2][2][4];
  load(b[0], 0);
  load_q_frag8(a[0][0], sqf, 0, lane);
  load_q_frag8(a[0][1], sqf, 1, lane);
#pragma unroll
  for (int kp = 0; kp < KP; ++kp) {
    if (kp + 1 < KP) {
      load(b[(kp + 1) % 2], kp + 1);
      load_q_frag8(a[(kp + 1) % 2][0], sqf, 2 * kp + 2, lane);
      load_q_frag8(a[(kp + 1) % 2][1], sqf, 2 * kp + 3, lane);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int np = 0; np < NP; ++np)
#pragma unroll
        for (int oct = 0; oct < 2; ++oct) {
          const uint32_t r = b[kp % 2][np][2 * h + oct];
          mma_16816<DType::f16>(s[2 * np + oct], a[kp % 2][h], widen2<DType::f16, KV>(r),
                                widen2<DType::f16, KV>(r >> 16));
        }
  }
}

// o (16 x DS, columns by o_col8) += P (16 x 8*NT8 probabilities, rounded to fp16) * V for keys [vrow0, vrow0 + 8 *
// NT8) and dims [16 c16, 16 c16 + DS) of the 8-bit V tile (swz8). One ldmatrix.x4.trans (two key octets x two
// 16-dim chunks) feeds four mma: per chunk, the even dims' n8 tile and the odd dims'. Loads run one step ahead, as
// in qk_tile8.
template <DType KV, int D, int NT8, int DS = D>
__device__ __forceinline__ void pv_tile8(float (&o)[DS / 8][4], const float (&s)[NT8][4], uint32_t sv, int vrow0,
                                         int lane, int c16 = 0) {
  static_assert(DS % 32 == 0, "dims come in pairs of 16-dim chunks");
  constexpr int CP = DS / 32, STEPS = NT8 / 2 * CP;  // chunk pairs; (k-step, chunk pair) steps
  const int m = lane / 8;  // key octet m % 2, chunk m / 2 of the pair
  // Bytes of a register: (key 2j, dim 2n), (2j, 2n + 1), (2j + 1, 2n), (2j + 1, 2n + 1).
  auto load = [&](uint32_t (&b)[4], int step) {
    const int kk = step / CP, cp = step % CP;
    ldmatrix_x4_trans(b, sv + swz8<D>(vrow0 + kk * 16 + (m % 2) * 8 + lane % 8, c16 + 2 * cp + m / 2));
  };
  uint32_t b[2][4];
  load(b[0], 0);
#pragma unroll
  for (int step = 0; step < STEPS; ++step) {
    if (step + 1 < STEPS) load(b[(step + 1) % 2], step + 1);
    const int kk = step / CP, cp = step % CP;
    const uint32_t a[4] = {pack2<DType::f16>(s[2 * kk][0], s[2 * kk][1]),
                           pack2<DType::f16>(s[2 * kk][2], s[2 * kk][3]),
                           pack2<DType::f16>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack2<DType::f16>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int h = 0; h < 2; ++h) {    // chunk 2 cp + h
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) {
        const uint32_t sel = odd ? 0x3131u : 0x2020u;  // the even (odd) dim's two keys into the low half
        const uint32_t* r = b[step % 2];
        mma_16816<DType::f16>(o[2 * (2 * cp + h) + odd], a, widen2<DType::f16, KV>(__byte_perm(r[2 * h], 0, sel)),
                              widen2<DType::f16, KV>(__byte_perm(r[2 * h + 1], 0, sel)));
      }
    }
  }
}

// The column (within the DS columns pv_tile8 covers) of accumulator element e of n8 tile j: chunk j / 2, even
// (odd) dims for j % 2 = 0 (1), quad lane c holding dims 4c + 2 (e % 2) + j % 2.
__device__ __forceinline__ int o_col8(int j, int e, int lane) {
  return 16 * (j / 2) + 4 * (lane % 4) + 2 * (e % 2) + j % 2;
}

}  // namespace attnbench::cuda::dev
