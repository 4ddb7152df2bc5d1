#include "merge.hpp"

#include <map>

#include "errors.hpp"
#include "results.hpp"

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
}  // namespace

MergeResult merge_result_files(const std::vector<std::string>& paths, const std::string& command_line) {
  if (paths.empty()) throw UsageError("merge: give the result files to join");
  MergeResult m;
  json rows = json::array(), sources = json::array();
  json first_prov;
  std::map<std::string, std::string> first_id;
  std::map<std::string, size_t> key_file;  // row key -> index of the first file holding it
  for (size_t i = 0; i < paths.size(); ++i) {
    const json doc = read_results_json(paths[i]);
    const json prov = doc.value("provenance", json::object());
    const auto id = identity(prov);
    if (i == 0) {
      first_prov = prov;
      first_id = id;
    } else {
      for (const auto& [field, value] : id)
        if (value != first_id[field])
          throw UsageError("merge: provenance field '" + field + "' differs: " + paths[0] + " has '" + first_id[field] +
                           "', " + paths[i] + " has '" + value + "'");
    }
    for (const auto& r : doc["rows"]) {
      auto [it, fresh] = key_file.emplace(row_key(r), i);
      if (!fresh && it->second != i) ++m.duplicate_rows;
      rows.push_back(r);
    }
    sources.push_back({{"file", paths[i]},
                       {"command", prov.value("command", json(nullptr))},
                       {"timestamp", prov.value("timestamp", json(nullptr))},
                       {"host", prov.value("host", json(nullptr))},
                       {"rows", doc["rows"].size()}});
  }
  json prov = first_prov;
  prov["command"] = command_line;
  prov["merged_from"] = sources;
  m.doc = {{"schema", kResultsSchema}, {"provenance", prov}, {"rows", rows}};
  return m;
}

}  // namespace attnbench
