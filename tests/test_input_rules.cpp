// The input rules that used to pass silently: nesting past the limit (a segfault once), a key given twice (the
// last value won), a softcap of 0 (dropped), a subnormal scale (replaced by the default), names that split table
// lines and ids, and --group taking a path. Each is a usage error (exit 2) naming the file, the place and the value,
// in every command that reads the file.
#include <gtest/gtest.h>

#include <string>

#include "cli_helpers.hpp"

using namespace testcli;

namespace {

void expect_usage(const Result& r, const std::string& what, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.code, 2) << what << "\n" << r.output;
  for (const auto& f : fragments) EXPECT_TRUE(contains(r.output, f)) << what << ": '" << f << "' not in\n" << r.output;
}

std::string shape_file(const std::string& name, const std::string& shape_fields, const std::string& top = "") {
  return write_text(name, R"({"group": "rules", )" + top + R"("shapes": [{"name": "a", "heads": 2, "kv_heads": 1,
    "head_size": 64, "seqlen_k": 32)" + shape_fields + "}]}");
}

}  // namespace

TEST(InputRules, DeepNestingIsAUsageErrorInEveryReader) {
  const std::string deep(100000, '['), close(100000, ']');
  const std::string shapes = write_text("deep_shapes.json", R"({"group": "deep", "shapes": )" + deep + close + "}");
  const std::string results = write_text("deep_results.json",
                                         R"({"schema": "attnbench.results/1", "provenance": {}, "rows": )" + deep + close + "}");
  const std::vector<std::string> why = {"nested deeper than 64 levels"};
  auto with = [](std::vector<std::string> v, const std::string& f) { v.push_back(f); return v; };
  expect_usage(run_cli("run --shapes " + shapes + " -o " + tmp_path("deep.json")), "run", with(why, shapes));
  expect_usage(run_cli("list --cases --shapes " + shapes), "list --cases", with(why, shapes));
  expect_usage(run_cli("compare " + results + " " + results), "compare", with(why, results));
  expect_usage(run_cli("merge " + results + " -o " + tmp_path("deep_merged.json")), "merge", with(why, results));
}

TEST(InputRules, AKeyGivenTwiceIsNamedWithItsPlace) {
  const std::string top = write_text("dup_top.json", R"({"group": "a", "group": "b", "shapes": [{"name": "x",
    "heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 32}]})");
  expect_usage(run_cli("list --cases --shapes " + top), "top-level group twice", {top, "key 'group' given twice"});
  const std::string inner = shape_file("dup_inner.json", R"(, "seqlen_k": 64)");
  expect_usage(run_cli("list --cases --shapes " + inner), "seqlen_k twice",
               {inner, "key 'seqlen_k' given twice at shapes[0].seqlen_k"});
}

TEST(InputRules, DocumentedRangesAreEnforced) {
  const std::string softcap = shape_file("softcap0.json", R"(, "softcap": 0)");
  expect_usage(run_cli("list --cases --shapes " + softcap), "softcap 0", {softcap, "field 'softcap'", "got 0"});
  const std::string scale = shape_file("scale_sub.json", R"(, "scale": 1e-320)");
  expect_usage(run_cli("list --cases --shapes " + scale), "scale 1e-320", {scale, "field 'scale'", "normal number"});
  for (const char* k : {"k_scale", "v_scale"}) {
    const std::string f = shape_file(std::string(k) + "0.json", std::string(", \"") + k + "\": 0");
    expect_usage(run_cli("list --cases --shapes " + f), k, {f, k, "got 0"});
  }
}

TEST(InputRules, NamesKeepToASafeCharacterSet) {
  const std::string slash = write_text("slash.json", R"({"group": "rules", "shapes": [{"name": "a/b", "heads": 2,
    "kv_heads": 1, "head_size": 64, "seqlen_k": 32}]})");
  expect_usage(run_cli("list --cases --shapes " + slash), "a shape name with /", {slash, "field 'name'", "\"a/b\"",
                                                                                     "letters, digits and ._+- only"});
  const std::string newline = write_text("newline.json", R"({"group": "rules", "shapes": [{"name": "a\nb", "heads": 2,
    "kv_heads": 1, "head_size": 64, "seqlen_k": 32}]})");
  expect_usage(run_cli("list --cases --shapes " + newline), "a shape name with a newline", {newline, "field 'name'"});
  const std::string group = write_text("badgroup.json", R"({"group": "x y", "shapes": [{"name": "a", "heads": 2,
    "kv_heads": 1, "head_size": 64, "seqlen_k": 32}]})");
  expect_usage(run_cli("list --cases --shapes " + group), "a group with a space", {group, "field 'group'", "\"x y\""});
  const std::string ok = shape_file("fine.json", "");
  EXPECT_EQ(run_cli("list --cases --shapes " + ok).code, 0);
}

TEST(InputRules, GroupTakesGroupNamesOnly) {
  expect_usage(run_cli("list --cases --group ../shapes/decode"), "--group a path",
               {"unknown group '../shapes/decode'", "--shapes FILE"});
  expect_usage(run_cli("list --cases --group " ATTNBENCH_SOURCE_DIR "/shapes/decode"), "--group an absolute path",
               {"unknown group"});
  EXPECT_EQ(run_cli("list --cases --group decode").code, 0);
}
