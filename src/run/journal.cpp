#include "run/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/errors.hpp"
#include "core/json_file.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace attnbench {

std::string journal_path(const std::string& out) { return out + ".partial.jsonl"; }

std::vector<std::string> journal_command(const std::vector<std::string>& args) {
  static const std::set<std::string> flags = {"--resume", "--no-progress"};
  static const std::set<std::string> with_value = {"--isolate", "--case-timeout"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string name = a.substr(0, a.find('='));
    if (flags.count(a)) continue;
    if (with_value.count(name)) {
      if (name == a) ++i;  // "--isolate case": the value is the next argument
      continue;
    }
    out.push_back(a);
  }
  return out;
}

namespace {
json header_json(const JournalHeader& h) {
  return {{"journal", kJournalSchema}, {"command", h.command}, {"binary_sha256", h.binary_sha256},
          {"plugins", h.plugins},     {"seed", h.seed},           {"cases", h.cases}};
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Where two commands part, so a long command's one changed value (a re-measured peak, say) need not be hunted for.
std::string first_difference(const std::vector<std::string>& was, const std::vector<std::string>& now) {
  std::size_t i = 0;
  while (i < was.size() && i < now.size() && was[i] == now[i]) ++i;
  const auto at = [i](const std::vector<std::string>& v) { return i < v.size() ? "'" + v[i] + "'" : "nothing"; };
  return "argument " + std::to_string(i + 1) + ": the journal's " + at(was) + ", this run's " + at(now);
}

std::string case_text(const JournalCase& c) {
  std::string s;
  for (const auto& [row, setting] : c.rows)
    s += json{{"case", c.index}, {"setting", setting}, {"row", row_to_json(row)}}.dump() + "\n";
  s += json{{"case_done", c.index}, {"key", c.key}, {"rows", c.rows.size()}}.dump() + "\n";
  return s;
}

// exclusive: a new file (EEXIST names the unfinished run); else an existing one, appended to.
int open_for_append(const std::string& path, bool exclusive) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (exclusive ? O_EXCL : 0), 0644);
  if (fd < 0 && errno == EEXIST)
    throw UsageError(path + ": the journal of an unfinished run is there: --resume continues it (or remove it to "
                     "start again)");
  if (fd < 0) throw UsageError(path + ": cannot write the journal: " + std::strerror(errno));
  return fd;
}
}  // namespace

std::map<std::size_t, JournalCase> parse_journal(const std::string& text, const std::string& path, json* header) {
  std::map<std::size_t, JournalCase> done;
  std::map<std::size_t, JournalCase> pending;
  std::istringstream in(text);
  std::string line;
  std::size_t n = 0;
  bool have_header = false;
  while (std::getline(in, line)) {
    ++n;
    const bool last = in.peek() == EOF;
    json j;
    try {
      j = json::parse(line);
      if (!j.is_object()) throw UsageError("not an object");
    } catch (const std::exception&) {
      if (last && have_header) break;  // a torn last line: the write a kill cut short
      throw UsageError(path + ": line " + std::to_string(n) + ": malformed journal line: " + compact_value(line));
    }
    if (!have_header) {
      if (j.value("journal", json()) != kJournalSchema)
        throw UsageError(path + ": not an attnbench journal (its first line must have \"journal\": \"" +
                         std::string(kJournalSchema) + "\")");
      if (header) *header = j;
      have_header = true;
      continue;
    }
    const std::string where = path + ": line " + std::to_string(n) + ": ";
    try {
      if (j.contains("case_done")) {
        const std::size_t i = j.at("case_done").get<std::size_t>();
        JournalCase c = std::move(pending[i]);
        pending.erase(i);
        if (c.rows.size() != j.at("rows").get<std::size_t>()) continue;  // an unfinished case: dropped
        c.index = i;
        c.key = j.at("key").get<std::string>();
        done[i] = std::move(c);
      } else {
        const std::size_t i = j.at("case").get<std::size_t>();
        pending[i].rows.emplace_back(row_from_json(j.at("row")), j.at("setting").get<std::string>());
      }
    } catch (const UsageError& e) {
      throw UsageError(where + e.what());
    } catch (const json::exception& e) {
      throw UsageError(where + "malformed journal line: " + e.what());
    }
  }
  if (!have_header) throw UsageError(path + ": not an attnbench journal (empty)");
  return done;
}

Journal Journal::create(const std::string& path, const JournalHeader& header) {
  Journal j(path, open_for_append(path, true));
  j.write_all(header_json(header).dump() + "\n");
  return j;
}

Journal Journal::resume(const std::string& path, const JournalHeader& header, const std::vector<std::string>& keys,
                        std::map<std::size_t, JournalCase>* finished) {
  if (!fs::exists(path)) throw UsageError(path + ": no journal to resume (--resume continues an interrupted run)");
  std::string text;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UsageError(path + ": cannot read the journal");
    std::ostringstream os;
    os << f.rdbuf();
    text = os.str();
  }
  json h;
  std::map<std::size_t, JournalCase> done = parse_journal(text, path, &h);
  const auto differs = [&](const char* field, const std::string& was, const std::string& now) {
    return UsageError(path + ": cannot resume: field '" + field + "' differs: the journal's is '" +
                      compact_value(was) + "', this run's '" + compact_value(now) + "'");
  };
  const auto text_of = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  if (h.value("binary_sha256", json()) != header.binary_sha256)
    throw differs("binary_sha256", text_of(h.value("binary_sha256", json())), header.binary_sha256);
  // A plugin rebuilt between the two runs would mix two kernels' rows under one name.
  if (h.value("plugins", json::array()) != header.plugins)
    throw differs("plugins", text_of(h.value("plugins", json::array())), header.plugins.dump());
  if (h.value("seed", json()) != header.seed)
    throw differs("seed", text_of(h.value("seed", json())), std::to_string(header.seed));
  if (h.value("command", json()) != json(header.command)) {
    const json c = h.value("command", json());
    std::string was = c.dump(), where;
    if (c.is_array() && std::all_of(c.begin(), c.end(), [](const json& a) { return a.is_string(); })) {
      const auto args = c.get<std::vector<std::string>>();
      was = join(args);
      where = " (first at " + first_difference(args, header.command) + ")";
    }
    throw UsageError(path + ": cannot resume: field 'command' differs" + where + ": the journal's is '" + was +
                     "', this run's '" + join(header.command) + "'");
  }
  if (h.value("cases", json()) != header.cases)
    throw differs("cases", text_of(h.value("cases", json())), std::to_string(header.cases));
  for (const auto& [i, c] : done)
    if (i >= keys.size() || keys[i] != c.key)
      throw UsageError(path + ": cannot resume: the journal's case " + std::to_string(i + 1) + " is " + c.key +
                       ", the selection's is " + (i < keys.size() ? keys[i] : std::string("none")) +
                       " (did a shape file change?)");
  // The finished cases alone, through a temporary file and a rename, then appended to.
  std::string kept = header_json(header).dump() + "\n";
  for (const auto& [i, c] : done) kept += case_text(c);
  write_file_atomic(path, kept);
  *finished = std::move(done);
  return Journal(path, open_for_append(path, false));
}

Journal::Journal(Journal&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

void Journal::write_all(const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(path_ + ": writing the journal failed: " + std::strerror(errno));
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::fdatasync(fd_);
}

void Journal::append(const JournalCase& c) { write_all(case_text(c)); }

}  // namespace attnbench
