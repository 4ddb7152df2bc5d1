#include "results/results.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "core/errors.hpp"
#include "core/json_file.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace attnbench {

namespace {
json stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"q1", s.q1}, {"q3", s.q3},
          {"mean", s.mean},     {"stdev", s.stdev}, {"n", s.n}};
}
template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json finite_or_inf(double v) { return std::isfinite(v) ? json(v) : json("inf"); }
// gate.tensors: one object per output tensor of a gate over several (a backward's dq, dk, dv).
json tensors_json(const std::vector<TensorGate>& ts) {
  json a = json::array();
  for (const auto& t : ts)
    a.push_back({{"name", t.name}, {"passed", t.passed}, {"max_abs", finite_or_inf(t.max_abs)},
                 {"rel_l2", finite_or_inf(t.rel_l2)}, {"max_row_rel", finite_or_inf(t.max_row_rel)},
                 {"atol", t.atol}, {"rtol", t.rtol}, {"rows_checked", t.rows_checked}, {"nonfinite", t.nonfinite},
                 {"worst_row", t.worst_row}, {"failed", t.failed}});
  return a;
}
}  // namespace

json row_to_json(const ResultRow& r) {
  json j = {{"group", r.group}, {"shape", r.shape},     {"op", r.op},         {"dtype", r.dtype},
            {"kernel", r.kernel}, {"backend", r.backend}, {"mode", r.mode},   {"l2", r.l2},
            {"status", r.status}, {"reason", r.reason},   {"dims", r.dims},   {"flops", r.flops},
            {"bytes", r.bytes},   {"knobs", r.knobs},     {"plan", r.plan},   {"repro", r.repro}};
  if (r.gate) {
    const auto& g = *r.gate;
    j["gate"] = {{"passed", g.passed},
                 {"max_abs", std::isfinite(g.max_abs) ? json(g.max_abs) : json("inf")},
                 {"rel_l2", std::isfinite(g.rel_l2) ? json(g.rel_l2) : json("inf")},
                 {"max_row_rel", std::isfinite(g.max_row_rel) ? json(g.max_row_rel) : json("inf")},
                 {"atol", g.atol},
                 {"rtol", g.rtol},
                 {"failed", g.failed},
                 {"worst_row", g.worst_row},
                 {"rows_checked", g.rows_checked},
                 {"nonfinite", g.nonfinite},
                 {"worst_index", g.worst_index},
                 {"detail", g.detail}};
    if (!g.reference.empty()) {
      j["gate"]["reference"] = g.reference;
      j["gate"]["reference_ms"] = g.reference_ms;
    }
    if (g.coverage.tile_heads > 0) {
      const RowCoverage& c = g.coverage;
      j["gate"]["coverage"] = {{"sequence_heads", {c.sequence_heads_covered, c.sequence_heads}},
                               {"tile_heads", {c.tile_heads_covered, c.tile_heads}}};
    }
    if (g.lse_checked > 0) {
      j["gate"]["lse_checked"] = g.lse_checked;
      j["gate"]["lse_max_err"] = std::isfinite(g.lse_max_err) ? json(g.lse_max_err) : json("inf");
      j["gate"]["lse_tol"] = g.lse_tol;
    }
    if (!g.tensors.empty()) j["gate"]["tensors"] = tensors_json(g.tensors);
  } else {
    j["gate"] = nullptr;
  }
  j["time_us"] = r.time_us ? stats_json(*r.time_us) : json(nullptr);
  j["device_time_us"] = r.device_time_us ? stats_json(*r.device_time_us) : json(nullptr);
  j["rounds"] = r.rounds ? json{{"count", r.rounds->count}, {"medians_us", r.rounds->medians_us},
                                {"spread", r.rounds->spread}}
                         : json(nullptr);
  j["settled"] = opt(r.settled);
  j["unsettled"] = r.unsettled.empty() ? json(nullptr) : json(r.unsettled);
  j["tflops"] = opt(r.tflops);
  j["gbps"] = opt(r.gbps);
  j["pct_peak_flops"] = opt(r.pct_peak_flops);
  j["pct_peak_bw"] = opt(r.pct_peak_bw);
  j["graph_recommended"] = opt(r.graph_recommended);
  if (!r.breakdown.is_null()) j["breakdown"] = r.breakdown;
  if (!r.clocks.is_null()) j["clocks"] = r.clocks;
  if (!r.throttled.empty()) j["throttled"] = r.throttled;
  if (r.vs_peer) j["vs_peer"] = {{"kernel", r.vs_peer->kernel}, {"ratio", r.vs_peer->ratio}};
  if (!r.plugin.empty()) j["plugin"] = {{"path", r.plugin}, {"sha256", r.plugin_sha256}};
  return j;
}

