// The CPU backend's one work limit (knob ATTNBENCH_CPU_MAX_GFLOP), shared by every CPU kernel.
#pragma once
#include <cstdio>
#include <string>

#include "attnbench/knobs.hpp"

namespace attnbench::cpu {

// "" when `flops` fits the limit (0 = no limit), else "needs X GFLOP, above the CPU limit of L GFLOP (knob ...)".
inline std::string over_work_limit(double flops, const KnobValues& knobs) {
  const int limit = knobs.get_int("ATTNBENCH_CPU_MAX_GFLOP");
  const double gflop = flops * 1e-9;
  if (limit <= 0 || gflop <= limit) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", gflop);
  return "needs " + std::string(buf) + " GFLOP, above the CPU limit of " + std::to_string(limit) +
         " GFLOP (knob ATTNBENCH_CPU_MAX_GFLOP, 0 = no limit)";
}

}  // namespace attnbench::cpu
