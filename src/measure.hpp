// Measurement: collects timing samples until a stop rule holds and summarises them. Knows nothing about
// attention: a sample is a callable returning seconds per call.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace attnbench {

struct Stats {
  double median = 0, min = 0, q1 = 0, q3 = 0, mean = 0, stdev = 0;
  int n = 0;
};

// Order statistics with linear interpolation between closest ranks; stdev is the sample stdev.
Stats summarize(std::vector<double> samples);

struct StopRule {
  int min_samples = 20;
  double max_noise = 0.05;  // relative stdev (stdev / mean)
  double timeout_s = 10.0;  // per measurement; wins over min_samples
  int max_samples = 2000;
};

// The samples of one measurement and whether the stop rule (n >= min_samples and noise <= max_noise) held when
// it stopped; when it did not, `unsettled` says why in words with the numbers.
struct Measurement {
  std::vector<double> samples;
  bool settled = false;
  std::string unsettled;
};

// Calls `sample` until the stop rule holds, or the timeout or max_samples; at least once. Samples are in the
// unit `sample` returns.
Measurement measure(const std::function<double()>& sample, const StopRule& rule);
// measure()'s samples alone.
std::vector<double> collect(const std::function<double()>& sample, const StopRule& rule);

// How many back-to-back calls make one sample last about `target_s`, given one call's duration.
int calls_per_sample(double one_call_s, double target_s = 1e-3, int max_calls = 1000);

}  // namespace attnbench
