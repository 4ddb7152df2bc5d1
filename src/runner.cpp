#include "runner.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "errors.hpp"
#include "op_case.hpp"
#include "registry.hpp"

#ifndef ATTNBENCH_VERSION
#define ATTNBENCH_VERSION "0.0.0"
#endif
#ifndef ATTNBENCH_GIT_SHA
#define ATTNBENCH_GIT_SHA "unknown"
#endif

namespace attnbench {

std::vector<ShapeCase> select_cases(const RunOptions& o) {
  std::vector<ShapeCase> all;
  for (const auto& g : o.groups) {
    auto c = load_group(g);
    all.insert(all.end(), c.begin(), c.end());
  }
  for (const auto& f : o.shape_files) {
    auto c = load_shape_file(f);
    all.insert(all.end(), c.begin(), c.end());
  }
  std::optional<std::regex> re;
  if (!o.filter.empty()) {
    try {
      re.emplace(o.filter);
    } catch (const std::regex_error& e) {
      throw UsageError("--filter: invalid regular expression '" + o.filter + "': " + e.what());
    }
  }
  for (const auto& d : o.dtypes)
    if (!parse_dtype(d)) throw UsageError("--dtype: unsupported dtype '" + d + "' (supported: bf16, fp16)");
  std::vector<ShapeCase> out;
  for (auto& c : all) {
    if (!o.dtypes.empty()) {
      bool keep = false;
      for (const auto& d : o.dtypes) keep = keep || parse_dtype(d) == c.dtype;
      if (!keep) continue;
    }
    const std::string id = c.group + "/" + c.name + "/" + dtype_name(c.dtype);
    if (re && !std::regex_search(id, *re)) continue;
    out.push_back(std::move(c));
  }
  if (o.shard.second > 1) {  // by index modulo N, so every slice gets a share of each group's shapes
    std::vector<ShapeCase> slice;
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i % o.shard.second) == o.shard.first - 1) slice.push_back(std::move(out[i]));
    if (slice.empty() && !out.empty())
      throw UsageError("--shard " + std::to_string(o.shard.first) + "/" + std::to_string(o.shard.second) +
                       ": this slice is empty (only " + std::to_string(out.size()) + " cases are selected)");
    out = std::move(slice);
  }
  return out;
}

nlohmann::json base_provenance(const std::string& command_line, uint64_t seed) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char ts[64];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"attnbench_version", ATTNBENCH_VERSION}, {"git_sha", ATTNBENCH_GIT_SHA}, {"command", command_line},
          {"host", host}, {"seed", seed}, {"timestamp", ts}};
}

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/=:,") ==
                        std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// Escapes the characters an ECMAScript regex gives a meaning to, so a shape name matches itself.
std::string regex_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (std::string("\\^$.|?*+()[]{}").find(ch) != std::string::npos) o += '\\';
    o += ch;
  }
  return o;
}

// A command line that reruns exactly one row: same case, kernel, mode, backend, gate settings, seed and knobs.
std::string repro_command(const RunOptions& o, const ShapeCase& c, const std::string& kernel, Backend backend,
                          Mode mode, const std::map<std::string, std::string>& knobs) {
  std::ostringstream os;
  os << "attnbench run ";
  const bool from_group = std::find(o.groups.begin(), o.groups.end(), c.group) != o.groups.end();
  if (from_group) os << "--group " << shell_quote(c.group);
  else os << "--shapes " << shell_quote(c.file);
  os << " --filter "
     << shell_quote("^" + regex_escape(c.group + "/" + c.name + "/" + dtype_name(c.dtype)) + "$") << " --kernel "
     << shell_quote(kernel) << " --backend " << backend_name(backend) << " --mode " << mode_name(mode) << " --l2 "
     << l2_name(o.l2) << " --seed " << o.seed;
  if (o.block_order != BlockOrder::contiguous) os << " --block-order " << block_order_name(o.block_order);
  if (o.atol) os << " --atol " << *o.atol;
  if (o.rtol) os << " --rtol " << *o.rtol;
  if (o.no_gate) os << " --no-gate";
  if (o.reference_gflop != RunOptions().reference_gflop) os << " --reference-gflop " << o.reference_gflop;
  for (const auto& [k, v] : knobs) {
    const KnobSpec* spec = find_knob(k);
    if (spec && spec->default_value != v) os << " --set " << k << "=" << v;
  }
  return os.str();
}

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

