// The gated block, written once over a backend's GatedProvider: the declines (common, the provider's, the SDPA's
// mapped to the fusion that causes them), the params check, the workspace tables, the stages and their names,
// the summary and the SDPA's params. A backend's make_*_gated_block() is this over its provider.
#pragma once
#include <memory>

#include "attnbench/gated_block.hpp"
#include "gated_provider.hpp"

namespace attnbench {

// The kernel named provider->name(); it and every block it creates share the provider. A provider that does not
// fuse (fuses() false) gets every request with fuse_gate and fuse_norm_rope cleared.
std::unique_ptr<GatedBlockKernel> make_gated_block_kernel(std::shared_ptr<const GatedProvider> provider);

}  // namespace attnbench
