// The journal: rows appended as cases finish, SIGINT/SIGTERM writing what is done, --resume finishing the run
// with the same rows an uninterrupted run writes, and the refusals that keep a resume honest.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_helpers.hpp"
#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "results/results.hpp"
#include "run/journal.hpp"
#include "temp_dir.hpp"

extern char** environ;

namespace fs = std::filesystem;
using testcli::contains;
using testcli::read_json;
using testcli::run_cli;
using testcli::tmp_path;

namespace {

const char* kShapes = R"({"group": "jt", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64, "block_size": 16,
  "dtypes": ["bf16", "fp16"]},
  "shapes": [{"name": "a", "seqlens": [[3, 40], [17, 17]]}, {"name": "b", "batch": 3, "seqlen_q": 1, "seqlen_k": 70},
             {"name": "c", "batch": 2, "seqlen_q": 1, "seqlen_k": 33}, {"name": "d", "batch": 1, "seqlen_k": 24}]})";

// Timing that never settles, so each case takes its whole timeout (0.4 s over 5 rounds): slow enough to stop mid-way.
std::string slow_args(const std::string& shapes, const std::string& out) {
  return "run --shapes " + shapes + " --backend cpu --mode eager --min-samples 1000000 --timeout 0.4 --no-progress -o " +
         out;
}

std::string text_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int finished_cases(const std::string& journal) {
  std::ifstream f(journal);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) n += contains(line, "\"case_done\"");
  return n;
}

// Starts the binary in the background (its output to `log`), returns its pid.
pid_t spawn_cli(const std::string& args, const std::string& log) {
  const std::string cmd = "cd '" + testtmp::dir().string() +
                          "' && exec " ATTNBENCH_BINARY " " + args + " > " + log + " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  return pid;
}

// Sends `sig` once the journal holds `cases` finished cases; the exit status.
int interrupt_after(pid_t pid, const std::string& journal, int cases, int sig) {
  if (pid <= 0) return -1;  // not started (spawn_cli failed the test): kill(-1, ...) would signal every process
  const auto t0 = std::chrono::steady_clock::now();
  while (finished_cases(journal) < cases && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The fields two runs of the same cases must share row for row (timings aside).
nlohmann::json comparable(const nlohmann::json& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json gate = r["gate"];
    if (gate.is_object()) gate.erase("reference_ms");  // the reference's wall time
    out.push_back({r["group"], r["shape"], r["dtype"], r["kernel"], r["mode"], r["status"], r["reason"], gate,
                   r["dims"], r["repro"]});
  }
  return out;
}

}  // namespace

TEST(Journal, InterruptedRunResumesToTheRowsOfAnUninterruptedOne) {
  const std::string shapes = testcli::write_text("jt_shapes.json", kShapes);
  const std::string whole = tmp_path("jt_whole.json"), part = tmp_path("jt_part.json");
  const auto w = run_cli(slow_args(shapes, whole));
  ASSERT_EQ(w.code, 0) << w.output;
  EXPECT_FALSE(fs::exists(attnbench::journal_path(whole)));

  const std::string journal = attnbench::journal_path(part);
  const int code = interrupt_after(spawn_cli(slow_args(shapes, part), tmp_path("jt_log.txt")), journal, 3, SIGINT);
  const std::string log = text_of(tmp_path("jt_log.txt"));
  ASSERT_EQ(code, 130) << log;
  EXPECT_TRUE(contains(log, "interrupted by SIGINT after")) << log;
  EXPECT_TRUE(contains(log, "--resume")) << log;
  ASSERT_TRUE(fs::exists(journal)) << "an interrupt removes nothing";
  const auto cut = read_json(part);
  EXPECT_EQ(cut["provenance"]["interrupted"], true);
  EXPECT_EQ(cut["provenance"]["interrupted_by"], "SIGINT");
  const int done = cut["provenance"]["cases"]["done"];
  EXPECT_GE(done, 3);
  EXPECT_LT(done, 8) << "the run should have been stopped mid-way";
  EXPECT_EQ(cut["rows"].size(), static_cast<size_t>(done));

  const auto r = run_cli(slow_args(shapes, part) + " --resume");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(journal)) << "a finished run removes its journal";
  const auto resumed = read_json(part);
  EXPECT_FALSE(resumed["provenance"].contains("interrupted"));
  EXPECT_EQ(resumed["provenance"]["resumed"]["cases"], done);
  ASSERT_EQ(resumed["rows"].size(), 8u);
  EXPECT_EQ(comparable(resumed["rows"]), comparable(read_json(whole)["rows"]));
  // The rows the first run finished are kept as they were, timings included.
  for (int i = 0; i < done; ++i) EXPECT_EQ(resumed["rows"][i], cut["rows"][i]) << i;
  for (const auto& row : resumed["rows"]) EXPECT_EQ(row["status"], "ok") << row.dump();
}

TEST(Journal, SigtermWritesWhatIsDoneAndExits143) {
  const std::string shapes = testcli::write_text("jt_shapes.json", kShapes);
  const std::string part = tmp_path("jt_term.json");
  const int code = interrupt_after(spawn_cli(slow_args(shapes, part), tmp_path("jt_term_log.txt")),
                                   attnbench::journal_path(part), 1, SIGTERM);
  ASSERT_EQ(code, 143) << text_of(tmp_path("jt_term_log.txt"));
  EXPECT_EQ(read_json(part)["provenance"]["interrupted_by"], "SIGTERM");
  EXPECT_TRUE(fs::exists(attnbench::journal_path(part)));
}

