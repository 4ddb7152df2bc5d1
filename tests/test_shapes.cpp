// Shape files: the shipped groups hold DESIGN's shapes; every malformed input names file, shape and field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <utility>

#include "cases/shapes.hpp"
#include "core/errors.hpp"
#include "temp_dir.hpp"

using namespace attnbench;

namespace {
std::string write_tmp(const std::string& text) {
  static int n = 0;
  const std::string p = testtmp::path("shapes_" + std::to_string(n++) + ".json");
  std::ofstream(p) << text;
  return p;
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

namespace {
// Each (shape name, dtype) of a group's cases, in file order.
std::vector<std::pair<std::string, std::string>> case_names(const std::vector<ShapeCase>& cases) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : cases) out.emplace_back(c.name, dtype_name(c.dtype));
  return out;
}

std::vector<std::pair<std::string, std::string>> expand(const std::vector<std::string>& names,
                                                        const std::vector<std::string>& dtypes) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : names)
    for (const auto& d : dtypes) out.emplace_back(n, d);
  return out;
}

const ShapeCase& find_case(const std::vector<ShapeCase>& cases, const std::string& name) {
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw std::runtime_error("no shape " + name);
}
}  // namespace

TEST(Shapes, ShippedGroupsLoadWithTheDesignShapes) {
  setenv("ATTNBENCH_SHAPES_DIR", ATTNBENCH_SOURCE_DIR "/shapes", 1);
  const auto groups = list_groups();
  for (const char* g : {"decode", "short_prefill", "long_prefill", "gqa", "gated_397b"})
    EXPECT_NE(std::find(groups.begin(), groups.end(), g), groups.end()) << g;
  const std::vector<std::string> both = {"bf16", "fp16"};
  const auto decode = load_group("decode");
  EXPECT_EQ(case_names(decode),
            expand({"d128_h32kv8_b1_kv4096", "d128_h32kv8_b8_kv4096", "d128_h32kv8_b32_kv8192", "d128_h32kv8_b128_kv4096",
                    "d128_h32kv8_b8_kv32768", "d128_h32kv8_b64_kv16384", "d64_h32kv32_b16_kv2048",
                    "d256_h32kv2_b1_kv32768", "d256_h32kv2_b32_kv8192", "d128_h32kv8_b32_kv8192_bs32",
                    "d128_h32kv8_b32_kv8192_bs16", "d128_h32kv8_b1_kv4096_bs16", "d128_h32kv8_b8_q2_kv8192",
                    "d128_h32kv8_b8_q8_kv8192", "d128_h32kv8_ragged"},
                   both));
  for (const auto& c : decode) {  // one query token, but for the speculative shapes' 2 and 8
    const int q = c.name.find("_q8_") != std::string::npos ? 8 : c.name.find("_q2_") != std::string::npos ? 2 : 1;
    EXPECT_EQ(c.attention.max_seqlen_q(), q) << c.name;
  }
  EXPECT_EQ(find_case(decode, "d128_h32kv8_b32_kv8192_bs16").attention.block_size, 16);
  EXPECT_EQ(find_case(decode, "d128_h32kv8_b32_kv8192").attention.block_size, 64);
  EXPECT_EQ(find_case(decode, "d128_h32kv8_ragged").attention.kv_lens, (std::vector<int>{523, 37, 2011, 1328}));
  EXPECT_EQ(case_names(load_group("short_prefill")),
            expand({"d128_h32kv8_b16_s256", "d128_h32kv8_b8_s512", "d128_h32kv8_b4_s768", "d64_h16kv16_b32_s128",
                    "d128_h32kv8_ragged"},
                   both));
  const auto long_prefill = load_group("long_prefill");
  EXPECT_EQ(case_names(long_prefill),
            expand({"d128_h32kv32_b1_s8192", "d128_h32kv32_b2_s4096", "d128_h32kv32_b4_s2048", "d64_h32kv32_b2_s8192",
                    "d256_h8kv8_b2_s8192", "d128_h16kv16_b1_s16384_full"},
                   both));
  for (const auto& c : long_prefill) EXPECT_EQ(c.attention.causal, c.name != "d128_h16kv16_b1_s16384_full") << c.name;
  const auto gqa = load_group("gqa");
  EXPECT_EQ(case_names(gqa),
            expand({"d128_h32kv8_b4_s2048", "d128_h64kv8_b1_s8192", "d128_h28kv4_b2_s4096", "d128_h32kv1_b2_s2048",
                    "d256_h32kv2_b1_s8192", "d128_h32kv8_chunked_q512_kv4096"},
                   both));
  const auto& chunked = find_case(gqa, "d128_h32kv8_chunked_q512_kv4096").attention;
  EXPECT_EQ(chunked.num_seqs(), 8);
  EXPECT_EQ(chunked.q_lens[0], 512);
  EXPECT_EQ(chunked.kv_lens[0], 4096);
  // Each shape on 16- or 32-token pages has its twin on 64-token pages, the same problem otherwise (#16's bar:
  // within 10% of the twin).
  const auto small = load_group("small_pages");
  EXPECT_EQ(case_names(small),
            expand({"d128_h32kv8_b2_s4096_bs16", "d128_h32kv8_b2_s4096_bs32", "d128_h32kv8_b2_s4096_bs64",
                    "d64_h32kv8_b2_s4096_bs16", "d64_h32kv8_b2_s4096_bs64", "d256_h16kv8_b1_s4096_bs16",
                    "d256_h16kv8_b1_s4096_bs64"},
                   both));
  for (const auto& c : small) {
    const int bs = std::stoi(c.name.substr(c.name.rfind("_bs") + 3));
    EXPECT_EQ(c.attention.block_size, bs) << c.name;
    EXPECT_TRUE(c.attention.causal) << c.name;
    if (bs == 64) continue;
    const std::string twin = c.name.substr(0, c.name.rfind("_bs")) + "_bs64";
    const AttentionProblem &a = c.attention, &b = find_case(small, twin).attention;
    EXPECT_EQ(a.heads, b.heads) << c.name;
    EXPECT_EQ(a.kv_heads, b.kv_heads) << c.name;
    EXPECT_EQ(a.head_size, b.head_size) << c.name;
    EXPECT_EQ(a.q_lens, b.q_lens) << c.name;
    EXPECT_EQ(a.kv_lens, b.kv_lens) << c.name;
  }
  const auto gated = load_group("gated_397b");
  EXPECT_EQ(case_names(gated),
            expand({"s2048", "s4096", "s8192", "s16384", "s32768", "s2048_full", "s8192_full"}, {"bf16"}));
  for (const auto& c : gated) {
    EXPECT_EQ(c.op, Op::gated_block);
    EXPECT_EQ(c.gated.d_model, 5120);
    EXPECT_EQ(c.gated.causal, c.name.find("_full") == std::string::npos) << c.name;
  }
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
  expect_error(R"({"op": "gated_block", "shapes": [{"name": "s", "seqlen": 8, "d_model": 64, "h_q": 4, "h_kv": 2,
                   "d_head": 16, "rope_dim": 8, "window_left": -2}]})",
               {"'s'", "field 'window_left'", "must be >= -1, got -2"});
  const auto c = load_shape_file(write_tmp(R"({"op": "gated_block", "shapes": [{"name": "s", "seqlen": 8,
      "d_model": 64, "h_q": 4, "h_kv": 2, "d_head": 16, "rope_dim": 8, "window_left": 3, "window_right": 0}]})"));
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].gated.window_left, 3);
  EXPECT_EQ(c[0].gated.window_right, 0);
  EXPECT_NE(c[0].describe().find("window 3/0"), std::string::npos) << c[0].describe();
}

