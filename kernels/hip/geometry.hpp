// hip.unified's tile geometry and LDS budget, constexpr so that the device kernels (their static LDS arrays), the
// host plan, the CPU emulator and the resource test read one definition. Every regime streams K/V in tiles of
// kBlockN keys gathered through the block table; rows are packed (token, query head of one KV group), so a
// workgroup reads each K/V byte once for the whole group.
#pragma once
#include <cstdint>

namespace attnbench::hip {

constexpr int kWaveSize = 64;
constexpr int kBlockN = 64;           // keys per K/V tile
constexpr int kPad = 8;               // halves added to each LDS row (16 bytes), so rows start on other banks
constexpr int kLdsLimit = 64 * 1024;  // LDS per workgroup on gfx90a and gfx942
constexpr int kHalf = 2;              // bytes of a 16-bit element

constexpr int cmax(int a, int b) { return a < b ? b : a; }

// Flash regime (transposed x8, fp16): S^T = K Q^T with mfma 32x32x8, 32 queries per wave. Geometries:
// wide4 (4 waves), wide2 (2) and L4 (1). K is double-buffered only where the waves' rows outnumber the tile's keys
// (num_waves * 32 > kBlockN, wide4): with fewer rows per tile a second K buffer has too little compute to hide.
// The output tile is staged in LDS for coalesced stores, aliased into the K/V region (dead after the last tile).
constexpr int kFlashRowsPerWave = 32;
constexpr int flash_block_m(int waves) { return kFlashRowsPerWave * waves; }
constexpr int flash_k_buffers(int waves) { return flash_block_m(waves) <= kBlockN ? 1 : 2; }
constexpr int flash_k_bytes(int d, int waves) { return flash_k_buffers(waves) * kBlockN * (d + kPad) * kHalf; }
constexpr int vt_bytes(int d) { return d * (kBlockN + kPad) * kHalf; }  // V^T [d][key], every regime
constexpr int flash_o_bytes(int d, int waves) { return flash_block_m(waves) * (d + kPad) * kHalf; }
constexpr int flash_lds_bytes(int d, int waves) {
  return cmax(flash_k_bytes(d, waves) + vt_bytes(d), flash_o_bytes(d, waves));
}

// Narrow regime (mfma 16x16x16, fp16 and bf16): 32 rows per wave (two 16-row tiles); P goes through a per-wave
// LDS tile to become the A operand of P V (the accumulator and A layouts differ). d64 runs 4 waves, d128 2.
constexpr int kNarrowRowsPerWave = 32;
constexpr int narrow_waves(int d) { return d == 64 ? 4 : 2; }
constexpr int narrow_block_m(int waves) { return kNarrowRowsPerWave * waves; }
constexpr int k_tile_bytes(int d) { return kBlockN * (d + kPad) * kHalf; }
constexpr int p_tile_bytes(int rows, int keys) { return rows * (keys + kPad) * kHalf; }
constexpr int narrow_lds_bytes(int d, int waves) {
  return k_tile_bytes(d) + vt_bytes(d) + waves * p_tile_bytes(kNarrowRowsPerWave, kBlockN);
}

// 3D split-KV decode: 16 packed rows per workgroup, 4 waves each taking 16 keys of a tile; the waves' softmax
// states merge through LDS (fp32 O rows, aliased into the K/V region) before the split's output or partial.
constexpr int kDecodeRows = 16;
constexpr int kDecodeWaves = 4;
constexpr int kDecodeKeysPerWave = kBlockN / kDecodeWaves;
constexpr int decode_merge_pitch(int d) { return d + 4; }  // floats
constexpr int decode_merge_bytes(int d) {
  return kDecodeWaves * kDecodeRows * (decode_merge_pitch(d) + 2) * 4;  // O rows, then m and l per row
}
constexpr int decode_lds_bytes(int d) {
  return cmax(k_tile_bytes(d) + vt_bytes(d) + kDecodeWaves * p_tile_bytes(kDecodeRows, kDecodeKeysPerWave),
              decode_merge_bytes(d));
}
// Workspace of splits > 1: lse[splits][rows_total] padded to 4 floats (the partials after it stay 16-byte
// aligned), then o[splits][rows_total][d], fp32.
constexpr int64_t decode_lse_floats(int64_t splits, int64_t rows_total) { return (splits * rows_total + 3) / 4 * 4; }
// The split combine: D / 8 threads per row, 8 columns each.
constexpr int kCombineThreads = 256;
constexpr int combine_rows_per_block(int d) { return kCombineThreads / (d / 8); }

// Registers (32-bit, per lane) each kernel keeps live across its K/V loop: Q fragments, O and S accumulators, and
// the P fragments (flash) or the row max/sum (narrow, decode). A floor of what the compiler reports; the budget is
// the 512 a wave64 lane has on gfx90a/gfx942 (256 VGPRs + 256 AGPRs at one wave per SIMD).
constexpr int kRegisterBudget = 512;
constexpr int flash_live_registers(int d) { return d / 4 + d / 2 + (kBlockN / 32) * 16 + (kBlockN / 8) * 2; }
constexpr int narrow_live_registers(int d) {
  return 2 * (d / 16) * 2 + 2 * (d / 16) * 4 + 2 * (kBlockN / 16) * 4 + 2 * 2 * 4;
}
constexpr int decode_live_registers(int d) { return (d / 16) * 2 + (d / 16) * 4 + 4 + 2 * 4; }

// What a model that adds every tile a prefill kernel touches counts (Q, the K buffers, V, O), aliasing none: for
// the flash regime it over-counts (wide4 d128: 118 KB against the 52 KB the kernel declares), which is why the
// flash regime has its own model above.
constexpr int generic_lds_bytes(int d, int block_m, int k_buffers) {
  return block_m * d * kHalf + k_buffers * k_tile_bytes(d) + vt_bytes(d) + block_m * (d + kPad) * kHalf;
}

}  // namespace attnbench::hip
