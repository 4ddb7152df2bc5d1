// Result rows built by hand for tests of what reads them (the control pair, peer ratios, compare).
#pragma once
#include <string>

#include "results/results.hpp"

namespace testrows {

// A row of group "g", op attention, bf16, backend cuda; ok with a median of median_us (every quantile the same,
// n = 20, settled), or another status with no time.
inline attnbench::ResultRow timed_row(const std::string& kernel, const std::string& shape, const std::string& mode,
                                      double median_us, const std::string& status = "ok") {
  attnbench::ResultRow r;
  r.group = "g";
  r.shape = shape;
  r.op = "attention";
  r.dtype = "bf16";
  r.kernel = kernel;
  r.backend = "cuda";
  r.mode = mode;
  r.status = status;
  if (status != "ok" || !(median_us > 0)) return r;
  attnbench::Stats st;
  st.median = st.q1 = st.q3 = st.min = st.mean = median_us;
  st.n = 20;
  r.time_us = st;
  r.settled = true;
  return r;
}

}  // namespace testrows
