// Small wrappers over the Hopper warpgroup MMA PTX (sm_90a) the wide regime uses; each names the PTX it emits.
// Register and shared-memory layouts: the PTX ISA's wgmma sections (operand fragments, matrix descriptors).
#pragma once
#include <cstdint>

#include "attnbench/dtype.hpp"

namespace attnbench::cuda::dev {

// wgmma.fence.sync.aligned: orders register accesses to accumulators / A fragments before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// wgmma.commit_group.sync.aligned: every uncommitted wgmma of this warpgroup becomes one group.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// wgmma.wait_group.sync.aligned N: at most N of the most recent groups still pending.
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Compiler-only register fence (empty asm, "+f"/"+r"): keeps nvcc from moving accesses to wgmma fragment registers
// across the async window (CUTLASS warpgroup_fence_operand).
template <int R, int C> __device__ __forceinline__ void fence_regs(float (&x)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+f"(x[i][j])::"memory");
}
template <int R, int C> __device__ __forceinline__ void fence_regs(uint32_t (&x)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+r"(x[i][j])::"memory");
}

// 64-bit wgmma shared-memory matrix descriptor, 128-byte swizzle (layout type 1 at bits 62-63), base offset 0
// (tiles start on 1024-byte boundaries): start address >> 4 at bits 0-13, LBO >> 4 at 16-29, SBO >> 4 at 32-45.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
         (static_cast<uint64_t>(sbo_bytes >> 4) << 32) | (1ull << 62);
}

// The same descriptor as a compile-time high word (SBO, swizzle mode) and a 32-bit low word (start address, LBO):
// the descriptor of the tile at byte offset `off` is one 32-bit add, for the k-steps of a GEMM (the start field
// holds a shared-memory address >> 4, below 2^14, so the add never carries into LBO). MODE: the layout type, 1 for
// the 128-byte swizzle (rows of 128 bytes, 8-row atoms of 1024), 2 for the 64-byte one (rows of 64, atoms of 512).
template <uint32_t SBO, uint32_t MODE>
struct SwDesc {
  uint32_t lo;
  __device__ __forceinline__ SwDesc(uint32_t addr, uint32_t lbo_bytes)
      : lo(((addr & 0x3FFFF) >> 4) | ((lbo_bytes >> 4) << 16)) {}
  __device__ __forceinline__ uint64_t at(uint32_t off_bytes) const {
    return (static_cast<uint64_t>((SBO >> 4) | (MODE << 30)) << 32) | (lo + (off_bytes >> 4));
  }
};
template <uint32_t SBO = 1024>
using Sw128Desc = SwDesc<SBO, 1>;
using Sw64Desc = SwDesc<512, 2>;

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16}, N = 64 | 128 | 256, as PTX text: the
// accumulator is operands %0..%(N/2 - 1); scale-d is the predicate set from the last operand.
// SS: A and B from shared memory (descriptors), both K-major (imm-trans-a = imm-trans-b = 0).
// RS: A = 4 registers of 16-bit pairs, K-major; B from shared memory MN-major (imm-trans-b = 1).
#define ATTNBENCH_WGMMA_SS_N64(T) "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n" "}\n"
#define ATTNBENCH_WGMMA_RS_N64(T) "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n" "}\n"
#define ATTNBENCH_WGMMA_SS_N128(T) "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" "wgmma.mma_async.sync.aligned.m64n128k16.f32." T "." T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n" "}\n"
#define ATTNBENCH_WGMMA_RS_N128(T) "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" "wgmma.mma_async.sync.aligned.m64n128k16.f32." T "." T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n" "}\n"
#define ATTNBENCH_WGMMA_SS_N256(T) "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" "wgmma.mma_async.sync.aligned.m64n256k16.f32." T "." T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 0;\n" "}\n"
#define ATTNBENCH_WGMMA_RS_N256(T) "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n" "wgmma.mma_async.sync.aligned.m64n256k16.f32." T "." T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n" "}\n"

// SS with both operands MN-major (imm-trans-a = imm-trans-b = 1): A stored [k][m], B [k][n], m and n contiguous.
#define ATTNBENCH_WGMMA_SST_N64(T) "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 1, 1;\n" "}\n"

