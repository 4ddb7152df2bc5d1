// Paged K/V addressing: token tok of a sequence lives in row `offset` of the physical block that entry `page` of
// the sequence's block-table row names; caches are [num_blocks, block_size, kv_heads, head_size] with strides.
#pragma once

#include <cstdint>

#include "fast_div.hpp"
#include "host_device.hpp"

namespace attnbench::device {

struct PagedPos {
  int page, offset;
};

// tok / block_size (FastDiv): the kernels split every K/V row's token into page and offset.
struct PageDivisor {
  int block_size = 1;
  FastDiv div;
  PageDivisor() = default;
  ATTNBENCH_HD_INLINE explicit PageDivisor(int bs) : block_size(bs), div(bs) {}
  ATTNBENCH_HD_INLINE int page(int tok) const { return div.div(tok); }
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
// Entries before sequence seq's block-table row. Both factors are non-negative ints: the product widens unsigned, so
// no sign word is held (the 24-register producer warp of the wide kernel has no register for it).
ATTNBENCH_HD_INLINE uint64_t block_table_row_offset(int seq, int stride) {
  return static_cast<uint64_t>(static_cast<uint32_t>(seq)) * static_cast<uint32_t>(stride);
}
// Whether every element of a page (block_size rows, kv_heads heads of head_size) has a 32-bit offset in it.
ATTNBENCH_HD_INLINE bool page_fits_int32(int block_size, int kv_heads, int head_size, int64_t stride_token,
                                         int64_t stride_head) {
  const int64_t last = (block_size - 1) * stride_token + (kv_heads - 1) * stride_head + head_size;
  return stride_token >= 0 && stride_head >= 0 && last < (int64_t{1} << 31);
}

}  // namespace attnbench::device
