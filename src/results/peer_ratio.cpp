#include "results/peer_ratio.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "cases/registry.hpp"
#include "results/control_pair.hpp"

using nlohmann::json;

namespace attnbench {

namespace {
bool timed(const ResultRow& r) { return r.status == "ok" && r.time_us && r.time_us->median > 0; }
bool is_control(const ResultRow& r) { return !control_of(r.kernel).empty(); }
bool is_peer_row(const ResultRow& r) { return !is_control(r) && is_peer_kernel(r.kernel); }
// Knobs included: in a sweep each setting's rows compare with that setting's peer row.
std::string case_mode_key(const ResultRow& r) {
  std::string knobs;
  for (const auto& [k, v] : r.knobs) knobs += k + '=' + v + ';';
  return r.group + '\x1f' + r.shape + '\x1f' + r.dtype + '\x1f' + r.mode + '\x1f' + r.l2 + '\x1f' + knobs;
}

// One (peer, kernel, mode) of the summary, as its rows come.
struct Tally {
  std::string peer, kernel, mode;
  int rows = 0, faster = 0;
  double log_sum = 0, worst = std::numeric_limits<double>::infinity();
  std::string worst_case;
};

// The tally of r's (peer, kernel, mode), made at its first row.
Tally& tally_for(std::vector<Tally>& tallies, const ResultRow& r) {
  for (Tally& t : tallies)
    if (t.peer == r.vs_peer->kernel && t.kernel == r.kernel && t.mode == r.mode) return t;
  Tally& t = tallies.emplace_back();
  t.peer = r.vs_peer->kernel;
  t.kernel = r.kernel;
  t.mode = r.mode;
  return t;
}

void add(Tally& t, const ResultRow& r) {
  const double x = r.vs_peer->ratio;
  ++t.rows;
  t.faster += x > 1;
  t.log_sum += std::log(x);
  if (x >= t.worst) return;
  t.worst = x;
  t.worst_case = r.group + "/" + r.shape + "/" + r.dtype;
}
}  // namespace

void set_peer_ratios(std::vector<ResultRow>& rows) {
  std::map<std::string, const ResultRow*> peer;  // the first peer row of each case and mode, whatever its status
  for (const auto& r : rows)
    if (is_peer_row(r)) peer.emplace(case_mode_key(r), &r);
  for (auto& r : rows) {
    r.vs_peer.reset();
    const auto it = peer.find(case_mode_key(r));
    if (it == peer.end() || it->second == &r || is_control(r)) continue;
    const ResultRow& p = *it->second;
    if (timed(p) && timed(r)) r.vs_peer = PeerRatio{p.kernel, p.time_us->median / r.time_us->median};
  }
}

json peer_summary(const std::vector<ResultRow>& rows) {
  std::vector<Tally> tallies;
  for (const auto& r : rows)
    if (r.vs_peer) add(tally_for(tallies, r), r);
  json out = json::array();
  for (const Tally& t : tallies)
    out.push_back({{"peer", t.peer},       {"kernel", t.kernel},          {"mode", t.mode},
                   {"rows", t.rows},       {"faster", t.faster},          {"geomean", std::exp(t.log_sum / t.rows)},
                   {"worst_ratio", t.worst}, {"worst_case", t.worst_case}});
  return out;
}

std::vector<std::string> peer_summary_lines(const json& summary) {
  std::vector<std::string> lines;
  for (const auto& e : summary) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "vs %s (%s): %s faster on %d/%d rows, geomean %s, worst %s (%s)",
                  e["peer"].get<std::string>().c_str(), e["mode"].get<std::string>().c_str(),
                  e["kernel"].get<std::string>().c_str(), e["faster"].get<int>(), e["rows"].get<int>(),
                  ratio_text(e["geomean"].get<double>()).c_str(), ratio_text(e["worst_ratio"].get<double>()).c_str(),
                  e["worst_case"].get<std::string>().c_str());
    lines.push_back(buf);
  }
  return lines;
}

std::string ratio_text(double ratio) {
  char buf[32];
  const bool fixed = ratio >= 0.01 && ratio < 1000;  // two decimals read well here; outside they say 0.00 or widen
  std::snprintf(buf, sizeof buf, fixed ? "%.2fx" : "%.1ex", ratio);
  return buf;
}

}  // namespace attnbench