TEST(Shapes, SeqLensAndTheAlignment) {
  const std::string gated = R"({"op": "gated_block", "shapes": [{"name": "s", "batch": 3, "seqlen": 8, "d_model": 64,
                                "h_q": 4, "h_kv": 2, "d_head": 64, "rope_dim": 8, )";
  expect_error(gated + R"("seq_lens": [8, 2]}]})", {"'s'", "field 'seq_lens'", "batch = 3"});
  expect_error(gated + R"("seq_lens": [8, 9, 0]}]})", {"field 'seq_lens'", "[0, seqlen = 8]", "got 9"});
  expect_error(gated + R"("seq_lens": [8, -1, 0]}]})", {"field 'seq_lens'", "got -1"});
  expect_error(gated + R"("seq_lens": [8, 2.5, 0]}]})", {"field 'seq_lens'", "got 2.5"});
  expect_error(gated + R"("causal_bottom_right": 1}]})", {"field 'causal_bottom_right'"});
  const auto g = load_shape_file(write_tmp(gated + R"("seq_lens": [8, 3, 0], "causal_bottom_right": false}]})"));
  ASSERT_FALSE(g.empty());
  EXPECT_EQ(g[0].gated.seq_lens, (std::vector<int>{8, 3, 0}));
  EXPECT_FALSE(g[0].gated.causal_bottom_right);
  EXPECT_NE(g[0].describe().find("top-left seq_lens"), std::string::npos) << g[0].describe();
  const auto a = load_shape_file(write_tmp(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64,
      "seqlens": [[3, 40], [5, 5]], "causal_bottom_right": false}]})"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a[0].attention.top_left);
  EXPECT_NE(a[0].describe().find("causal top-left"), std::string::npos) << a[0].describe();
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9,
                               "causal_bottom_right": "no"}]})",
               {"'a'", "field 'causal_bottom_right'"});
}

