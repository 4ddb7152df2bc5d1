#include "cli/cli_options.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <ostream>
#include <sstream>

#include "attnbench/knobs.hpp"
#include "cases/inline_shape.hpp"
#include "core/errors.hpp"
#include "core/json_file.hpp"
#include "run/interrupt.hpp"
#include "run/journal.hpp"

namespace fs = std::filesystem;

namespace attnbench {

namespace {
constexpr unsigned long long kMaxSeed = std::numeric_limits<unsigned long long>::max();

// "" when `s` is a decimal integer in [lo, hi] (hi as unsigned for the seed's range); the message otherwise.
std::string check_integer(const std::string& s, long long lo, unsigned long long hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  const std::string bad = "expected an integer in " + range + ", got '" + compact_value(s) + "'";
  const size_t digits_from = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (s.size() == digits_from || s.find_first_not_of("0123456789", digits_from) != std::string::npos) return bad;
  if (s[0] == '-') {
    errno = 0;
    const long long v = std::strtoll(s.c_str(), nullptr, 10);
    return errno == ERANGE || v < lo ? bad : "";
  }
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str() + digits_from, nullptr, 10);
  if (errno == ERANGE || v > hi) return bad;
  return lo > 0 && v < static_cast<unsigned long long>(lo) ? bad : "";
}
}  // namespace

CLI::Validator finite_number(double min, bool min_inclusive) {
  std::ostringstream bound;
  bound << (min_inclusive ? ">= " : "> ") << min;
  const std::string want = "a finite number " + bound.str();
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(s.c_str(), &end);
        const bool parsed = !s.empty() && end == s.c_str() + s.size() && errno != ERANGE;
        if (!parsed || !std::isfinite(v) || (min_inclusive ? v < min : v <= min))
          return "expected " + want + ", got '" + compact_value(s) + "'";
        return "";
      },
      min_inclusive ? "NUMBER>=" + std::to_string(static_cast<long long>(min))
                    : "NUMBER>" + std::to_string(static_cast<long long>(min)));
}

