#include "run/host_load.hpp"

#include <omp.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace attnbench {

namespace {

nlohmann::json load_average() {
  std::ifstream f("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(f >> a >> b >> c)) return nullptr;
  return {a, b, c};
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown";
}

}  // namespace

nlohmann::json host_cpu_facts(int threads_option) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  const std::string from = threads_option > 0 ? "--threads" : env && *env ? "OMP_NUM_THREADS" : "default: one per core";
  return {{"cpu_model", cpu_model()}, {"cores", std::thread::hardware_concurrency()},
          {"threads", omp_get_max_threads()}, {"threads_from", from}, {"load_start", load_average()}};
}

void add_load_end(nlohmann::json& facts) { facts["load_end"] = load_average(); }

std::string load_warning(const nlohmann::json& facts) {
  if (!facts.is_object()) return "";
  const double cores = facts.value("cores", 0);
  double worst = 0;
  for (const char* k : {"load_start", "load_end"})
    if (facts.contains(k) && facts[k].is_array() && !facts[k].empty()) worst = std::max(worst, facts[k][0].get<double>());
  if (cores <= 0 || worst <= cores) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "warning: the host's load average reached %.2f on %.0f cores: its other work shares the CPU, so CPU "
                "timings of this run are unreliable (fewer --threads, or a quieter host)", worst, cores);
  return buf;
}

}  // namespace attnbench