namespace {
// A field of a row being read back; UsageError naming it when absent or of another type.
const json& field(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) throw UsageError(std::string("row field '") + name + "': missing");
  return *it;
}
template <class T>
T get_field(const json& j, const char* name) {
  try {
    return field(j, name).get<T>();
  } catch (const json::exception&) {
    throw UsageError(std::string("row field '") + name + "': unexpected value " + compact_value(field(j, name).dump()));
  }
}
// A gate number: finite, or "inf" as row_to_json writes a non-finite one.
double gate_number(const json& g, const char* name) {
  const json& v = field(g, name);
  if (v == "inf") return std::numeric_limits<double>::infinity();
  return get_field<double>(g, name);
}
std::optional<Stats> stats_from(const json& j, const char* name) {
  const json& v = field(j, name);
  if (v.is_null()) return std::nullopt;
  Stats s;
  s.median = get_field<double>(v, "median");
  s.min = get_field<double>(v, "min");
  s.q1 = get_field<double>(v, "q1");
  s.q3 = get_field<double>(v, "q3");
  s.mean = get_field<double>(v, "mean");
  s.stdev = get_field<double>(v, "stdev");
  s.n = get_field<int>(v, "n");
  return s;
}
// gate.coverage: {"sequence_heads": [covered, of], "tile_heads": [covered, of]}.
RowCoverage coverage_from(const json& c) {
  RowCoverage r;
  const auto pair = [&](const char* name, int64_t& covered, int64_t& of) {
    const auto v = get_field<std::vector<int64_t>>(c, name);
    if (v.size() != 2 || v[0] < 0 || v[0] > v[1])
      throw UsageError(std::string("gate.coverage field '") + name + "': expected [covered, of], got " +
                       compact_value(field(c, name).dump()));
    covered = v[0];
    of = v[1];
  };
  pair("sequence_heads", r.sequence_heads_covered, r.sequence_heads);
  pair("tile_heads", r.tile_heads_covered, r.tile_heads);
  return r;
}
std::vector<TensorGate> tensors_from(const json& a) {
  if (!a.is_array()) throw UsageError("gate field 'tensors': expected a list, got " + compact_value(a.dump()));
  std::vector<TensorGate> out;
  for (const json& t : a) {
    if (!t.is_object()) throw UsageError("gate.tensors: expected objects, got " + compact_value(t.dump()));
    out.push_back({get_field<std::string>(t, "name"), get_field<bool>(t, "passed"), gate_number(t, "max_abs"),
                   gate_number(t, "rel_l2"), gate_number(t, "max_row_rel"), get_field<double>(t, "atol"),
                   get_field<double>(t, "rtol"), get_field<int64_t>(t, "rows_checked"),
                   get_field<int64_t>(t, "nonfinite"), get_field<int64_t>(t, "worst_row"),
                   get_field<std::vector<std::string>>(t, "failed")});
  }
  return out;
}
template <class T>
std::optional<T> opt_from(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return get_field<T>(j, name);
}
}  // namespace

