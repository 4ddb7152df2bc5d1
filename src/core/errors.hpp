// Errors that mean "bad usage or input" (exit code 2), as opposed to a failed run (exit code 1).
#pragma once
#include <stdexcept>
#include <string>

namespace attnbench {

struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace attnbench