// SS with 8-bit codes (e4m3 / e5m2), k32: no transpose operands (8-bit operands are K-major only).
#define ATTNBENCH_WGMMA_SS8_N64(TA, TB) "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" "wgmma.mma_async.sync.aligned.m64n64k32.f32." TA "." TB " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n" "}\n"
#define ATTNBENCH_WGMMA_SS8_N128(TA, TB) "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" "wgmma.mma_async.sync.aligned.m64n128k32.f32." TA "." TB " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1;\n" "}\n"
#define ATTNBENCH_WGMMA_RS8_N128(TA, TB) "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" "wgmma.mma_async.sync.aligned.m64n128k32.f32." TA "." TB " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1;\n" "}\n"

#define ATTNBENCH_WGMMA_RS8_N256(TA, TB) "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n" "wgmma.mma_async.sync.aligned.m64n256k32.f32." TA "." TB " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1;\n" "}\n"

// The accumulator operand lists: d[j][e] for j < N/8.
#define ATTNBENCH_WGMMA_D4(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define ATTNBENCH_WGMMA_D32(i)                                                                              \
  ATTNBENCH_WGMMA_D4(i), ATTNBENCH_WGMMA_D4(i + 1), ATTNBENCH_WGMMA_D4(i + 2), ATTNBENCH_WGMMA_D4(i + 3), \
      ATTNBENCH_WGMMA_D4(i + 4), ATTNBENCH_WGMMA_D4(i + 5), ATTNBENCH_WGMMA_D4(i + 6), ATTNBENCH_WGMMA_D4(i + 7)
#define ATTNBENCH_WGMMA_OUT_N64 ATTNBENCH_WGMMA_D32(0)
#define ATTNBENCH_WGMMA_OUT_N128 ATTNBENCH_WGMMA_D32(0), ATTNBENCH_WGMMA_D32(8)
#define ATTNBENCH_WGMMA_OUT_N256 \
  ATTNBENCH_WGMMA_D32(0), ATTNBENCH_WGMMA_D32(8), ATTNBENCH_WGMMA_D32(16), ATTNBENCH_WGMMA_D32(24)
#define ATTNBENCH_WGMMA_CALL(MODE, N, T, ...) asm volatile(ATTNBENCH_WGMMA_##MODE##_N##N(T) : ATTNBENCH_WGMMA_OUT_N##N : __VA_ARGS__)
#define ATTNBENCH_WGMMA_DISPATCH(MODE, ...)                                            \
  do {                                                                               \
    constexpr bool kBf16 = DT == DType::bf16;                                        \
    if constexpr (N == 64) {                                                         \
      if constexpr (kBf16) ATTNBENCH_WGMMA_CALL(MODE, 64, "bf16", __VA_ARGS__);       \
      else ATTNBENCH_WGMMA_CALL(MODE, 64, "f16", __VA_ARGS__);                        \
    } else if constexpr (N == 128) {                                                 \
      if constexpr (kBf16) ATTNBENCH_WGMMA_CALL(MODE, 128, "bf16", __VA_ARGS__);      \
      else ATTNBENCH_WGMMA_CALL(MODE, 128, "f16", __VA_ARGS__);                       \
    } else {                                                                         \
      if constexpr (kBf16) ATTNBENCH_WGMMA_CALL(MODE, 256, "bf16", __VA_ARGS__);      \
      else ATTNBENCH_WGMMA_CALL(MODE, 256, "f16", __VA_ARGS__);                       \
    }                                                                                \
  } while (0)

