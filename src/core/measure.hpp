// Measurement: collects timing samples until a stop rule holds and summarises them. Knows nothing about
// attention: a sample is a callable returning seconds per call.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace attnbench {

using Sampler = std::function<double()>;  // seconds per call of one timing sample

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

// Interleaved rounds: each of K samplers is measured in R rounds under round_rule(rule, R); inside a round the
// samplers take one sample each in turn, in an order rotated by one each round (sampler r % K first in round r),
// until every one meets the rule or has spent its cap or timeout. So the kernels of a case take the same number
// of samples under the same clock, thermal and power history, and none is always first after a gap. The timeout
// bounds a sampler's whole measurement: each later round gets the time its sampler has left divided by the rounds
// left, and a sampler with none left takes no more rounds (its row says after how many it stopped); so a sample
// longer than a round's share costs rounds, not time past --timeout (beyond that one sample).
struct RoundedMeasurement {
  std::vector<double> samples;        // every sample, in the order taken
  std::vector<double> round_medians;  // one per round it sampled in
  double median = 0;                  // the median of the round medians: the headline number
  double spread = 0;                  // (max - min) / median of the round medians
  bool settled = false;               // every round met its rule
  std::string unsettled;              // the first round that did not, and why
};
// A round's stop rule: the run's, split over `rounds` (min samples at least 3, the timeout and cap divided).
StopRule round_rule(const StopRule& rule, int rounds);
std::vector<RoundedMeasurement> measure_rounds(const std::vector<Sampler>& samplers, const StopRule& rule,
                                               int rounds);
// The stats of a rounded measurement: over all samples, with the median replaced by the median of round medians.
Stats rounded_stats(const RoundedMeasurement& m);

// How many back-to-back calls make one sample last about `target_s`, given one call's duration.
int calls_per_sample(double one_call_s, double target_s = 1e-3, int max_calls = 1000);

}  // namespace attnbench
