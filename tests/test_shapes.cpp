// Shape files: the shipped groups hold DESIGN's shapes; every malformed input names file, shape and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "errors.hpp"
#include "shapes.hpp"

using namespace attnbench;

namespace {
std::string write_tmp(const std::string& text) {
  static int n = 0;
  const auto p = std::filesystem::temp_directory_path() / ("attnbench_shapes_" + std::to_string(::getpid()) + "_" +
                                                           std::to_string(n++) + ".json");
  std::ofstream(p) << text;
  return p.string();
}

// Expects a UsageError whose message contains every fragment.
void expect_error(const std::string& json_text, std::initializer_list<std::string> fragments) {
  const std::string path = write_tmp(json_text);
  try {
    load_shape_file(path);
    FAIL() << "no error for " << json_text;
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

const char* kGood = R"({"group": "g", "defaults": {"heads": 8, "kv_heads": 2, "head_size": 64},
  "shapes": [{"name": "a", "batch": 2, "seqlen_k": 100}]})";
}  // namespace

TEST(Shapes, ShippedGroupsLoadWithTheDesignShapes) {
  setenv("ATTNBENCH_SHAPES_DIR", ATTNBENCH_SOURCE_DIR "/shapes", 1);
  const auto groups = list_groups();
  for (const char* g : {"decode", "short_prefill", "long_prefill", "gqa", "gated_397b"})
    EXPECT_NE(std::find(groups.begin(), groups.end(), g), groups.end()) << g;
  const auto decode = load_group("decode");
  EXPECT_EQ(decode.size(), 20u);  // 10 shapes x {bf16, fp16}
  for (const auto& c : decode) EXPECT_EQ(c.attention.max_seqlen_q(), 1);
  const auto& ragged = decode[18].attention;
  EXPECT_EQ(ragged.kv_lens, (std::vector<int>{523, 37, 2011, 1328}));
  EXPECT_EQ(load_group("short_prefill").size(), 10u);
  EXPECT_EQ(load_group("long_prefill").size(), 12u);
  const auto gqa = load_group("gqa");
  EXPECT_EQ(gqa.size(), 12u);
  const auto& chunked = gqa[10].attention;
  EXPECT_EQ(chunked.num_seqs(), 8);
  EXPECT_EQ(chunked.q_lens[0], 512);
  EXPECT_EQ(chunked.kv_lens[0], 4096);
  const auto gated = load_group("gated_397b");
  EXPECT_EQ(gated.size(), 7u);
  EXPECT_EQ(gated[0].op, Op::gated_block);
  EXPECT_EQ(gated[0].gated.d_model, 5120);
  EXPECT_FALSE(gated[6].gated.causal);
  for (const auto& g : {"long_prefill"})
    for (const auto& c : load_group(g))
      if (c.name == "d128_h16kv16_b1_s16384_full") { EXPECT_FALSE(c.attention.causal); }
}

TEST(Shapes, DefaultsMergeAndDtypesExpand) {
  const auto c = load_shape_file(write_tmp(kGood));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].dtype, DType::bf16);
  EXPECT_EQ(c[1].dtype, DType::f16);
  EXPECT_EQ(c[0].attention.heads, 8);
  EXPECT_EQ(c[0].attention.q_lens, (std::vector<int>{100, 100}));
  EXPECT_EQ(c[0].group, "g");
}

TEST(Shapes, UnknownGroupListsKnownOnes) {
  setenv("ATTNBENCH_SHAPES_DIR", ATTNBENCH_SOURCE_DIR "/shapes", 1);
  try {
    load_group("nope");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("decode"), std::string::npos);
  }
}

TEST(Shapes, MalformedJson) { expect_error("{\"shapes\": [", {"malformed JSON"}); }
TEST(Shapes, MissingFile) {
  EXPECT_THROW(load_shape_file("/nonexistent/x.json"), UsageError);
}
TEST(Shapes, UnknownField) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9, "hedas": 1}]})",
               {"shape #0 'a'", "field 'hedas'", "unknown field"});
}
TEST(Shapes, MissingField) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "seqlen_k": 9}]})", {"'a'", "head_size", "missing"});
}
TEST(Shapes, WrongType) {
  expect_error(R"({"shapes": [{"name": "a", "heads": "8", "kv_heads": 2, "head_size": 64, "seqlen_k": 9}]})",
               {"field 'heads'", "integer", "\"8\""});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9, "causal": 1}]})",
               {"field 'causal'"});
}
TEST(Shapes, HeadsNotMultipleOfKvHeads) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 6, "kv_heads": 4, "head_size": 64, "seqlen_k": 9}]})",
               {"field 'kv_heads'", "6", "4"});
}
TEST(Shapes, ZeroOrNegativeSizes) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 0, "seqlen_k": 9}]})",
               {"field 'head_size'", ">= 1", "0"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "batch": -3, "seqlen_k": 9}]})",
               {"field 'batch'", "-3"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlens": [[0, 4]]}]})",
               {"field 'seqlens'"});
}
TEST(Shapes, RaggedAndUniformLengthsExcludeEachOther) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "batch": 2,
                               "seqlens": [[1, 4]]}]})",
               {"field 'seqlens'", "not both"});
}
TEST(Shapes, AShapesSeqlenQReplacesRaggedDefaults) {
  // Defaults hold ragged seqlens; a shape that gives only seqlen_q must not silently run the defaults' lengths.
  expect_error(R"({"defaults": {"heads": 2, "kv_heads": 1, "head_size": 64, "seqlens": [[4, 8], [2, 2]]},
                  "shapes": [{"name": "a", "seqlen_q": 1}]})",
               {"field 'seqlen_k'", "missing"});
}
TEST(Shapes, UnsupportedDtype) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9, "dtypes": ["fp8"]}]})",
               {"field 'dtypes'", "fp8"});
}
TEST(Shapes, SeqlenQLargerThanSeqlenK) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_q": 10, "seqlen_k": 9}]})",
               {"field 'seqlen_q'", "10", "9"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlens": [[5, 18], [20, 4]]}]})",
               {"field 'seqlens'", "[20,4]"});
}
TEST(Shapes, DuplicateNamesAndBadTopLevel) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9},
                              {"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9}]})",
               {"duplicate"});
  expect_error(R"({"shapez": []})", {"field 'shapez'"});
  expect_error(R"({"shapes": []})", {"field 'shapes'"});
  expect_error(R"({"op": "conv", "shapes": [{}]})", {"field 'op'", "conv"});
}
TEST(Shapes, GatedBlockFields) {
  expect_error(R"({"op": "gated_block", "shapes": [{"name": "s", "seqlen": 8, "d_model": 64, "h_q": 3, "h_kv": 2,
                   "d_head": 16, "rope_dim": 8}]})",
               {"field 'h_kv'"});
  expect_error(R"({"op": "gated_block", "shapes": [{"name": "s", "seqlen": 8, "d_model": 64, "h_q": 4, "h_kv": 2,
                   "d_head": 16, "rope_dim": 7}]})",
               {"field 'rope_dim'"});
}
