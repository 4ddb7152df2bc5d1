// The explicit table of kernels (no self-registration).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/kernel.hpp"
#include "shapes.hpp"

namespace attnbench {

struct KernelEntry {
  Op op;
  std::shared_ptr<const AttentionKernel> attention;  // op == attention
  std::string name;
  Backend backend;
  std::string description;
  std::shared_ptr<const GatedBlockKernel> gated = nullptr;  // op == gated_block
};

const std::vector<KernelEntry>& kernel_registry();

// Shell-style glob with '*' and '?' (e.g. "cuda.*").
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace attnbench
