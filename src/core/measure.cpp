#include "core/measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace attnbench {

namespace {
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * (sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

// Running mean and sum of squared deviations (Welford), so each new sample costs O(1).
struct RunningNoise {
  int n = 0;
  double mean = 0, m2 = 0;
  void add(double x) {
    ++n;
    const double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  double relative() const {  // stdev / mean, the sample stdev; infinite when undefined
    if (n < 2 || !(mean > 0)) return INFINITY;
    return std::sqrt(m2 / (n - 1)) / mean;
  }
};
}  // namespace

Stats summarize(std::vector<double> s) {
  Stats st;
  st.n = static_cast<int>(s.size());
  if (s.empty()) return st;
  std::sort(s.begin(), s.end());
  st.min = s.front();
  st.median = quantile(s, 0.5);
  st.q1 = quantile(s, 0.25);
  st.q3 = quantile(s, 0.75);
  double sum = 0;
  for (double x : s) sum += x;
  st.mean = sum / s.size();
  double var = 0;
  for (double x : s) var += (x - st.mean) * (x - st.mean);
  st.stdev = s.size() > 1 ? std::sqrt(var / (s.size() - 1)) : 0.0;
  return st;
}

namespace {
std::string short_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string noise_words(double noise, int n) {
  if (std::isfinite(noise)) return "relative stdev " + short_num(noise);
  return n < 2 ? "relative stdev undefined with one sample" : "relative stdev undefined (mean <= 0)";
}

// Why a measurement that stopped at the cap or the timeout did not meet the rule.
std::string unsettled_reason(int n, double noise, const StopRule& rule) {
  const bool cap = n >= rule.max_samples;
  const std::string stop = cap ? "sample cap " + std::to_string(rule.max_samples) + " reached"
                               : "timeout " + short_num(rule.timeout_s) + " s reached";
  const bool noisy = !(noise <= rule.max_noise);
  if (n < rule.min_samples) {
    std::string why = stop + " with n=" + std::to_string(n) + " of min " + std::to_string(rule.min_samples);
    if (noisy) why += ", " + noise_words(noise, n) + " > max-noise " + short_num(rule.max_noise);
    return why;
  }
  return stop + " with " + noise_words(noise, n) + " > max-noise " + short_num(rule.max_noise) + " (n=" +
         std::to_string(n) + ")";
}
}  // namespace

Measurement measure(const std::function<double()>& sample, const StopRule& rule) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  Measurement m;
  RunningNoise running;
  for (;;) {
    m.samples.push_back(sample());
    running.add(m.samples.back());
    const int n = running.n;
    const double noise = running.relative();
    if (n >= rule.min_samples && noise <= rule.max_noise) {
      m.settled = true;
      return m;
    }
    const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    if (n >= rule.max_samples || elapsed >= rule.timeout_s) {
      m.unsettled = unsettled_reason(n, noise, rule);
      return m;
    }
  }
}

std::vector<double> collect(const std::function<double()>& sample, const StopRule& rule) {
  return measure(sample, rule).samples;
}

StopRule round_rule(const StopRule& rule, int rounds) {
  StopRule r = rule;
  const int k = std::max(1, rounds);
  r.min_samples = std::max(3, (rule.min_samples + k - 1) / k);
  r.timeout_s = rule.timeout_s / k;
  r.max_samples = std::max(r.min_samples, rule.max_samples / k);
  return r;
}

namespace {
// One sampler's part of a round: its samples, their running noise and the seconds its calls took.
struct RoundPart {
  std::vector<double> samples;
  RunningNoise noise;
  double seconds = 0;
  bool met(const StopRule& r) const { return noise.n >= r.min_samples && noise.relative() <= r.max_noise; }
  bool spent(const StopRule& r) const { return noise.n >= r.max_samples || seconds >= r.timeout_s; }
};

// One round: the samplers take one sample each in turn (order rotated by `first`) until every one meets its rule
// or has spent its cap or timeout, so all take the same number of samples under the same clocks. A sampler whose
// rule has no time left (timeout_s <= 0) takes none.
std::vector<RoundPart> one_round(const std::vector<Sampler>& samplers, const std::vector<StopRule>& per, int first) {
  using clock = std::chrono::steady_clock;
  const int K = static_cast<int>(samplers.size());
  std::vector<RoundPart> parts(K);
  for (bool more = true; more;) {
    more = false;
    for (int i = 0; i < K; ++i) {
      const int k = (first + i) % K;
      RoundPart& p = parts[k];
      if (p.spent(per[k])) continue;
      const auto t0 = clock::now();
      p.samples.push_back(samplers[k]());
      p.seconds += std::chrono::duration<double>(clock::now() - t0).count();
      p.noise.add(p.samples.back());
    }
    for (int k = 0; k < K; ++k) more = more || (!parts[k].met(per[k]) && !parts[k].spent(per[k]));
  }
  return parts;
}

// The rule of round r (0-based) of `rounds` for a sampler that has spent `spent_s` of the measurement's timeout:
// the rounds left share what is left, so the whole measurement stays within --timeout (a round that starts with
// nothing left takes no sample; the first always takes one).
StopRule rule_for_round(const StopRule& per, const StopRule& whole, int r, int rounds, double spent_s) {
  StopRule out = per;
  out.timeout_s = r == 0 ? per.timeout_s : (whole.timeout_s - spent_s) / (rounds - r);
  return out;
}
}  // namespace

std::vector<RoundedMeasurement> measure_rounds(const std::vector<Sampler>& samplers, const StopRule& rule,
                                               int rounds) {
  const int K = static_cast<int>(samplers.size());
  const int R = std::max(1, rounds);
  std::vector<RoundedMeasurement> out(K);
  std::vector<double> spent(K, 0.0);
  const StopRule per = round_rule(rule, R);
  for (int r = 0; r < R; ++r) {
    std::vector<StopRule> rules(K);
    bool any = false;
    for (int k = 0; k < K; ++k) {
      rules[k] = rule_for_round(per, rule, r, R, spent[k]);
      any = any || rules[k].timeout_s > 0;
    }
    if (!any) break;  // the timeout is spent for every sampler: the rounds so far are the measurement
    const std::vector<RoundPart> parts = one_round(samplers, rules, K ? r % K : 0);
    for (int k = 0; k < K; ++k) {
      const RoundPart& p = parts[k];
      RoundedMeasurement& o = out[k];
      spent[k] += p.seconds;
      if (p.samples.empty()) continue;  // out of time before this round: fewer rounds (said below)
      if (!p.met(rules[k]) && o.unsettled.empty()) {
        const std::string why = unsettled_reason(p.noise.n, p.noise.relative(), rules[k]);
        o.unsettled = R > 1 ? "round " + std::to_string(r + 1) + " of " + std::to_string(R) + ": " + why : why;
      }
      o.round_medians.push_back(summarize(p.samples).median);
      o.samples.insert(o.samples.end(), p.samples.begin(), p.samples.end());
    }
  }
  for (auto& o : out) {
    if (o.round_medians.size() < static_cast<std::size_t>(R) && o.unsettled.empty())
      o.unsettled = "timeout " + short_num(rule.timeout_s) + " s spent after " + std::to_string(o.round_medians.size()) +
                    " of " + std::to_string(R) + " rounds (n=" + std::to_string(o.samples.size()) + ")";
    o.settled = o.unsettled.empty();
    o.median = summarize(o.round_medians).median;
    const auto [lo, hi] = std::minmax_element(o.round_medians.begin(), o.round_medians.end());
    o.spread = o.median > 0 ? (*hi - *lo) / o.median : 0.0;
  }
  return out;
}

Stats rounded_stats(const RoundedMeasurement& m) {
  Stats s = summarize(m.samples);
  s.median = m.median;
  return s;
}

int calls_per_sample(double one_call_s, double target_s, int max_calls) {
  if (!(one_call_s > 0)) return 1;
  const double k = std::ceil(target_s / one_call_s);
  return static_cast<int>(std::clamp(k, 1.0, static_cast<double>(max_calls)));
}

}  // namespace attnbench
