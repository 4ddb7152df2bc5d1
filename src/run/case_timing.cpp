#include "run/case_timing.hpp"

#include <memory>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>

#include "run/interrupt.hpp"

namespace attnbench {

namespace {

std::vector<double> to_us(std::vector<double> s) {
  for (auto& x : s) x *= 1e6;
  return s;
}

// A sampler that turns its first exception into a recorded failure and then returns at once, so the rounds of
// the other kernels go on.
struct Guarded {
  Sampler inner;
  std::shared_ptr<std::string> failure = std::make_shared<std::string>();
  std::function<void()> on_failure;
  void fail(const std::string& what) const {
    *failure = what.empty() ? "failed" : what;
    if (on_failure) on_failure();
  }
  double operator()() const {
    if (!failure->empty()) return 0.0;
    check_interrupt();  // a stop asked for by a signal ends the measurement here (RunInterrupted)
    try {
      return inner();
    } catch (const std::exception& e) {
      fail(e.what());
      return 0.0;
    }
  }
};

// A rounded measurement in seconds, converted to microseconds.
RoundedMeasurement in_us(RoundedMeasurement m) {
  m.samples = to_us(std::move(m.samples));
  m.round_medians = to_us(std::move(m.round_medians));
  m.median *= 1e6;
  return m;
}

RoundsInfo rounds_info(const RoundedMeasurement& m) {
  RoundsInfo r;
  r.count = static_cast<int>(m.round_medians.size());
  r.medians_us = m.round_medians;
  r.spread = m.spread;
  return r;
}

// Samples taken and dropped, the samplers in turn, for `seconds`: a heavy workload reaches the power limit it
// will hold within a fraction of a second, and without this the first rounds would run above it.
void warm_up(const std::vector<Sampler>& samplers, double seconds) {
  if (samplers.empty() || !(seconds > 0)) return;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds)
    for (const Sampler& s : samplers) s();
}

// The measurement of `make(slot)` for every slot that has one, in rounds, after the warm-up when `warm`; `store`
// takes each result.
void rounds_over(std::vector<TimedSlot>& slots, const RunOptions& o, bool warm,
                 const std::function<Sampler(TimedSlot&)>& make,
                 const std::function<void(TimedSlot&, const RoundedMeasurement&, const std::string&)>& store) {
  std::vector<Guarded> guards;
  std::vector<TimedSlot*> who;
  for (auto& s : slots) {
    if (s.row->status != "ok") continue;
    Guarded g;
    g.on_failure = s.on_failure;
    try {
      g.inner = make(s);
    } catch (const std::exception& e) {
      g.fail(e.what());
    }
    if (!g.inner && g.failure->empty()) continue;
    guards.push_back(g);
    who.push_back(&s);
  }
  std::vector<Sampler> samplers(guards.begin(), guards.end());
  const bool gpu = std::any_of(who.begin(), who.end(), [](const TimedSlot* s) { return is_gpu(s->dev->backend()); });
  if (warm) warm_up(samplers, o.warmup_s.value_or(gpu ? kGpuWarmupS : 0.0));
  const auto results = measure_rounds(samplers, o.stop, o.rounds);
  for (std::size_t i = 0; i < who.size(); ++i) store(*who[i], results[i], *guards[i].failure);
}

using Readings = std::map<Device*, std::optional<gpu::SensorReadings>>;

Readings read_devices(const std::vector<TimedSlot>& slots) {
  Readings r;
  for (const auto& s : slots)
    if (!r.count(s.dev)) r[s.dev] = s.dev->read_sensors();
  return r;
}

// Each timed row's clocks {start, end} and throttle reasons; a GPU without sensors says why.
void record_clocks(std::vector<TimedSlot>& slots, const Readings& start, const Readings& end) {
  for (auto& s : slots) {
    ResultRow& row = *s.row;
    if (!row.time_us) continue;
    const auto& a = start.at(s.dev);
    const auto& b = end.at(s.dev);
    if (!a || !b) {
      if (is_gpu(s.dev->backend())) row.clocks = {{"sensors", s.dev->sensors_absent()}};
      continue;
    }
    row.clocks = {{"start", reading_json(*a)}, {"end", reading_json(*b)}};
    row.throttled = throttled_between(*a, *b);
  }
}

}  // namespace

nlohmann::json ClockDiscipline::before_timing(Device& dev) {
  if (!(o_.settle_s > 0)) return nullptr;
  const auto it = last_end_.find(dev.backend());
  const auto now = std::chrono::steady_clock::now();
  if (it != last_end_.end() && std::chrono::duration<double>(now - it->second).count() <= o_.settle_gap_s)
    return nullptr;
  SettleRule rule;
  rule.max_seconds = o_.settle_s;
  const std::optional<SettleReport> r = dev.settle_clocks(rule);
  if (!r) return nullptr;
  ++settles_;
  seconds_ += r->seconds;
  unsteady_ += r->steady ? 0 : 1;
  return settle_json(*r);
}

void ClockDiscipline::after_timing(Device& dev) { last_end_[dev.backend()] = std::chrono::steady_clock::now(); }