ResultRow row_from_json(const json& j) {
  if (!j.is_object()) throw UsageError("row: expected an object, got " + compact_value(j.dump()));
  ResultRow r;
  r.group = get_field<std::string>(j, "group");
  r.shape = get_field<std::string>(j, "shape");
  r.op = get_field<std::string>(j, "op");
  r.dtype = get_field<std::string>(j, "dtype");
  r.kernel = get_field<std::string>(j, "kernel");
  r.backend = get_field<std::string>(j, "backend");
  r.mode = get_field<std::string>(j, "mode");
  r.l2 = get_field<std::string>(j, "l2");
  r.status = get_field<std::string>(j, "status");
  r.reason = get_field<std::string>(j, "reason");
  r.dims = field(j, "dims");
  r.flops = get_field<double>(j, "flops");
  r.bytes = get_field<double>(j, "bytes");
  r.knobs = get_field<std::map<std::string, std::string>>(j, "knobs");
  r.plan = get_field<std::string>(j, "plan");
  r.repro = get_field<std::string>(j, "repro");
  if (const json& g = field(j, "gate"); !g.is_null()) {
    if (!g.is_object()) throw UsageError("row field 'gate': expected an object or null");
    GateResult gr;
    gr.passed = get_field<bool>(g, "passed");
    gr.max_abs = gate_number(g, "max_abs");
    gr.rel_l2 = gate_number(g, "rel_l2");
    gr.max_row_rel = gate_number(g, "max_row_rel");
    gr.atol = get_field<double>(g, "atol");
    gr.rtol = get_field<double>(g, "rtol");
    gr.failed = get_field<std::vector<std::string>>(g, "failed");
    gr.worst_row = get_field<int64_t>(g, "worst_row");
    gr.rows_checked = get_field<int64_t>(g, "rows_checked");
    gr.nonfinite = get_field<int64_t>(g, "nonfinite");
    gr.worst_index = get_field<int64_t>(g, "worst_index");
    gr.detail = get_field<std::string>(g, "detail");
    if (g.contains("reference")) {
      gr.reference = get_field<std::string>(g, "reference");
      gr.reference_ms = get_field<double>(g, "reference_ms");
    }
    if (g.contains("coverage")) gr.coverage = coverage_from(field(g, "coverage"));
    if (g.contains("lse_checked")) {
      gr.lse_checked = get_field<int64_t>(g, "lse_checked");
      gr.lse_max_err = gate_number(g, "lse_max_err");
      gr.lse_tol = get_field<double>(g, "lse_tol");
    }
    if (g.contains("tensors")) gr.tensors = tensors_from(field(g, "tensors"));
    r.gate = gr;
  }
  r.time_us = stats_from(j, "time_us");
  r.device_time_us = stats_from(j, "device_time_us");
  if (const json& rd = field(j, "rounds"); !rd.is_null()) {
    RoundsInfo ri;
    ri.count = get_field<int>(rd, "count");
    ri.medians_us = get_field<std::vector<double>>(rd, "medians_us");
    ri.spread = get_field<double>(rd, "spread");
    r.rounds = ri;
  }
  r.settled = opt_from<bool>(j, "settled");
  r.unsettled = opt_from<std::string>(j, "unsettled").value_or("");
  r.tflops = opt_from<double>(j, "tflops");
  r.gbps = opt_from<double>(j, "gbps");
  r.pct_peak_flops = opt_from<double>(j, "pct_peak_flops");
  r.pct_peak_bw = opt_from<double>(j, "pct_peak_bw");
  r.graph_recommended = opt_from<bool>(j, "graph_recommended");
  if (j.contains("breakdown")) r.breakdown = j["breakdown"];
  if (j.contains("clocks")) r.clocks = j["clocks"];
  if (j.contains("throttled")) r.throttled = get_field<std::vector<std::string>>(j, "throttled");
  r.vs_peer = vs_peer_from_json(j);
  if (const auto p = j.find("plugin"); p != j.end() && !p->is_null()) {
    if (!p->is_object())
      throw UsageError("row field 'plugin': expected an object {path, sha256}, got " + compact_value(p->dump()));
    r.plugin = get_field<std::string>(*p, "path");
    r.plugin_sha256 = get_field<std::string>(*p, "sha256");
  }
  return r;
}

