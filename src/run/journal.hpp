// The journal of a run: <out>.partial.jsonl, one JSON line per finished row, appended and flushed as each case
// finishes, so that nothing finished is lost to a crash, a kill or Ctrl-C; `--resume` continues from it.
//   {"journal": "attnbench.journal/1", "command": [args], "binary_sha256": "...", "plugins": [...], "seed": N,
//    "cases": N}
//   {"case": i, "setting": "S1", "row": {...}}              one per row of case i (setting: "" in a run)
//   {"case_done": i, "key": "group/shape/dtype", "rows": n}  after the rows of case i
// A case counts as finished only with its case_done line; rows of an unfinished case are dropped on resume, and
// a torn last line (a kill during a write) is ignored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "results/results.hpp"

namespace attnbench {

inline constexpr const char* kJournalSchema = "attnbench.journal/1";

// The journal of results file `out`.
std::string journal_path(const std::string& out);

// What a resumed run must share with the run that wrote the journal.
struct JournalHeader {
  std::vector<std::string> command;  // the arguments, less those that do not change results (journal_command)
  std::string binary_sha256;
  nlohmann::json plugins = nlohmann::json::array();  // plugins_json(): each plugin file's path and sha256
  uint64_t seed = 0;
  std::size_t cases = 0;
};

// The arguments of a command line as the journal compares them: argv[1..] without --resume, --isolate,
// --case-timeout and --no-progress (how a run is carried out, not what it produces).
std::vector<std::string> journal_command(const std::vector<std::string>& args);

// A finished case: its rows with their sweep setting labels.
struct JournalCase {
  std::size_t index = 0;
  std::string key;
  std::vector<std::pair<ResultRow, std::string>> rows;
};

class Journal {
 public:
  // A new journal. UsageError when the file exists (an unfinished run's journal: --resume continues it, or it
  // must be removed first) or cannot be written.
  static Journal create(const std::string& path, const JournalHeader& header);
  // An existing journal: its header checked against `header` (UsageError naming the field that differs:
  // binary_sha256, plugins, seed, command, cases), each finished case's key against keys[index]; the file is
  // rewritten to hold the finished cases only, ready for appending.
  static Journal resume(const std::string& path, const JournalHeader& header, const std::vector<std::string>& keys,
                        std::map<std::size_t, JournalCase>* finished);
  Journal(Journal&& o) noexcept;
  Journal& operator=(Journal&&) = delete;
  ~Journal();

  // The case's rows, then its case_done line; written and flushed to the file (fdatasync) before it returns.
  void append(const JournalCase& c);
  const std::string& path() const { return path_; }

 private:
  Journal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  void write_all(const std::string& text);
  std::string path_;
  int fd_ = -1;
};

// The finished cases of a journal's text (the parser behind Journal::resume, for tests and fuzzing); UsageError
// for a missing or malformed header or a malformed line before the last.
std::map<std::size_t, JournalCase> parse_journal(const std::string& text, const std::string& path,
                                                 nlohmann::json* header);

}  // namespace attnbench
