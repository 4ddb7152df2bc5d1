// A results file's provenance: what every command records (version, git sha, command, host, seed, time) and what
// a run adds (knobs, backend, L2, block order, stop rule, why there is no CUDA device).
#include <unistd.h>

#include <ctime>

#include "cases/inputs.hpp"
#include "device/device.hpp"
#include "plugins/plugin.hpp"
#include "run/runner.hpp"
#include "run/runner_impl.hpp"

#ifndef ATTNBENCH_VERSION
#define ATTNBENCH_VERSION "0.0.0"
#endif
#ifndef ATTNBENCH_GIT_SHA
#define ATTNBENCH_GIT_SHA "unknown"
#endif

namespace attnbench {

nlohmann::json base_provenance(const std::string& command_line, uint64_t seed) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char ts[64];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"attnbench_version", ATTNBENCH_VERSION}, {"git_sha", ATTNBENCH_GIT_SHA}, {"command", command_line},
          {"host", host}, {"seed", seed}, {"timestamp", ts}};
}

namespace detail {

nlohmann::json run_provenance(const RunOptions& o, const KnobValues& knobs, bool cuda_available,
                              const std::string& cuda_why_not) {
  nlohmann::json p = base_provenance(o.command_line, o.seed);
  p["knobs"] = knobs.all();
  // Each knob's default in this build: compare keeps a row's knobs at their defaults out of its matching key.
  nlohmann::json defaults = nlohmann::json::object();
  for (const KnobSpec& k : knob_table()) defaults[k.name] = k.default_value;
  p["knob_defaults"] = std::move(defaults);
  p["backend"] = o.backend;
  p["l2"] = l2_name(o.l2);
  p["block_order"] = block_order_name(o.block_order);
  p["stop_rule"] = {{"min_samples", o.stop.min_samples}, {"max_noise", o.stop.max_noise},
                    {"timeout_s", o.stop.timeout_s}, {"rounds", o.rounds},
                    {"warmup_s", o.warmup_s ? nlohmann::json(*o.warmup_s) : nlohmann::json("auto")}};
  if (!cuda_available) p["cuda"] = cuda_why_not;
  if (nlohmann::json plugins = plugins_json(); !plugins.empty()) p["plugins"] = std::move(plugins);
  return p;
}

}  // namespace detail
}  // namespace attnbench