CLI::Validator integer_in(long long lo, long long hi) {
  return CLI::Validator([=](std::string& s) { return check_integer(s, lo, static_cast<unsigned long long>(hi)); },
                        "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

void add_case_options(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("--group,-g", o.groups, "Shape group (repeatable): decode, short_prefill, ...");
  cmd->add_option("--shapes", o.shape_files, "A shape file in the shapes/ schema (repeatable)");
  cmd->add_option("--shape", o.inline_shapes,
                  std::string("An inline attention shape (repeatable): ") + kInlineShapeGrammar);
  cmd->add_option("--kernel,-k", o.kernel_glob, "Kernel name globs, comma-separated, e.g. 'cuda.*,cudnn.*'")->capture_default_str();
  add_plugin_option(cmd, o.plugins);
  cmd->add_option("--backend", o.backend, "auto (cuda when a GPU is visible, else cpu) | cpu | cuda | hip | all")
      ->capture_default_str();
  cmd->add_option("--dtype", o.dtypes, "Keep only these dtypes (bf16, fp16)")->delimiter(',');
  cmd->add_option("--filter", o.filter, "Regex over 'group/shape/dtype'");
  cmd->add_option("--seed", o.seed, "Input RNG seed, 0 to 2^64 - 1")
      ->capture_default_str()
      ->check(CLI::Validator([](std::string& s) { return check_integer(s, 0, kMaxSeed); }, "UINT64"));
}

void add_plugin_option(CLI::App* cmd, std::vector<std::string>& paths) {
  cmd->add_option("--plugin", paths,
                  "A shared library of kernels implementing attnbench/plugin.h (repeatable; also ATTNBENCH_PLUGINS, "
                  "':'-separated): they join the registry under their own names");
}

void add_stop_options(CLI::App* cmd, StopRule& stop) {
  cmd->add_option("--min-samples", stop.min_samples, "Timing samples at least")->capture_default_str()
      ->check(integer_in(1, std::numeric_limits<int>::max()));
  cmd->add_option("--max-noise", stop.max_noise, "Stop when relative stdev <= this")->capture_default_str()
      ->check(non_negative_finite());
  cmd->add_option("--timeout", stop.timeout_s, "Seconds per measurement at most")->capture_default_str()
      ->check(positive_finite());
}

void add_timing_options(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("--threads", o.threads,
                  "OpenMP threads of the CPU kernels and the CPU reference (default: OMP_NUM_THREADS, else one per "
                  "core); on a loaded host fewer threads time steadier")
      ->check(integer_in(1, 4096));
  cmd->add_option("--rounds", o.rounds,
                  "Interleaved rounds per mode: the kernels of a case alternate in each; a row's median is the "
                  "median of its round medians")
      ->capture_default_str()
      ->check(integer_in(1, 1000));
  cmd->add_option("--settle", o.settle_s,
                  "Seconds at most of spin load before timing, until the SM clock is at its maximum and steady; "
                  "again when a case starts after a pause (0: never)")
      ->capture_default_str()
      ->check(non_negative_finite());
  cmd->add_option("--warmup", o.warmup_s,
                  "Seconds of untimed, interleaved sampling of a case's kernels before each mode's rounds, so the "
                  "rounds run in the power state the workload holds (default 0.5 on a GPU, 0 on the CPU)")
      ->check(non_negative_finite());
}

void add_isolation_options(CLI::App* cmd, RunOptions& o) {
  o.isolate = Isolation::automatic;
  const std::map<std::string, Isolation> names = {{"case", Isolation::per_case}, {"kernel", Isolation::per_kernel},
                                                  {"off", Isolation::off}, {"auto", Isolation::automatic}};
  cmd->add_option("--isolate", o.isolate,
                  "Run each case (case) or each kernel of a case (kernel, timed alone) in a worker process, so a "
                  "kernel that crashes, faults the device or hangs costs only its own rows; off: in this process "
                  "(default: case)")
      ->transform(CLI::CheckedTransformer(names, CLI::ignore_case));
  cmd->add_option("--case-timeout", o.case_timeout_s,
                  "Seconds a worker may take before it is killed and its kernel's rows are errors (default: 120 plus "
                  "4x the timeout and warm-up of each kernel and mode)")
      ->check(positive_finite());
}

void add_resume_option(CLI::App* cmd, RunOptions& o) {
  cmd->add_flag("--resume", o.resume,
                "Continue an interrupted run from its journal (<out>.partial.jsonl): its finished cases are kept, "
                "the rest run; refused when the command, the binary or the seed differ");
}

void add_force_option(CLI::App* cmd, bool& force) {
  cmd->add_flag("--force", force,
                "Let an output path replace an existing file that holds something else than this command's own "
                "earlier output (never a device, a folder or one of the command's inputs)");
}

void set_journal(RunOptions& o, const std::string& out, const std::vector<std::string>& args) {
  o.journal = journal_path(out);
  o.journal_command = journal_command(args);
}

void write_run_files(const ResultsFile& f, const ResultPaths& paths, const RunOptions& o) {
  write_file_atomic(paths.json, results_to_json(f).dump(2) + "\n");
  write_file_atomic(paths.csv, results_to_csv(f));
  if (!f.interrupted_by && !o.journal.empty()) {
    std::error_code ec;
    fs::remove(o.journal, ec);
  }
}

int interrupted_exit(const ResultsFile& f, const RunOptions& o, std::ostream& out) {
  if (!f.interrupted_by) return 0;
  const nlohmann::json cases = f.provenance.value("cases", nlohmann::json::object());
  out << "interrupted by " << signal_name(f.interrupted_by) << " after " << cases.value("done", 0) << " of "
      << cases.value("selected", 0) << " cases";
  if (!o.journal.empty()) out << "; the journal " << o.journal << " keeps them: run the same command with --resume";
  out << "\n";
  return 128 + f.interrupted_by;
}

std::vector<Mode> parse_modes(const std::vector<std::string>& modes) {
  std::vector<Mode> out;
  for (const auto& m : modes) {
    Mode mode;
    if (m == "eager") mode = Mode::eager;
    else if (m == "graph") mode = Mode::graph;
    else throw UsageError("--mode: '" + compact_value(m) + "' is not eager|graph");
    if (std::find(out.begin(), out.end(), mode) != out.end())
      throw UsageError("--mode: '" + m + "' given twice (each mode runs once)");
    out.push_back(mode);
  }
  return out;
}

std::string selection_stem(const RunOptions& o) {
  std::string stem;
  for (const auto& g : o.groups) stem += (stem.empty() ? "" : "+") + g;
  if (!stem.empty()) return stem;
  return o.shape_files.empty() ? "inline" : fs::path(o.shape_files.front()).stem().string();
}

void make_default_out_folder(const std::string& out_path) {
  const fs::path dir = fs::path(out_path).parent_path();
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    std::error_code cwd_ec;
    const std::string where = fs::absolute(dir, cwd_ec).string();
    throw UsageError("cannot create the default results folder " + where + " (" +
                     (ec ? ec.message() : std::string("not a folder")) + "); give -o PATH to write elsewhere");
  }
}

void warn_unknown_environment(std::ostream& err) {
  for (const auto& w : unknown_environment_warnings()) err << "attnbench: warning: " << w << "\n";
}

}  // namespace attnbench
