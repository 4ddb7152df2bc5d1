// Timing the kernels of one case side by side: their samples taken in interleaved rounds (measure_rounds), so
// every kernel of a row sees the same clocks, and each row's rates from its declared work.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "device.hpp"
#include "op_case.hpp"
#include "results.hpp"
#include "runner.hpp"

namespace attnbench {

// One kernel's row of a mode, waiting for its time: the row, its device and one complete call.
struct TimedSlot {
  ResultRow* row = nullptr;
  Device* dev = nullptr;
  std::function<void()> call;
};

// Times every slot of one mode in o.rounds interleaved rounds: time_us (median of round medians, the rest over
// all samples), rounds, settled; eager with hot L2 also device time (events), interleaved the same way. A slot
// whose sampler throws becomes an error row naming the failure; the others keep their times.
void time_slots(std::vector<TimedSlot>& slots, Mode m, const RunOptions& o);

// --breakdown: device time of each stage run alone (events where the device has them, else wall clock), hot L2,
// for the rows' "breakdown" field; null for kernels without stages.
nlohmann::json time_stages(BoundKernel& bound, Device& dev, const RunOptions& o);

// The rates of a timed row from its declared work and the run's peaks.
void set_rates(ResultRow& r, const RunOptions& o);

}  // namespace attnbench
