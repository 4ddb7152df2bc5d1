// -o / --csv / --json never replace what they must not: a device node, a folder or FIFO, one of the command's own
// inputs, or (without --force) a file that is not this command's earlier output. Refused before any work, exit 2,
// the file left as it was.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_helpers.hpp"

namespace fs = std::filesystem;
using namespace testcli;

namespace {

const char* kTiny = R"({"group": "og", "defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "dtypes": ["bf16"]},
  "shapes": [{"name": "a", "batch": 1, "seqlen_k": 20}]})";

std::string text_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string run_args(const std::string& shapes, const std::string& out) {
  return "run --shapes " + shapes + " --backend cpu --mode eager --gate-only -o " + out;
}

void expect_refused(const Result& r, const std::string& what, const std::string& why) {
  EXPECT_EQ(r.code, 2) << what << "\n" << r.output;
  EXPECT_TRUE(contains(r.output, why)) << what << ": '" << why << "' not in\n" << r.output;
}

}  // namespace

TEST(OutputGuard, DevicesFoldersAndFifosAreNeverWritten) {
  const std::string shapes = write_text("og.json", kTiny);
  expect_refused(run_cli(run_args(shapes, "/dev/null")), "-o /dev/null", "a character device");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  const std::string fifo = tmp_path("og_fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(run_cli(run_args(shapes, fifo)), "-o FIFO", "a FIFO");
  expect_refused(run_cli(run_args(shapes, tmp_path("og_ok.json")) + " --csv /dev/null"), "--csv /dev/null",
                 "--csv /dev/null: a character device");
}

TEST(OutputGuard, AnInputOfTheCommandIsNeverAnOutput) {
  const std::string shapes = write_text("og_in.json", kTiny);
  const std::string before = text_of(shapes);
  expect_refused(run_cli(run_args(shapes, shapes) + " --force"), "-o the shape file", "an input of this command");
  EXPECT_EQ(text_of(shapes), before);
  const std::string out = tmp_path("og_r.json");
  ASSERT_EQ(run_cli(run_args(shapes, out)).code, 0);
  expect_refused(run_cli("merge " + out + " -o " + out), "merge -o its input", "an input of this command");
  expect_refused(run_cli("compare " + out + " " + out + " --json " + out), "compare --json its input",
                 "an input of this command");
}

TEST(OutputGuard, OnlyThisCommandsOwnEarlierOutputIsReplacedWithoutForce) {
  const std::string shapes = write_text("og_own.json", kTiny), out = tmp_path("og_own_r.json");
  ASSERT_EQ(run_cli(run_args(shapes, out)).code, 0);
  EXPECT_EQ(run_cli(run_args(shapes, out)).code, 0);  // the same command again
  const std::string first = text_of(out);
  expect_refused(run_cli(run_args(shapes, out) + " --seed 7"), "another command's results",
                 "holds the results of another command");
  EXPECT_EQ(text_of(out), first);
  EXPECT_EQ(run_cli(run_args(shapes, out) + " --seed 7 --force").code, 0);
  const std::string notes = write_text("og_notes.json", "my notes\n");
  expect_refused(run_cli(run_args(shapes, notes)), "a file of something else", "it is not an attnbench file");
  EXPECT_EQ(text_of(notes), "my notes\n");
  const std::string csv = write_text("og_notes.csv", "a,b\n");
  expect_refused(run_cli(run_args(shapes, tmp_path("og_x.json")) + " --csv " + csv), "a CSV of something else",
                 "not an attnbench results CSV");
}