TEST(Shapes, GatedMxSpec) {
  const std::string gated = R"({"op": "gated_block", "shapes": [{"name": "s", "seqlen": 8, "d_model": 64,
                                "h_q": 4, "h_kv": 2, "d_head": 64, "rope_dim": 8, "mx": )";
  expect_error(gated + R"("e4m3"}]})", {"'s'", "field 'mx'", "expected an object"});
  expect_error(gated + R"({"w_qkvg": "fp4"}}]})", {"field 'mx.w_qkvg'", "\"e2m1\" (MXFP4)", "got \"fp4\""});
  expect_error(gated + R"({"o": "fp4"}}]})", {"field 'mx.o'", "\"nvfp4\""});
  expect_error(gated + R"({"scale_o": 0}}]})", {"field 'mx.scale_o'", "> 0"});
  expect_error(gated + R"({"descale_w_o": "2"}}]})", {"field 'mx.descale_w_o'"});
  expect_error(gated + R"({"w_q": "e4m3"}}]})", {"field 'mx.w_q'", "unknown key"});
  const auto c = load_shape_file(write_tmp(gated + R"({"w_qkvg": "e2m1", "w_o": "e5m2", "o": "mxfp4",
                                                       "scale_o": 0.5, "descale_w_o": 4}}]})"));
  ASSERT_FALSE(c.empty());
  ASSERT_TRUE(c[0].gated.mx.has_value());
  const MxQuantSpec& m = *c[0].gated.mx;
  EXPECT_EQ(m.w_qkvg, MxCodes::e2m1);
  EXPECT_EQ(m.w_o, MxCodes::e5m2);  // parsed: the block declines it, naming the field
  EXPECT_TRUE(m.o_fp4);
  EXPECT_EQ(m.o_format, Fp4Format::mxfp4);
  EXPECT_EQ(m.scale_o, 0.5f);
  EXPECT_EQ(m.descale_w_o, 4.f);
  EXPECT_NE(c[0].describe().find("mx w e2m1/e5m2 o mxfp4"), std::string::npos) << c[0].describe();
  const auto plain = load_shape_file(write_tmp(gated + R"({}}]})"));
  ASSERT_TRUE(plain[0].gated.mx.has_value());
  EXPECT_FALSE(plain[0].gated.mx->o_fp4) << "an empty spec is MXFP8 throughout";
}

TEST(Shapes, GatedFp8Spec) {
  const std::string gated = R"({"op": "gated_block", "shapes": [{"name": "s", "seqlen": 8, "d_model": 1024,
                                "h_q": 4, "h_kv": 2, "d_head": 64, "rope_dim": 8, "fp8": )";
  expect_error(gated + R"(1}]})", {"'s'", "field 'fp8'", "expected an object"});
  expect_error(gated + R"({"scale_x": 2}}]})", {"field 'fp8.scale_x'", "unknown key"});
  expect_error(gated + R"({"scale_q": 0}}]})", {"field 'fp8.scale_q'", "[1e-30, 1e30]"});
  expect_error(gated + R"({"descale_h": "1"}}]})", {"field 'fp8.descale_h'"});
  expect_error(gated + R"({}, "mx": {}}]})", {"field 'fp8'", "excludes mx"});
  const auto c = load_shape_file(write_tmp(gated + R"({"scale_v": 0.75, "descale_w_o": 0.001}}]})"));
  ASSERT_TRUE(c[0].gated.fp8.has_value());
  const Fp8QuantSpec& f = *c[0].gated.fp8;
  const Fp8QuantSpec d = gated_fp8_defaults(1024, 4 * 64);
  EXPECT_EQ(f.scale_v, 0.75f);
  EXPECT_EQ(f.descale_w_o, 0.001f);
  EXPECT_EQ(f.descale_h, d.descale_h) << "a field left out keeps the geometry's default";
  EXPECT_EQ(f.descale_w_qkvg, std::exp2(-11.f)) << "6 / sqrt(1024) / 448 = 4.2e-4 -> 2^-11";
  EXPECT_EQ(d.descale_w_o, std::exp2(-10.f)) << "6 / sqrt(256) / 448 = 8.4e-4 -> 2^-10";
  EXPECT_NE(c[0].describe().find(" fp8"), std::string::npos) << c[0].describe();
}

