// The shape file's parsing helpers shared by shapes.cpp and shapes_gated.cpp; internal, not part of shapes.hpp.
#pragma once
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cases/shapes.hpp"
#include "core/errors.hpp"

namespace attnbench::shape_parse {

// Names the place of an error: "FILE: shape #i 'name': field 'f'".
struct Where {
  std::string file;
  int index = -1;
  std::string name;
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    std::string s = file + ": ";
    if (index >= 0) s += "shape #" + std::to_string(index) + (name.empty() ? "" : " '" + name + "'") + ": ";
    if (!field.empty()) s += "field '" + field + "': ";
    throw UsageError(s + why);
  }
};

// Upper bounds of the integer fields: far beyond any real model, small enough that sizes stay in range.
constexpr long long kMaxLength = 1LL << 30;     // seqlen_q, seqlen_k, seqlens, seqlen
constexpr long long kMaxBatch = 1LL << 20;      // sequences (one entry each in the lists the harness builds)
constexpr long long kMaxHeads = 1LL << 16;      // heads, kv_heads, h_q, h_kv
constexpr long long kMaxWidth = 1LL << 20;      // head_size, d_head, d_model, rope_dim
constexpr long long kMaxBlockSize = 1LL << 20;  // tokens per KV-cache block; may exceed the longest sequence

// j[key], an integer in [min_value, max_value]; j[key], a bool; each fails naming the field.
int get_int(const nlohmann::json& j, const std::string& key, const Where& w, long long max_value, int min_value = 1);
bool get_bool(const nlohmann::json& j, const std::string& key, const Where& w);
// Fails with "missing" where `key` is absent.
void require(const nlohmann::json& j, const std::string& key, const Where& w);

// The gated block's (shapes_gated.cpp): the keys a shape may have, and its parsers.
const std::set<std::string>& gated_keys();
const std::set<std::string>& gated_bwd_keys();
GatedShape parse_gated(const nlohmann::json& s, const Where& w);
GatedBwdOptions parse_gated_bwd(const nlohmann::json& s, const Where& w);

}  // namespace attnbench::shape_parse
