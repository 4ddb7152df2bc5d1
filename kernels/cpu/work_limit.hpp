// The CPU backend's one work limit (knob ATTNBENCH_CPU_MAX_GFLOP), shared by every CPU kernel.
#pragma once
#include <cstdio>
#include <string>

#include "attnbench/knobs.hpp"

namespace attnbench::cpu {

// The CPU backend's knobs as typed values; the member default is the knob table's.
struct CpuKnobs {
  int max_gflop = 64;  // ATTNBENCH_CPU_MAX_GFLOP; 0 = no limit
  // The one reader of their strings; KnobValues::resolve has already checked them.
  static CpuKnobs parse(const KnobValues& knobs) { return {knobs.get_int("ATTNBENCH_CPU_MAX_GFLOP")}; }
};

// "" when `flops` fits the limit (0 = no limit), else "needs X GFLOP, above the CPU limit of L GFLOP (knob ...)".
inline std::string over_work_limit(double flops, const CpuKnobs& knobs) {
  const int limit = knobs.max_gflop;
  const double gflop = flops * 1e-9;
  if (limit <= 0 || gflop <= limit) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", gflop);
  return "needs " + std::string(buf) + " GFLOP, above the CPU limit of " + std::to_string(limit) +
         " GFLOP (knob ATTNBENCH_CPU_MAX_GFLOP, 0 = no limit)";
}

// The same from knob strings, for kernels that hold KnobValues.
inline std::string over_work_limit(double flops, const KnobValues& knobs) {
  return over_work_limit(flops, CpuKnobs::parse(knobs));
}

}  // namespace attnbench::cpu