// stdout's reader gone (`run ... | head -1`): the run stops as an interrupted one at its next check point, writes
// what is done, keeps the journal and exits 141 (128 + SIGPIPE); --resume then finishes it.
TEST(Journal, AClosedPipeEndsTheRunAsInterruptedAndExits141) {
  const std::string shapes = testcli::write_text("jt_shapes.json", kShapes);
  const std::string part = tmp_path("jt_pipe.json"), rc = tmp_path("jt_pipe_rc.txt");
  const auto r = testcli::shell("cd '" + testtmp::dir().string() + "' && ( " ATTNBENCH_BINARY " " +
                                slow_args(shapes, part) + " 2>/dev/null; echo $? > " + rc + " ) | head -n 1 > /dev/null");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(text_of(rc), "141\n");
  const auto doc = read_json(part);
  EXPECT_EQ(doc["provenance"]["interrupted_by"], "SIGPIPE");
  EXPECT_LT(doc["rows"].size(), 8u);  // 4 shapes x 2 dtypes, eager
  EXPECT_TRUE(fs::exists(attnbench::journal_path(part)));
  const auto resumed = run_cli(slow_args(shapes, part) + " --resume");
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(read_json(part)["rows"].size(), 8u);
}

TEST(Journal, ResumeRefusesAnotherCommandSeedOrBinaryNamingTheField) {
  const std::string shapes = testcli::write_text("jt_shapes.json", kShapes);
  const std::string out = tmp_path("jt_refuse.json");
  const std::string journal = attnbench::journal_path(out);
  const int code = interrupt_after(spawn_cli(slow_args(shapes, out), tmp_path("jt_refuse_log.txt")), journal, 1, SIGINT);
  ASSERT_EQ(code, 130);
  const std::string kept = text_of(journal);

  auto r = run_cli(slow_args(shapes, out));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "unfinished run") && contains(r.output, "--resume")) << r.output;
  r = run_cli(slow_args(shapes, out) + " --seed 7 --resume");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "field 'seed' differs")) << r.output;
  r = run_cli(slow_args(shapes, out) + " --rounds 4 --resume");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "field 'command' differs (first at argument ")) << r.output;
  EXPECT_TRUE(contains(r.output, ": the journal's nothing, this run's '--rounds')")) << r.output;
  std::string other = kept;
  const auto at = other.find(attnbench::sha256_file(ATTNBENCH_BINARY));
  ASSERT_NE(at, std::string::npos) << "the journal records the binary's sha256";
  other.replace(at, 8, "00000000");
  std::ofstream(journal) << other;
  r = run_cli(slow_args(shapes, out) + " --resume");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "field 'binary_sha256' differs")) << r.output;
  EXPECT_EQ(text_of(journal), other) << "a refused resume leaves the journal alone";
  // How the run is carried out may change: --no-progress, --isolate and --case-timeout are not compared.
  std::ofstream(journal) << kept;
  r = run_cli(slow_args(shapes, out) + " --resume");
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(Journal, ResumeWithoutAJournalIsAUsageError) {
  const std::string shapes = testcli::write_text("jt_shapes.json", kShapes);
  const auto r = run_cli(slow_args(shapes, tmp_path("jt_none.json")) + " --resume");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "no journal to resume")) << r.output;
}

TEST(Journal, UnfinishedCasesAndATornLastLineAreDropped) {
  attnbench::ResultRow row;
  row.group = "g";
  row.shape = "s";
  row.op = "attention";
  row.dtype = "bf16";
  row.kernel = "k";
  row.backend = "cpu";
  row.mode = "eager";
  row.status = "ok";
  const std::string line = nlohmann::json{{"case", 0}, {"setting", ""}, {"row", attnbench::row_to_json(row)}}.dump();
  const std::string head = R"({"journal": "attnbench.journal/1", "command": [], "binary_sha256": "x", "seed": 1, "cases": 3})";
  const std::string text = head + "\n" + line + "\n" + R"({"case_done": 0, "key": "g/s/bf16", "rows": 1})" + "\n" +
                           R"({"case": 1, "setting": "", "row": )" + attnbench::row_to_json(row).dump() + "}\n" +
                           R"({"case": 2, "setting": "", "ro)";
  const auto done = attnbench::parse_journal(text, "j", nullptr);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done.at(0).key, "g/s/bf16");
  ASSERT_EQ(done.at(0).rows.size(), 1u);
  EXPECT_EQ(attnbench::row_to_json(done.at(0).rows[0].first), attnbench::row_to_json(row));
  EXPECT_THROW(attnbench::parse_journal("not json\n" + line + "\n", "j", nullptr), attnbench::UsageError);
  EXPECT_THROW(attnbench::parse_journal(head + "\nnot json\n" + line + "\n", "j", nullptr), attnbench::UsageError);
}

TEST(Journal, RowsReadBackAreTheRowsWritten) {
  const std::string shapes = testcli::write_text("jt_shapes.json", kShapes);
  const std::string out = tmp_path("jt_rt.json");
  const auto r = run_cli("run --shapes " + shapes + " --backend cpu --mode eager,graph --min-samples 3 --no-progress -o " + out);
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.output;
  const auto rows = read_json(out)["rows"];
  ASSERT_FALSE(rows.empty());
  for (const auto& j : rows) EXPECT_EQ(attnbench::row_to_json(attnbench::row_from_json(j)), j) << j.dump();
  // An inf in the gate survives too.
  nlohmann::json g = rows[0];
  if (g["gate"].is_object()) {
    g["gate"]["max_abs"] = "inf";
    EXPECT_EQ(attnbench::row_to_json(attnbench::row_from_json(g)), g);
  }
  EXPECT_THROW(attnbench::row_from_json(nlohmann::json{{"group", 1}}), attnbench::UsageError);
}
