// Paged K/V addressing: token tok of a sequence lives in row `offset` of the physical block that entry `page` of
// the sequence's block-table row names; caches are [num_blocks, block_size, kv_heads, head_size] with strides.
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace attnbench::device {

struct PagedPos {
  int page, offset;
};
ATTNBENCH_HD_INLINE PagedPos paged_pos(int tok, int block_size) {
  const int page = tok / block_size;
  return {page, tok - page * block_size};
}

// Element offset of row `offset` of physical block `block` (the caller adds the head's and the dimension's).
ATTNBENCH_HD_INLINE int64_t paged_offset(int32_t block, int offset, int64_t stride_block, int64_t stride_token) {
  return static_cast<int64_t>(block) * stride_block + static_cast<int64_t>(offset) * stride_token;
}

}  // namespace attnbench::device
