// The host's side of a measurement: its CPU model, cores, the OpenMP threads the run uses and where that number came
// from, and the load average at the run's start and end. CPU timings on a host whose load exceeds its cores measure
// the other work as much as the kernel; the run says so.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace attnbench {

// {"cpu_model", "cores", "threads", "threads_from" ("--threads", "OMP_NUM_THREADS" or "default: one per core"),
// "load_start": [1, 5, 15 min]} ("load_start" null where /proc/loadavg cannot be read).
nlohmann::json host_cpu_facts(int threads_option);
// Adds "load_end" to facts from host_cpu_facts.
void add_load_end(nlohmann::json& facts);
// "warning: ..." when the 1-minute load at the start or the end exceeds the cores; "" otherwise.
std::string load_warning(const nlohmann::json& facts);

}  // namespace attnbench