nlohmann::json ClockDiscipline::state() const {
  nlohmann::json ends = nlohmann::json::object();
  for (const auto& [b, t] : last_end_) ends[backend_name(b)] = t.time_since_epoch().count();
  return {{"last_end", ends}, {"settles", settles_}, {"unsteady", unsteady_}, {"seconds", seconds_}};
}

void ClockDiscipline::load(const nlohmann::json& s) {
  last_end_.clear();
  for (const auto& [name, ticks] : s.at("last_end").items())
    if (const auto b = parse_backend(name))
      last_end_[*b] = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(ticks.get<int64_t>()));
  settles_ = s.at("settles").get<int>();
  unsteady_ = s.at("unsteady").get<int>();
  seconds_ = s.at("seconds").get<double>();
}

nlohmann::json ClockDiscipline::summary() const {
  return {{"settles", settles_}, {"seconds", seconds_}, {"unsteady", unsteady_}, {"bound_s", o_.settle_s},
          {"gap_s", o_.settle_gap_s}};
}

std::string clock_summary_line(const ResultsFile& f) {
  std::set<std::string> reasons;
  int timed = 0, throttled = 0;
  for (const auto& r : f.rows) {
    timed += r.time_us ? 1 : 0;
    throttled += r.throttled.empty() ? 0 : 1;
    reasons.insert(r.throttled.begin(), r.throttled.end());
  }
  const nlohmann::json s = f.provenance.value("clock_settle", nlohmann::json::object());
  const int settles = s.value("settles", 0);
  if (settles == 0 && throttled == 0) return "";
  char buf[128];
  std::snprintf(buf, sizeof buf, "clocks: %d settle%s (%.1f s, %d not steady); ", settles, settles == 1 ? "" : "s",
                s.value("seconds", 0.0), s.value("unsteady", 0));
  std::string line = buf + std::to_string(throttled) + " of " + std::to_string(timed) + " timed rows throttled";
  std::string names;
  for (const auto& n : reasons) names += (names.empty() ? "" : ", ") + n;
  return line + (names.empty() ? "" : " (" + names + ")");
}

// --breakdown: device time of each stage run alone (events where the device has them, else wall clock), hot L2,
// for the rows' "breakdown" field; null for kernels without stages.
nlohmann::json time_stages(BoundKernel& bound, Device& dev, const RunOptions& o) {
  const auto stages = bound.stages();
  if (stages.empty()) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  double sum = 0;
  for (const auto& [name, fn] : stages) {
    Sampler s = dev.make_device_sampler(fn);
    if (!s) s = dev.make_sampler(Mode::eager, L2Mode::hot, fn);
    const Stats st = summarize(to_us(collect(s, o.stop)));
    list.push_back({{"name", name}, {"median_us", st.median}, {"q1_us", st.q1}, {"q3_us", st.q3}, {"n", st.n}});
    sum += st.median;
  }
  return {{"stages", list}, {"sum_us", sum}};
}

void set_rates(ResultRow& r, const RunOptions& o) {
  const double sec = r.time_us ? r.time_us->median * 1e-6 : 0.0;
  if (!(sec > 0)) return;
  r.tflops = r.flops / sec * 1e-12;
  r.gbps = r.bytes / sec * 1e-9;
  if (o.peak_tflops) r.pct_peak_flops = 100.0 * *r.tflops / *o.peak_tflops;
  if (o.peak_gbps) r.pct_peak_bw = 100.0 * *r.gbps / *o.peak_gbps;
}

void time_slots(std::vector<TimedSlot>& slots, Mode m, const RunOptions& o) {
  const Readings start = read_devices(slots);
  rounds_over(
      slots, o, true, [&](TimedSlot& s) { return s.dev->make_sampler(m, o.l2, s.call); },
      [&](TimedSlot& s, const RoundedMeasurement& r, const std::string& failure) {
        ResultRow& row = *s.row;
        if (!failure.empty()) {
          row.status = "error";
          row.reason = "timing: " + failure;
          return;
        }
        const RoundedMeasurement us = in_us(r);
        row.time_us = rounded_stats(us);
        row.rounds = rounds_info(us);
        row.settled = r.settled;
        row.unsettled = r.unsettled;
        set_rates(row, o);
      });
  record_clocks(slots, start, read_devices(slots));
  if (m != Mode::eager || o.l2 != L2Mode::hot) return;
  // The device-time pass follows the same kernels' rounds at once: the device is already in their power state.
  rounds_over(
      slots, o, false, [&](TimedSlot& s) { return s.dev->make_device_sampler(s.call); },
      [&](TimedSlot& s, const RoundedMeasurement& r, const std::string& failure) {
        ResultRow& row = *s.row;
        if (!failure.empty()) {
          row.unsettled += (row.unsettled.empty() ? "" : "; ") + ("device_time_us: " + failure);
          return;
        }
        row.device_time_us = rounded_stats(in_us(r));
        if (!r.settled) row.unsettled += (row.unsettled.empty() ? "" : "; ") + ("device_time_us: " + r.unsettled);
      });
}

}  // namespace attnbench