// SS wgmma: d = (accumulate ? d : 0) + A(64x16) * B(16xN). d[j][e]: row 16 warp + lane/4 + 8 (e/2),
// col 8 j + 2 (lane%4) + e%2.
template <DType DT, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma N: 64, 128 or 256");
  ATTNBENCH_WGMMA_DISPATCH(SS, "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// SS wgmma, A (64x16) and B (16x64) both MN-major in shared memory (the backward's dQ = dS K: dS^T and K as
// stored); d's layout is wgmma_ss's.
template <DType DT>
__device__ __forceinline__ void wgmma_ss_mn(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  if constexpr (DT == DType::bf16)
    asm volatile(ATTNBENCH_WGMMA_SST_N64("bf16") : ATTNBENCH_WGMMA_OUT_N64 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  else
    asm volatile(ATTNBENCH_WGMMA_SST_N64("f16") : ATTNBENCH_WGMMA_OUT_N64 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// SS wgmma of 8-bit codes of KT (e4m3 or e5m2, both operands): d = (accumulate ? d : 0) + A(64x32) * B(32xN),
// both K-major (32 codes = the 32 bytes a 16-bit k16 step reads); d's layout is wgmma_ss's.
template <DType KT, int N>
__device__ __forceinline__ void wgmma_ss8(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128, "8-bit SS wgmma: N = 128 (the d128 key tile) or 64 (d256's)");
  static_assert(KT == DType::e4m3 || KT == DType::e5m2, "8-bit wgmma: e4m3 or e5m2 codes");
  if constexpr (N == 64) {
    if constexpr (KT == DType::e4m3)
      asm volatile(ATTNBENCH_WGMMA_SS8_N64("e4m3", "e4m3") : ATTNBENCH_WGMMA_OUT_N64 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
    else
      asm volatile(ATTNBENCH_WGMMA_SS8_N64("e5m2", "e5m2") : ATTNBENCH_WGMMA_OUT_N64 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else if constexpr (KT == DType::e4m3) {
    asm volatile(ATTNBENCH_WGMMA_SS8_N128("e4m3", "e4m3") : ATTNBENCH_WGMMA_OUT_N128 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else {
    asm volatile(ATTNBENCH_WGMMA_SS8_N128("e5m2", "e5m2") : ATTNBENCH_WGMMA_OUT_N128 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
}

// Four floats -> four e4m3 codes (RNE, saturating), x0 in the lowest byte: one register of an 8-bit A fragment.
__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\ncvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\ncvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
  return r;
}

// RS wgmma of an e4m3 A (registers: rows lane/4 and +8, k 4 (lane%4) .. +3 and +16, the lowest k in the lowest
// byte) and a K-major B of KT codes: d = (accumulate ? d : 0) + A(64x32) * B(32xN).
template <DType KT, int N>
__device__ __forceinline__ void wgmma_rs8(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b,
                                          int accumulate) {
  static_assert(N == 128 || N == 256, "8-bit RS wgmma: N = the head size, 128 or 256");
  static_assert(KT == DType::e4m3 || KT == DType::e5m2, "8-bit wgmma: e4m3 or e5m2 codes");
  if constexpr (N == 256) {
    if constexpr (KT == DType::e4m3)
      asm volatile(ATTNBENCH_WGMMA_RS8_N256("e4m3", "e4m3") : ATTNBENCH_WGMMA_OUT_N256
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
    else
      asm volatile(ATTNBENCH_WGMMA_RS8_N256("e4m3", "e5m2") : ATTNBENCH_WGMMA_OUT_N256
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else if constexpr (KT == DType::e4m3) {
    asm volatile(ATTNBENCH_WGMMA_RS8_N128("e4m3", "e4m3") : ATTNBENCH_WGMMA_OUT_N128
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else {
    asm volatile(ATTNBENCH_WGMMA_RS8_N128("e4m3", "e5m2") : ATTNBENCH_WGMMA_OUT_N128
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  }
}

// RS wgmma: d = (accumulate ? d : 0) + A(64x16, registers) * B(16xN, MN-major in shared memory). a[0..3]: the
// m16n8k16 A fragment of this warp's 16 rows (rows lane/4 and +8, k 2 (lane%4) and +8).
template <DType DT, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b,
                                         int accumulate) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma N: 64, 128 or 256");
  ATTNBENCH_WGMMA_DISPATCH(RS, "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

}  // namespace attnbench::cuda::dev

#undef ATTNBENCH_WGMMA_DISPATCH
#undef ATTNBENCH_WGMMA_CALL
#undef ATTNBENCH_WGMMA_OUT_N256
#undef ATTNBENCH_WGMMA_OUT_N128
#undef ATTNBENCH_WGMMA_OUT_N64
#undef ATTNBENCH_WGMMA_D32
#undef ATTNBENCH_WGMMA_D4
#undef ATTNBENCH_WGMMA_RS_N256
#undef ATTNBENCH_WGMMA_SS_N256
#undef ATTNBENCH_WGMMA_RS_N128
#undef ATTNBENCH_WGMMA_SS_N128
#undef ATTNBENCH_WGMMA_RS_N64
#undef ATTNBENCH_WGMMA_SS8_N128
#undef ATTNBENCH_WGMMA_SS8_N64
#undef ATTNBENCH_WGMMA_RS8_N256
#undef ATTNBENCH_WGMMA_RS8_N128
#undef ATTNBENCH_WGMMA_SS_N64
#undef ATTNBENCH_WGMMA_SST_N64
