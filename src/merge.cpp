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

struct MergeState {
  MergeResult m;
  json rows = json::array(), sources = json::array();
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
  for (const auto& r : doc["rows"]) {
    auto [it, fresh] = st.key_file.emplace(row_key(r), i);
    if (!fresh && it->second != i) ++st.m.duplicate_rows;
    st.rows.push_back(r);
  }
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
  st.m.doc = {{"schema", kResultsSchema}, {"provenance", prov}, {"rows", st.rows}};
  return st.m;
}

}  // namespace attnbench