void print_header(std::ostream& out) {
  out << std::left << std::setw(14) << "group" << std::setw(34) << "shape" << std::setw(6) << "dtype" << std::setw(15)
      << "kernel" << std::setw(7) << "mode" << std::setw(10) << "status" << std::setw(10) << "max_abs" << std::right
      << std::setw(12) << "median_us" << std::setw(10) << "TFLOP/s" << std::setw(10) << "GB/s" << "\n";
}

void print_row(std::ostream& out, const ResultRow& r) {
  out << std::left << std::setw(14) << r.group << std::setw(34) << r.shape << std::setw(6) << r.dtype
      << std::setw(15) << r.kernel << std::setw(7) << r.mode << std::setw(10) << r.status << std::setw(10)
      << (r.gate ? (std::isfinite(r.gate->max_abs) ? fmt(r.gate->max_abs, 5) : std::string("inf")) : std::string("-"))
      << std::right << std::setw(12) << (r.time_us ? fmt(r.time_us->median, 2) : std::string("-")) << std::setw(10)
      << (r.tflops ? fmt(*r.tflops, 1) : std::string("-")) << std::setw(10)
      << (r.gbps ? fmt(*r.gbps, 1) : std::string("-"));
  if (r.status == "declined" || r.status == "error" || r.status == "mismatch") out << "  " << r.reason;
  out << "\n" << std::flush;
}

// Device handles, created on first use.
struct Devices {
  std::unique_ptr<Device> cpu, cuda;
  std::string cuda_why_not;
  bool cuda_tried = false;
  Device* get(Backend b, std::string* why_not) {
    if (b == Backend::cpu) {
      if (!cpu) cpu = make_cpu_device();
      return cpu.get();
    }
    if (!cuda_tried) {
      cuda = make_cuda_device(&cuda_why_not);
      cuda_tried = true;
    }
    if (!cuda) *why_not = cuda_why_not;
    return cuda.get();
  }
};

bool backend_selected(const std::string& sel, Backend b, bool cuda_available) {
  if (sel == "all") return true;
  if (sel == "cpu") return b == Backend::cpu;
  if (sel == "cuda") return b == Backend::cuda;
  return cuda_available ? b == Backend::cuda : b == Backend::cpu;  // auto
}

std::vector<double> to_us(std::vector<double> s) {
  for (auto& x : s) x *= 1e6;
  return s;
}

// Times one row: the mode's samples, eager's device time, and the rates from the declared work.
void time_row(ResultRow& r, Device& dev, Mode m, const std::function<void()>& call, const RunOptions& o) {
  r.time_us = summarize(to_us(collect(dev.make_sampler(m, o.l2, call), o.stop)));
  if (m == Mode::eager && o.l2 == L2Mode::hot)
    if (auto ds = dev.make_device_sampler(call)) r.device_time_us = summarize(to_us(collect(ds, o.stop)));
  const double sec = r.time_us->median * 1e-6;
  if (sec > 0) {
    r.tflops = r.flops / sec * 1e-12;
    r.gbps = r.bytes / sec * 1e-9;
    if (o.peak_tflops) r.pct_peak_flops = 100.0 * *r.tflops / *o.peak_tflops;
    if (o.peak_gbps) r.pct_peak_bw = 100.0 * *r.gbps / *o.peak_gbps;
  }
}