std::optional<PeerRatio> vs_peer_from_json(const json& row) {
  if (!row.contains("vs_peer") || row["vs_peer"].is_null()) return std::nullopt;
  const json& v = row["vs_peer"];
  if (!v.is_object())
    throw UsageError("field 'vs_peer': expected an object {kernel, ratio} or null, got " + compact_value(v.dump()));
  const json kernel = v.value("kernel", json(nullptr)), ratio = v.value("ratio", json(nullptr));
  if (!kernel.is_string() || kernel.get<std::string>().empty())
    throw UsageError("field 'vs_peer.kernel': expected a kernel name, got " + compact_value(kernel.dump()));
  if (!ratio.is_number() || !(ratio.get<double>() > 0) || !std::isfinite(ratio.get<double>()))
    throw UsageError("field 'vs_peer.ratio': expected a positive number, got " + compact_value(ratio.dump()));
  return PeerRatio{kernel.get<std::string>(), ratio.get<double>()};
}

json results_to_json(const ResultsFile& f) {
  json rows = json::array();
  for (const auto& r : f.rows) rows.push_back(row_to_json(r));
  return {{"schema", kResultsSchema}, {"provenance", f.provenance}, {"rows", rows}};
}

namespace {
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}
std::string num(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

// A dims value as one CSV cell: numbers as written, booleans true/false, strings bare, anything else as JSON.
std::string dims_cell(const json& v) {
  if (v.is_string()) return csv_field(v.get<std::string>());
  if (v.is_number_float()) return num(v.get<double>());
  return csv_field(v.dump());
}

// The dims keys any row holds, sorted: one "dims.KEY" column each (an attention row and a gated row hold different
// ones; a row without a key leaves its cell empty).
std::set<std::string> dims_keys(const ResultsFile& f) {
  std::set<std::string> keys;
  for (const auto& r : f.rows)
    if (r.dims.is_object())
      for (auto it = r.dims.begin(); it != r.dims.end(); ++it) keys.insert(it.key());
  return keys;
}
}  // namespace

std::string results_to_csv(const ResultsFile& f) {
  const std::set<std::string> dims = dims_keys(f);
  std::ostringstream os;
  os << "group,shape,op,dtype,kernel,backend,mode,l2,status,reason,gate_passed,max_abs,rel_l2,max_row_rel,atol,rtol,rows_checked,"
        "median_us,min_us,q1_us,q3_us,mean_us,stdev_us,n,rounds,round_spread,settled,unsettled,throttled,device_median_us,flops,"
        "bytes,tflops,gbps,pct_peak_flops,pct_peak_bw,plan,knobs,repro,plugin,plugin_sha256,"
        "peer,peer_ratio";
  for (const std::string& k : dims) os << ",dims." << k;
  os << '\n';
  for (const auto& r : f.rows) {
    std::string knobs;
    for (const auto& [k, v] : r.knobs) knobs += (knobs.empty() ? "" : ";") + k + "=" + v;
    os << csv_field(r.group) << ',' << csv_field(r.shape) << ',' << r.op << ',' << r.dtype << ','
       << csv_field(r.kernel) << ',' << r.backend << ',' << r.mode << ',' << r.l2 << ',' << r.status << ','
       << csv_field(r.reason) << ',';
    if (r.gate)
      os << (r.gate->passed ? "true" : "false") << ',' << num(r.gate->max_abs) << ',' << num(r.gate->rel_l2) << ','
         << num(r.gate->max_row_rel) << ',' << num(r.gate->atol) << ',' << num(r.gate->rtol) << ','
         << r.gate->rows_checked << ',';
    else
      os << ",,,,,,,";
    if (r.time_us)
      os << num(r.time_us->median) << ',' << num(r.time_us->min) << ',' << num(r.time_us->q1) << ','
         << num(r.time_us->q3) << ',' << num(r.time_us->mean) << ',' << num(r.time_us->stdev) << ','
         << r.time_us->n << ',';
    else
      os << ",,,,,,,";
    if (r.rounds) os << r.rounds->count << ',' << num(r.rounds->spread) << ',';
    else os << ",,";
    std::string throttled;
    for (const auto& t : r.throttled) throttled += (throttled.empty() ? "" : ";") + t;
    os << (r.settled ? (*r.settled ? "true" : "false") : "") << ',' << csv_field(r.unsettled) << ','
       << csv_field(throttled) << ',';
    os << (r.device_time_us ? num(r.device_time_us->median) : "") << ',' << num(r.flops) << ',' << num(r.bytes)
       << ',' << (r.tflops ? num(*r.tflops) : "") << ',' << (r.gbps ? num(*r.gbps) : "") << ','
       << (r.pct_peak_flops ? num(*r.pct_peak_flops) : "") << ',' << (r.pct_peak_bw ? num(*r.pct_peak_bw) : "")
       << ',' << csv_field(r.plan) << ',' << csv_field(knobs) << ',' << csv_field(r.repro) << ','
       << csv_field(r.plugin) << ',' << r.plugin_sha256 << ','
       << (r.vs_peer ? csv_field(r.vs_peer->kernel) + ',' + num(r.vs_peer->ratio) : std::string(","));
    for (const std::string& k : dims) os << ',' << (r.dims.is_object() && r.dims.contains(k) ? dims_cell(r.dims[k]) : "");
    os << '\n';
  }
  return os.str();
}