TEST(Shapes, ADirectoryIsAUsageErrorNamingIt) {
  const std::string dir = testtmp::dir().string();
  try {
    load_shape_file(dir);
    FAIL() << "no error for a directory";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + ": is a directory"), std::string::npos) << e.what();
  }
}
TEST(Shapes, NumberOutOfRangeNamesFileShapeAndField) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9},
                              {"name": "b", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9, "scale": 1e400}]})",
               {"shapes[1].scale", "1e400"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlens": [[1, 4], [2, -1e999]]}]})",
               {"shapes[0].seqlens[1][1]", "1e999"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 18446744073709551615}]})",
               {"'a'", "field 'seqlen_k'", "too large: 18446744073709551615"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9, "scale": 1e39}]})",
               {"'a'", "field 'scale'"});
}
TEST(Shapes, DtypeListedTwice) {
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9,
                               "dtypes": ["bf16", "fp16", "bf16"]}]})",
               {"shape #0 'a'", "field 'dtypes'", "\"bf16\" listed twice"});
  expect_error(R"({"defaults": {"dtypes": ["fp16", "fp16"]},
                  "shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9}]})",
               {"'a'", "field 'dtypes'", "listed twice"});
}
TEST(Shapes, AbsurdSizesAreBoundedAndABlockLongerThanTheSequenceIsNot) {
  const auto c = load_shape_file(write_tmp(
      R"({"shapes": [{"name": "a", "heads": 2, "kv_heads": 1, "head_size": 64, "seqlen_k": 9, "block_size": 4096}]})"));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].attention.block_size, 4096);
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 9, "block_size": 1000000000}]})",
               {"'a'", "field 'block_size'", "1000000000", "at most 1048576"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "batch": 2000000, "seqlen_k": 9}]})",
               {"field 'batch'", "2000000", "at most 1048576"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 100000, "kv_heads": 2, "head_size": 64, "seqlen_k": 9}]})",
               {"field 'heads'", "at most 65536"});
  expect_error(R"({"shapes": [{"name": "a", "heads": 8, "kv_heads": 2, "head_size": 64, "batch": 1048576,
                               "seqlen_k": 1073741824, "seqlen_q": 4096}]})",
               {"'a'", "field 'seqlen_q'", "more than 2^31 - 1"});
  expect_error(R"({"op": "gated_block", "shapes": [{"name": "s", "seqlen": 8, "d_model": 99999999999, "h_q": 4,
                   "h_kv": 2, "d_head": 64, "rope_dim": 8}]})",
               {"'s'", "field 'd_model'", "99999999999"});
}

namespace attnbench {
namespace {

// The backward op: the forward's lengths, heads, mask and features it differentiates, no paged layout.
TEST(Shapes, AttentionBackwardShapes) {
  const auto cases = load_shape_file(write_tmp(R"({"group": "b", "op": "attention_backward",
    "defaults": {"heads": 8, "kv_heads": 2, "head_size": 64},
    "shapes": [{"name": "a", "batch": 2, "seqlen_k": 100, "softcap": 30, "window_left": 16},
               {"name": "r", "seqlens": [[5, 9], [7, 7]], "causal": false}]})"));
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_EQ(cases[0].op, Op::attention_backward);
  EXPECT_EQ(cases[0].attention.features.softcap, 30.f);
  EXPECT_EQ(cases[0].attention.features.window_left, 16);
  EXPECT_EQ(cases[2].attention.kv_lens, (std::vector<int>{9, 7}));
  EXPECT_EQ(std::string(op_name(cases[0].op)), "attention_backward");
  EXPECT_EQ(cases[0].describe().rfind("bwd d64", 0), 0u) << cases[0].describe();
}

TEST(Shapes, AttentionBackwardDeclinesPagedFields) {
  for (const char* field : {"\"block_size\": 16", "\"kv_dtype\": \"e4m3\"", "\"return_lse\": true", "\"sinks\": [1]"})
    expect_error(std::string(R"({"op": "attention_backward", "shapes": [{"name": "a", "heads": 1, "kv_heads": 1,
      "head_size": 64, "seqlen_k": 9, )") + field + "}]}",
                 {"'a'", "unknown field in a shape"});
  expect_error(R"({"op": "attention_bwd", "shapes": [{}]})", {"field 'op'", "attention_backward"});
}

