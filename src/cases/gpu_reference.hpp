// The GPU reference run through a device of the harness: the inputs uploaded, every row computed there, the fp32
// result downloaded, the device buffers released.
#pragma once
#include "cases/bwd_inputs.hpp"
#include "cases/inputs.hpp"
#include "device/device.hpp"

namespace attnbench {

// out: total_q * heads * head_size floats ([total_q, heads, head_size]); lse (null unless wanted): total_q * heads.
// `dev` must be a CUDA device (reference::gpu_reference_built()); throws what the upload or the launch throws.
void reference_on_device(Device& dev, const HostInputs& in, float* out, float* lse);

// The backward's reference on `dev` (a CUDA device): from in's Q, K, V and dO, the fp32 O (o: total_q * heads *
// head_size floats), in.lse and ref's gradients (sized by the caller).
void reference_bwd_on_device(Device& dev, BwdInputs& in, float* o, BwdReference& ref);

}  // namespace attnbench
