#include "results/output_guard.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"

namespace fs = std::filesystem;

namespace attnbench {

namespace {

const char* kind_of(const fs::file_status& st) {
  switch (st.type()) {
    case fs::file_type::directory: return "a folder";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

// The command line after its first word (the program's path, which differs between build folders), without the
// flags that do not change what it writes: --resume (the same run, finished) and --force.
std::string arguments_of(const std::string& command) {
  std::string out;
  std::size_t at = command.find(' ');
  while (at != std::string::npos && at < command.size()) {
    const std::size_t from = at + 1, to = command.find(' ', from);
    const std::string word = command.substr(from, to == std::string::npos ? std::string::npos : to - from);
    if (word != "--resume" && word != "--force" && !word.empty()) out += (out.empty() ? "" : " ") + word;
    at = to;
  }
  return out;
}

// Why the existing regular file at `path` is not one this command may replace ("" when it is).
std::string not_ours(const std::string& path, OutputKind kind, const OutputGuard& g) {
  std::ifstream f(path, std::ios::binary);
  if (kind == OutputKind::results_csv) {
    std::string header;
    std::getline(f, header);
    return header.rfind("group,shape,op,dtype,kernel,", 0) == 0 ? "" : "it is not an attnbench results CSV";
  }
  const nlohmann::json doc = nlohmann::json::parse(f, nullptr, false);
  if (!doc.is_object()) return "it is not an attnbench file";
  const std::string schema = doc.value("schema", "");
  if (kind == OutputKind::compare_json)
    return schema == "attnbench.compare/1" ? "" : "it is not an attnbench comparison";
  if (schema != "attnbench.results/1") return "it is not an attnbench results file";
  const auto& p = doc.contains("provenance") && doc["provenance"].is_object() ? doc["provenance"] : nlohmann::json();
  const std::string command = p.is_object() ? p.value("command", "") : "";
  if (arguments_of(command) == arguments_of(g.command)) return "";
  return "it holds the results of another command ('" + command + "')";
}

}  // namespace

void check_output_path(const std::string& path, const char* flag, OutputKind kind, const OutputGuard& g) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return;  // a new file (the folder is check_writable's)
  if (!fs::is_regular_file(st))
    throw UsageError(std::string(flag) + " " + path + ": " + kind_of(st) + "; results are written to regular files only");
  for (const std::string& in : g.inputs)
    if (fs::equivalent(path, in, ec))
      throw UsageError(std::string(flag) + " " + path + ": it is an input of this command; write the results elsewhere");
  if (g.force || (g.journal_decides && kind != OutputKind::compare_json)) return;
  if (const std::string why = not_ours(path, kind, g); !why.empty())
    throw UsageError(std::string(flag) + " " + path + ": exists and " + why + ": --force replaces it, or give another path");
}

}  // namespace attnbench
