// Paged K/V addressing: token tok of a sequence lives in row `offset` of the physical block that entry `page` of
// the sequence's block-table row names; caches are [num_blocks, block_size, kv_heads, head_size] with strides.
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace attnbench::device {

struct PagedPos {
  int page, offset;
};

// tok / block_size by a multiply-high and a shift (the round-up method of Granlund and Montgomery, exact for
// 0 <= tok < 2^31): the kernels split every K/V row's token into page and offset, and a GPU integer division is
// some twenty instructions. Power-of-two block sizes (every serving engine's) take mul = 1, a plain shift.
struct PageDivisor {
  int block_size = 1;
  uint32_t mul = 1, shift = 0;
  PageDivisor() = default;
  ATTNBENCH_HD_INLINE explicit PageDivisor(int bs) : block_size(bs) {
    shift = bs > 1 ? 32u - static_cast<uint32_t>(count_leading_zeros(static_cast<uint32_t>(bs - 1))) : 0u;
    if ((bs & (bs - 1)) != 0)
      mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - static_cast<uint64_t>(bs))) /
                                  static_cast<uint64_t>(bs)) + 1u;
  }
  ATTNBENCH_HD_INLINE int page(int tok) const {
    const uint32_t n = static_cast<uint32_t>(tok);
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(mul, n);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(mul) * n) >> 32);
#endif
    return static_cast<int>((hi + n) >> shift);
  }
  ATTNBENCH_HD_INLINE PagedPos pos(int tok) const {
    const int pg = page(tok);
    return {pg, tok - pg * block_size};
  }
};

// Element offset of row `offset` of physical block `block` (the caller adds the head's and the dimension's). The
// block term is 64-bit (caches pass 2^31 elements); a row's offset inside its page is 32-bit, since a page spans
// fewer than 2^31 elements (page_fits_int32; the kernels check it per call).
ATTNBENCH_HD_INLINE int64_t paged_offset(int32_t block, int offset, int64_t stride_block, int64_t stride_token) {
  return static_cast<int64_t>(block) * stride_block + offset * static_cast<int32_t>(stride_token);
}
// Whether every element of a page (block_size rows, kv_heads heads of head_size) has a 32-bit offset in it.
ATTNBENCH_HD_INLINE bool page_fits_int32(int block_size, int kv_heads, int head_size, int64_t stride_token,
                                         int64_t stride_head) {
  const int64_t last = (block_size - 1) * stride_token + (kv_heads - 1) * stride_head + head_size;
  return stride_token >= 0 && stride_head >= 0 && last < (int64_t{1} << 31);
}

}  // namespace attnbench::device