// --breakdown: device time of each stage run alone (events where the device has them, else wall clock), hot L2.
// Printed as one line under the kernel's rows' header and returned for the rows' "breakdown" field.
nlohmann::json time_stages(BoundKernel& bound, Device& dev, const RunOptions& o, std::ostream& out) {
  const auto stages = bound.stages();
  if (stages.empty()) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  double sum = 0;
  std::string line = "  breakdown (median us):";
  for (const auto& [name, fn] : stages) {
    Sampler s = dev.make_device_sampler(fn);
    if (!s) s = dev.make_sampler(Mode::eager, L2Mode::hot, fn);
    const Stats st = summarize(to_us(collect(s, o.stop)));
    list.push_back({{"name", name}, {"median_us", st.median}, {"q1_us", st.q1}, {"q3_us", st.q3}, {"n", st.n}});
    sum += st.median;
    line += " " + name + " " + fmt(st.median, 1);
  }
  out << line << " | sum " << fmt(sum, 1) << "\n" << std::flush;
  return {{"stages", list}, {"sum_us", sum}};
}

}  // namespace

ResultsFile run_benchmarks(const RunOptions& o, std::ostream& out) {
  if (o.gate_only && o.no_gate) throw UsageError("--gate-only and --no-gate exclude each other");
  if (!(o.backend == "auto" || o.backend == "cpu" || o.backend == "cuda" || o.backend == "all"))
    throw UsageError("--backend: '" + o.backend + "' is not auto|cpu|cuda|all");
  const auto cases = select_cases(o);
  if (cases.empty()) throw UsageError("no shapes selected (check --group/--shapes/--dtype/--filter)");
  const KnobValues knobs = [&] {
    try {
      return KnobValues::resolve(o.knob_overrides);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }();
  bool any_kernel = false;
  for (const auto& k : kernel_registry()) any_kernel = any_kernel || glob_match(o.kernel_glob, k.name);
  if (!any_kernel) {
    std::string known;
    for (const auto& k : kernel_registry()) known += (known.empty() ? "" : ", ") + k.name;
    throw UsageError("--kernel: no kernel matches '" + o.kernel_glob + "' (known: " + known + ")");
  }

  Devices devices;
  std::string why;
  const bool cuda_available = devices.get(Backend::cuda, &why) != nullptr;

  ResultsFile file;
  file.provenance = base_provenance(o.command_line, o.seed);
  file.provenance["knobs"] = knobs.all();
  file.provenance["backend"] = o.backend;
  file.provenance["l2"] = l2_name(o.l2);
  file.provenance["block_order"] = block_order_name(o.block_order);
  file.provenance["stop_rule"] = {{"min_samples", o.stop.min_samples}, {"max_noise", o.stop.max_noise},
                                  {"timeout_s", o.stop.timeout_s}};
  if (!cuda_available) file.provenance["cuda"] = why;
  print_header(out);

  CaseSettings settings;
  settings.seed = o.seed;
  settings.block_order = o.block_order;
  settings.reference_gflop = o.reference_gflop;
  settings.gate = !o.no_gate;
  const bool tty = isatty(STDERR_FILENO);
  int case_index = 0;
  for (const auto& c : cases) {
    ++case_index;
    if (o.progress && tty)
      std::cerr << "\r[" << case_index << "/" << cases.size() << "] " << c.group << "/" << c.name << " "
                << dtype_name(c.dtype) << "\033[K" << std::flush;
    std::unique_ptr<OpCase> op_case = make_op_case(c);
    auto base_row = [&](const std::string& kernel, Backend b, Mode m) {
      ResultRow r;
      r.group = c.group;
      r.shape = c.name;
      r.op = op_name(c.op);
      r.dtype = dtype_name(c.dtype);
      r.kernel = kernel;
      r.backend = backend_name(b);
      r.mode = mode_name(m);
      r.l2 = l2_name(o.l2);
      r.knobs = knobs.all();
      r.repro = repro_command(o, c, kernel, b, m, knobs.all());
      if (op_case) {
        r.dims = op_case->dims();
        const WorkModel w = op_case->work();
        r.flops = w.flops;
        r.bytes = w.bytes;
      }
      return r;
    };
    auto emit = [&](ResultRow r) {
      if (o.progress && tty) std::cerr << "\r\033[K" << std::flush;
      print_row(out, r);
      file.rows.push_back(std::move(r));
    };

    // Kernels of this op that the selection keeps.
    std::vector<const KernelEntry*> entries;
    for (const auto& k : kernel_registry())
      if (k.op == c.op && glob_match(o.kernel_glob, k.name) && backend_selected(o.backend, k.backend, cuda_available))
        entries.push_back(&k);
    if (entries.empty() || !op_case) {
      const bool cuda_asked = o.backend == "cuda" && !cuda_available;  // no CUDA build or no device
      for (Mode m : o.modes) {
        ResultRow r = base_row("-", cuda_asked || cuda_available ? Backend::cuda : Backend::cpu, m);
        r.status = "declined";
        r.reason = cuda_asked ? why : std::string("no selected kernel implements op ") + op_name(c.op);
        emit(r);
      }
      continue;
    }

    for (const KernelEntry* e : entries) {
      std::set<Mode> emitted;  // one row per mode, even when a later mode fails after an earlier one's row
      auto rows_with = [&](const std::string& status, const std::string& reason) {
        for (Mode m : o.modes) {
          if (emitted.count(m)) continue;
          ResultRow r = base_row(e->name, e->backend, m);
          r.status = status;
          r.reason = reason;
          emit(r);
        }
      };
      std::string why_not;
      Device* dev = devices.get(e->backend, &why_not);
      if (!dev) {
        rows_with("declined", why_not);
        continue;
      }
      const Support s = op_case->supports(*e, knobs);
      if (!s.ok) {
        rows_with("declined", s.reason);
        continue;
      }
      try {
        op_case->prepare(settings);
        auto bound = op_case->bind(*e, *dev, knobs);
        auto call = [&] { bound->call(); };
        call();
        dev->synchronize();
        std::optional<GateResult> gate;
        if (!o.no_gate) gate = bound->gate(run_tolerance(o, c.dtype));
        nlohmann::json breakdown;
        if (o.breakdown && !o.gate_only && (!gate || gate->passed)) breakdown = time_stages(*bound, *dev, o, out);
        for (Mode m : o.modes) {
          ResultRow r = base_row(e->name, e->backend, m);
          r.gate = gate;
          r.plan = bound->plan_summary;
          r.graph_recommended = bound->graph_recommended;
          r.breakdown = breakdown;
          if (gate && !gate->passed) {
            r.status = "mismatch";
            r.reason = gate_failure_reason(*gate);
            emitted.insert(m);
            emit(r);
            continue;
          }
          const Support t = dev->can_time(m, o.l2);
          if (!t.ok) {
            r.status = "declined";
            r.reason = t.reason;
            emitted.insert(m);
            emit(r);
            continue;
          }
          r.status = "ok";
          if (!o.gate_only) time_row(r, *dev, m, call, o);
          emitted.insert(m);
          emit(r);
        }
      } catch (const UsageError&) {
        throw;
      } catch (const std::exception& ex) {
        rows_with("error", ex.what());
      }
    }
  }
  // The device the rows ran on: the GPU when any CUDA row ran, else the CPU.
  bool cuda_ran = false;
  for (const auto& r : file.rows) cuda_ran = cuda_ran || (r.backend == "cuda" && r.status != "declined");
  if (cuda_ran && devices.cuda) file.provenance["device"] = devices.cuda->facts();
  else file.provenance["device"] = devices.get(Backend::cpu, &why)->facts();
  return file;
}

Tolerance run_tolerance(const RunOptions& o, DType d) {
  Tolerance t = default_tolerance(d);
  if (o.atol) t.atol = *o.atol;
  if (o.rtol) t.rtol = *o.rtol;
  return t;
}

int exit_code_for(const ResultsFile& f) {
  for (const auto& r : f.rows)
    if (r.status != "ok" && r.status != "declined") return 1;
  return 0;
}

}  // namespace attnbench
