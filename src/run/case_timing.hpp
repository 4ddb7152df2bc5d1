// Timing the kernels of one case side by side: their samples taken in interleaved rounds (measure_rounds), so
// every kernel of a row sees the same clocks, and each row's rates from its declared work.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cases/op_case.hpp"
#include "device/device.hpp"
#include "results/results.hpp"
#include "run/run_options.hpp"

namespace attnbench {

// One kernel's row of a mode, waiting for its time: the row, its device and one complete call.
struct TimedSlot {
  ResultRow* row = nullptr;
  Device* dev = nullptr;
  std::function<void()> call;
  std::function<void()> on_failure;  // called once when its sampler first throws (a worker notes the first)
};

// Times every slot of one mode in o.rounds interleaved rounds: time_us (median of round medians, the rest over
// all samples), rounds, settled; eager with hot L2 also device time (events), interleaved the same way; each
// timed row's sensor readings at the start and end ("clocks") and throttle reasons ("throttled"). A slot
// whose sampler throws becomes an error row naming the failure; the others keep their times.
void time_slots(std::vector<TimedSlot>& slots, Mode m, const RunOptions& o);

// Settles a device's clocks (Device::settle_clocks) before its first timing of a run and again when a timing
// starts more than o.settle_gap_s after the last one ended, so no row is measured on an idle-clocked device.
class ClockDiscipline {
 public:
  explicit ClockDiscipline(const RunOptions& o) : o_(o) {}
  // Before timing on `dev`: the settle's report when one ran, else null.
  nlohmann::json before_timing(Device& dev);
  void after_timing(Device& dev);
  // For the provenance: settles run, their seconds, how many did not reach a steady clock.
  nlohmann::json summary() const;
  // Everything it remembers, so that a worker process can carry it on and hand it back (the steady clock is
  // the machine's, the same in every process).
  nlohmann::json state() const;
  void load(const nlohmann::json& state);

 private:
  const RunOptions& o_;
  std::map<Backend, std::chrono::steady_clock::time_point> last_end_;
  int settles_ = 0, unsteady_ = 0;
  double seconds_ = 0;
};

// The run's clock line: "clocks: N settles (S s, K not steady); T of R timed rows throttled (reasons)"; empty
// when nothing was settled and nothing throttled.
std::string clock_summary_line(const ResultsFile& f);

// --breakdown: device time of each stage run alone (events where the device has them, else wall clock), hot L2,
// for the rows' "breakdown" field; null for kernels without stages.
nlohmann::json time_stages(BoundKernel& bound, Device& dev, const RunOptions& o);

// The rates of a timed row from its declared work and the run's peaks.
void set_rates(ResultRow& r, const RunOptions& o);

}  // namespace attnbench