TEST(Shapes, TheBackwardGroupIsTrainingSized) {
  setenv("ATTNBENCH_SHAPES_DIR", ATTNBENCH_SOURCE_DIR "/shapes", 1);
  const auto cases = load_group("backward");
  std::set<int> dims, groups;
  bool causal = false, full = false, ragged = false;
  for (const auto& c : cases) {
    const AttentionProblem& p = c.attention;
    EXPECT_EQ(c.op, Op::attention_backward);
    dims.insert(p.head_size);
    groups.insert(p.group_size());
    (p.causal ? causal : full) = true;
    ragged = ragged || (p.q_lens.size() > 1 && p.q_lens[0] != p.q_lens[1]);
    EXPECT_EQ(p.total_q(), 16384) << c.name;  // B x S fixed, as FlashAttention's benchmark
  }
  EXPECT_EQ(dims, (std::set<int>{64, 128, 256}));
  EXPECT_TRUE(groups.count(8) && groups.count(16));
  EXPECT_TRUE(causal && full && ragged);
}

TEST(Shapes, GatedBlockBackwardShapes) {
  const auto cases = load_shape_file(write_tmp(R"({"group": "gb", "op": "gated_block_backward",
    "defaults": {"seqlen": 64, "d_model": 256, "h_q": 4, "h_kv": 2, "d_head": 64, "rope_dim": 16, "dtypes": ["bf16"]},
    "shapes": [{"name": "a"}, {"name": "s", "recompute": "save_all", "need": ["dh", "dw_norms"]}]})"));
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].op, Op::gated_block_backward);
  EXPECT_EQ(std::string(op_name(cases[0].op)), "gated_block_backward");
  const GatedBwdOptions& a = cases[0].gated.bwd;
  EXPECT_EQ(a.recompute, RecomputePolicy::recompute_qk_pre);
  EXPECT_TRUE(a.need_dh && a.need_dw_qkvg && a.need_dw_o && !a.need_dw_norms.has_value());
  const GatedBwdOptions& b = cases[1].gated.bwd;
  EXPECT_EQ(b.recompute, RecomputePolicy::save_all);
  EXPECT_TRUE(b.need_dh && !b.need_dw_qkvg && !b.need_dw_o && b.need_dw_norms.value_or(false));
  EXPECT_NE(cases[1].describe().find("bwd save_all"), std::string::npos) << cases[1].describe();
  const std::string head = R"({"op": "gated_block_backward", "shapes": [{"name": "a", "seqlen": 64, "d_model": 256,
    "h_q": 4, "h_kv": 2, "d_head": 64, "rope_dim": 16, )";
  expect_error(head + R"("recompute": "all"}]})", {"'a'", "field 'recompute'", "save_all"});
  expect_error(head + R"("need": []}]})", {"field 'need'", "non-empty"});
  expect_error(head + R"("need": ["dq"]}]})", {"field 'need'", "\"dq\"", "dw_qkvg"});
  expect_error(R"({"op": "gated_block", "shapes": [{"name": "a", "seqlen": 64, "d_model": 256, "h_q": 4, "h_kv": 2,
    "d_head": 64, "rope_dim": 16, "need": ["dh"]}]})", {"unknown field in a shape"});
}

TEST(Shapes, TheGatedBackwardGroupIsThe397bGeometry) {
  setenv("ATTNBENCH_SHAPES_DIR", ATTNBENCH_SOURCE_DIR "/shapes", 1);
  std::set<int> lens;
  bool causal = false, full = false, save_all = false;
  for (const auto& c : load_group("gated_397b_bwd")) {
    EXPECT_EQ(c.op, Op::gated_block_backward);
    EXPECT_EQ(c.gated.d_model, 5120);
    EXPECT_EQ(c.gated.d_head, 256);
    EXPECT_EQ(c.gated.h_q / c.gated.h_kv, 16);
    lens.insert(c.gated.seqlen);
    (c.gated.causal ? causal : full) = true;
    save_all = save_all || c.gated.bwd.recompute == RecomputePolicy::save_all;
  }
  EXPECT_EQ(lens, (std::set<int>{2048, 4096, 8192, 16384}));
  EXPECT_TRUE(causal && full && save_all);
}

}  // namespace
}  // namespace attnbench
