#include "compare/merge.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "core/errors.hpp"
#include "results/peer_ratio.hpp"

using nlohmann::json;

namespace attnbench {

namespace {
// The fields that must agree, as printable values; an absent field reads "(none)".
std::map<std::string, std::string> identity(const json& prov) {
  auto str = [](const json& v) { return v.is_null() ? std::string("(none)") : v.is_string() ? v.get<std::string>() : v.dump(); };
  json device = nullptr;
  if (prov.contains("device") && prov["device"].is_object()) {
    const json& d = prov["device"];
    device = d.contains("device") ? d["device"] : d.contains("name") ? d["name"] : json(nullptr);
  }
  return {{"git_sha", str(prov.value("git_sha", json(nullptr)))},
          {"device", str(device)},
          {"seed", str(prov.value("seed", json(nullptr)))}};
}

std::string row_key(const json& r) {
  json k = json::array();
  for (const char* f : {"group", "shape", "dtype", "kernel", "mode", "l2", "knobs"}) k.push_back(r.value(f, json(nullptr)));
  return k.dump();
}

// A row's fields that the peer summary reads, when it carries a peer ratio; the error names the file and row.
std::optional<ResultRow> peer_view(const json& r, const std::string& path, size_t index) {
  ResultRow v;
  try {
    v.vs_peer = vs_peer_from_json(r);
  } catch (const UsageError& e) {
    throw UsageError(path + ": row #" + std::to_string(index) + ": " + e.what());
  }
  if (!v.vs_peer) return std::nullopt;
  for (auto [field, dst] : {std::pair{"group", &v.group}, {"shape", &v.shape}, {"dtype", &v.dtype},
                            {"kernel", &v.kernel}, {"mode", &v.mode}})
    *dst = r.value(field, "");
  return v;
}

struct MergeState {
  MergeResult m;
  json rows = json::array(), sources = json::array();
  std::vector<ResultRow> peer_rows;  // the rows with a peer ratio: the merged file's summary
  json first_prov;
  std::map<std::string, std::string> first_id;
  std::map<std::string, size_t> key_file;  // row key -> index of the first file holding it
};

void add_file(const json& doc, const std::vector<std::string>& paths, size_t i, MergeState& st) {
  const json prov = doc.value("provenance", json::object());
  const auto id = identity(prov);
  if (i == 0) {
    st.first_prov = prov;
    st.first_id = id;
  } else {
    for (const auto& [field, value] : id)
      if (value != st.first_id[field])
        throw UsageError("merge: provenance field '" + field + "' differs: " + paths[0] + " has '" +
                         st.first_id[field] + "', " + paths[i] + " has '" + value + "'");
  }
  const json& rows = doc["rows"];
  for (size_t k = 0; k < rows.size(); ++k) {
    const json& r = rows[k];
    auto [it, fresh] = st.key_file.emplace(row_key(r), i);
    if (!fresh && it->second != i) ++st.m.duplicate_rows;
    if (auto v = peer_view(r, paths[i], k)) st.peer_rows.push_back(std::move(*v));
    try {
      st.m.table.rows.push_back(row_from_json(r));
    } catch (const UsageError& e) {
      throw UsageError(paths[i] + ": row #" + std::to_string(k) + ": " + e.what());
    }
    st.rows.push_back(r);
  }
  const std::string host = prov.value("host", json("(none)")).is_string() ? prov.value("host", "(none)") : "(none)";
  if (std::find(st.m.hosts.begin(), st.m.hosts.end(), host) == st.m.hosts.end()) st.m.hosts.push_back(host);
  st.sources.push_back({{"file", paths[i]},
                        {"command", prov.value("command", json(nullptr))},
                        {"timestamp", prov.value("timestamp", json(nullptr))},
                        {"host", prov.value("host", json(nullptr))},
                        {"rows", doc["rows"].size()}});
}
}  // namespace

MergeResult merge_result_files(const std::vector<std::string>& paths, const std::string& command_line) {
  if (paths.empty()) throw UsageError("merge: give the result files to join");
  MergeState st;
  for (size_t i = 0; i < paths.size(); ++i) {
    const json doc = read_results_json(paths[i]);  // provenance an object, rows a list of objects
    try {
      add_file(doc, paths, i, st);
    } catch (const json::exception& e) {  // a field of a type merge did not expect
      throw UsageError(paths[i] + ": " + e.what());
    }
  }
  json prov = st.first_prov;
  prov["command"] = command_line;
  prov["merged_from"] = st.sources;
  prov["hosts"] = st.m.hosts;
  prov.erase("peers");  // the first file's summary covers its own rows only
  if (json peers = peer_summary(st.peer_rows); !peers.empty()) prov["peers"] = std::move(peers);
  st.m.table.provenance = prov;
  st.m.doc = {{"schema", kResultsSchema}, {"provenance", prov}, {"rows", st.rows}};
  return st.m;
}

}  // namespace attnbench
