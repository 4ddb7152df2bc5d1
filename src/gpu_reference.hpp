// The GPU reference run through a device of the harness: the inputs uploaded, every row computed there, the fp32
// result downloaded, the device buffers released.
#pragma once
#include "device.hpp"
#include "inputs.hpp"

namespace attnbench {

// out: total_q * heads * head_size floats ([total_q, heads, head_size]); lse (null unless wanted): total_q * heads.
// `dev` must be a CUDA device (reference::gpu_reference_built()); throws what the upload or the launch throws.
void reference_on_device(Device& dev, const HostInputs& in, float* out, float* lse);

}  // namespace attnbench
