// cudnn.sdpa for a caller that knows its params' strides ahead: the kernel plans on them, so supports() asks cuDNN
// about the layout the calls will use and plan() builds that graph (the first call can then be captured).
#pragma once
#include <memory>

#include "attnbench/kernel.hpp"

namespace attnbench {

// cudnn.sdpa planned on `layout`'s strides (Q, O, K/V and the block table's row stride; its pointers unused)
// instead of make_attention_params' dense ones. Params on another layout still get their graph in run().
std::unique_ptr<AttentionKernel> make_cudnn_sdpa_on(const AttentionParams& layout);

}  // namespace attnbench