void check_writable(const std::string& path) {
  const fs::path p(path);
  if (fs::is_directory(p)) throw UsageError(path + ": is a directory, expected a file path");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir)) throw UsageError(path + ": folder " + dir.string() + " does not exist");
  const fs::path probe = dir / (".attnbench-probe-" + std::to_string(::getpid()));
  {
    std::ofstream f(probe);
    if (!f) throw UsageError(path + ": cannot write in folder " + dir.string());
  }
  fs::remove(probe);
}

ResultPaths result_paths(const std::string& json_path, const std::string& csv_path, const OutputGuard& guard) {
  ResultPaths r{json_path, csv_path.empty() ? fs::path(json_path).replace_extension(".csv").string() : csv_path};
  if (fs::path(r.json).lexically_normal() == fs::path(r.csv).lexically_normal())
    throw UsageError("--out and --csv name the same file (" + r.json + "): give the JSON results a .json path");
  check_output_path(r.json, "--out", OutputKind::results_json, guard);
  check_output_path(r.csv, "--csv", OutputKind::results_csv, guard);
  check_writable(r.json);
  check_writable(r.csv);
  return r;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const fs::path tmp = dir / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw UsageError(path + ": cannot write (folder " + dir.string() + ")");
    f << text;
    f.flush();
    if (!f) {
      f.close();
      fs::remove(tmp);
      throw UsageError(path + ": write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp);
    throw UsageError(path + ": cannot rename into place: " + ec.message());
  }
}

json read_results_json(const std::string& path) {
  json j = read_json_file(path, "results file");
  if (!j.is_object() || !j.contains("schema") || j["schema"] != kResultsSchema)
    throw UsageError(path + ": not an attnbench results file (field 'schema' must be \"" + std::string(kResultsSchema) + "\")");
  if (j.contains("provenance") && !j["provenance"].is_object())
    throw UsageError(path + ": field 'provenance': expected an object, got " + compact_value(j["provenance"].dump()));
  if (!j.contains("rows") || !j["rows"].is_array()) throw UsageError(path + ": field 'rows': expected a list");
  const json& rows = j["rows"];
  for (size_t i = 0; i < rows.size(); ++i)
    if (!rows[i].is_object())
      throw UsageError(path + ": field 'rows': row #" + std::to_string(i) + ": expected an object, got " +
                       compact_value(rows[i].dump()));
  return j;
}

}  // namespace attnbench
