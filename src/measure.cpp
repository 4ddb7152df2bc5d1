#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace attnbench {

namespace {
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * (sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

double relative_noise(const std::vector<double>& s) {
  if (s.size() < 2) return INFINITY;
  double mean = 0;
  for (double x : s) mean += x;
  mean /= s.size();
  double var = 0;
  for (double x : s) var += (x - mean) * (x - mean);
  var /= (s.size() - 1);
  return mean > 0 ? std::sqrt(var) / mean : INFINITY;
}
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

std::vector<double> collect(const std::function<double()>& sample, const StopRule& rule) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::vector<double> out;
  for (;;) {
    out.push_back(sample());
    const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    const int n = static_cast<int>(out.size());
    if (n >= rule.max_samples) break;
    if (elapsed >= rule.timeout_s) break;
    if (n >= rule.min_samples && relative_noise(out) <= rule.max_noise) break;
  }
  return out;
}

int calls_per_sample(double one_call_s, double target_s, int max_calls) {
  if (!(one_call_s > 0)) return 1;
  const double k = std::ceil(target_s / one_call_s);
  return static_cast<int>(std::clamp(k, 1.0, static_cast<double>(max_calls)));
}

}  // namespace attnbench
