// Helpers for tests that run the attnbench binary (and scripts) and build result files by hand.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "temp_dir.hpp"

namespace testcli {

struct Result {
  int code;
  std::string output;
};

// Runs `command` through the shell in this process's temp folder (temp_dir.hpp); stdout and stderr together.
inline Result shell(const std::string& command) {
  const std::string cmd = "cd '" + testtmp::dir().string() + "' && " + command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

inline Result run_cli(const std::string& args, const std::string& env = "") {
  return shell(env + " ATTNBENCH_SHAPES_DIR=" ATTNBENCH_SOURCE_DIR "/shapes " ATTNBENCH_BINARY " " + args);
}

// A path in this test process's temp folder (temp_dir.hpp), removed when the process exits.
inline std::string tmp_path(const std::string& name) { return testtmp::path(name); }

inline std::string write_text(const std::string& name, const std::string& text) {
  const std::string p = tmp_path(name);
  std::ofstream(p) << text;
  return p;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// A result row as `run` writes it: the fields every reader needs (row_from_json's), no gate, no extras.
inline nlohmann::json row(const std::string& shape, const std::string& kernel, const std::string& mode,
                          const std::string& status, double median = 0, double q1 = 0, double q3 = 0,
                          nlohmann::json knobs = nlohmann::json::object()) {
  nlohmann::json r = {{"group", "g"},   {"shape", shape},   {"op", "attention"}, {"dtype", "bf16"},
                      {"kernel", kernel}, {"backend", "cuda"}, {"mode", mode},      {"l2", "hot"},
                      {"status", status}, {"reason", ""},      {"knobs", knobs},    {"time_us", nullptr},
                      {"dims", nlohmann::json::object()}, {"flops", 0}, {"bytes", 0}, {"plan", ""}, {"repro", ""},
                      {"gate", nullptr}, {"device_time_us", nullptr}, {"rounds", nullptr}};
  if (status == "ok")
    r["time_us"] = {{"median", median}, {"q1", q1}, {"q3", q3}, {"min", q1}, {"mean", median}, {"stdev", 0}, {"n", 20}};
  return r;
}

inline nlohmann::json results_doc(const nlohmann::json& rows, const std::string& sha = "abc123", int seed = 1234,
                                  const std::string& device = "NVIDIA H200") {
  return {{"schema", "attnbench.results/1"},
          {"provenance", {{"git_sha", sha}, {"seed", seed}, {"device", {{"device", device}}}, {"command", "attnbench run"}}},
          {"rows", rows}};
}

inline std::string write_results(const std::string& name, const nlohmann::json& doc) {
  return write_text(name, doc.dump(2));
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace testcli
