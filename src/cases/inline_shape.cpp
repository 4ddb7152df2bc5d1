#include "cases/inline_shape.hpp"

#include <cctype>
#include <sstream>
#include <utility>

#include "attnbench/dtype.hpp"
#include "core/errors.hpp"
#include "core/json_file.hpp"

namespace attnbench {

using nlohmann::json;

const char* const kInlineShapeGrammar =
    "d<head_size> h<heads>[/<kv_heads>] [b<batch>] [q<seqlen_q>] kv<seqlen_k> | s<seqlen>, [bs<block_size>] "
    "[causal|noncausal] [bf16|fp16|...,...] [field=JSON ...] (a shape file's fields, e.g. softcap=30)";

std::string inline_shape_source(const std::string& spec) { return "--shape '" + spec + "'"; }

namespace {

[[noreturn]] void fail(const std::string& spec, const std::string& why) {
  throw UsageError(inline_shape_source(spec) + ": " + why + " (grammar: " + kInlineShapeGrammar + ")");
}

// The digits after a token's prefix, as a JSON integer; anything else is an error naming the token.
json count(const std::string& spec, const std::string& token, std::size_t prefix) {
  const std::string digits = token.substr(prefix);
  bool ok = !digits.empty() && digits.size() <= 12;  // the loader bounds each field far below 10^12
  for (char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  if (!ok) fail(spec, "'" + token + "': expected digits after '" + token.substr(0, prefix) + "'");
  return std::stoll(digits);
}

// "h32/8" or "h32": heads, and kv_heads (the same when not given).
void read_heads(const std::string& spec, const std::string& token, json& s) {
  const std::size_t slash = token.find('/');
  s["heads"] = count(spec, token.substr(0, slash), 1);
  s["kv_heads"] = slash == std::string::npos ? s["heads"] : count(spec, "/" + token.substr(slash + 1), 1);
}

// "field=JSON": any shape-file field; a value that is not JSON is taken as a string (scores=wide).
void read_field(const std::string& spec, const std::string& token, json& s) {
  const std::size_t eq = token.find('=');
  const std::string key = token.substr(0, eq), text = token.substr(eq + 1);
  if (key.empty() || text.empty()) fail(spec, "'" + token + "': expected field=value");
  if (s.contains(key)) fail(spec, "'" + key + "' given twice");
  const bool json_like = std::isdigit(static_cast<unsigned char>(text[0])) ||
                         std::string("-[{\"").find(text[0]) != std::string::npos || text == "true" ||
                         text == "false" || text == "null";
  s[key] = json_like ? parse_json_text(text, inline_shape_source(spec) + " field '" + key + "'", "value") : json(text);
}

// "bf16" or "bf16,fp16": the dtypes, or empty when any of them is no dtype.
json dtype_list(const std::string& token) {
  json dtypes = json::array();
  std::stringstream list(token);
  for (std::string d; std::getline(list, d, ',');) {
    if (!parse_dtype(d)) return json::array();
    dtypes.push_back(d);
  }
  return dtypes;
}

// One token into the shape object; each field may be given once.
void read_token(const std::string& spec, const std::string& token, json& s) {
  const auto set = [&](const char* key, json v) {
    if (s.contains(key)) fail(spec, std::string("'") + key + "' given twice (token '" + token + "')");
    s[key] = std::move(v);
  };
  const auto starts = [&](const std::string& p) {  // the prefix, then a digit
    return token.rfind(p, 0) == 0 && token.size() > p.size() && std::isdigit(static_cast<unsigned char>(token[p.size()]));
  };
  if (token.find('=') != std::string::npos) read_field(spec, token, s);
  else if (token == "causal" || token == "noncausal") set("causal", token == "causal");
  else if (starts("kv")) set("seqlen_k", count(spec, token, 2));
  else if (starts("bs")) set("block_size", count(spec, token, 2));
  else if (starts("d")) set("head_size", count(spec, token, 1));
  else if (starts("h")) {
    if (s.contains("heads")) fail(spec, "'heads' given twice (token '" + token + "')");
    read_heads(spec, token, s);
  } else if (starts("b")) set("batch", count(spec, token, 1));
  else if (starts("q")) set("seqlen_q", count(spec, token, 1));
  else if (starts("s")) set("seqlen_k", count(spec, token, 1));  // a prefill: seqlen_q follows seqlen_k
  else if (json dtypes = dtype_list(token); !dtypes.empty()) set("dtypes", dtypes);
  else fail(spec, "unknown token '" + token + "'");
}

}  // namespace

json inline_shape_doc(const std::string& spec) {
  json s = json::object();
  std::istringstream in(spec);
  for (std::string token; in >> token;) read_token(spec, token, s);
  if (s.empty()) fail(spec, "an empty shape");
  if (!s.contains("head_size")) fail(spec, "no d<head_size>");
  if (!s.contains("heads")) fail(spec, "no h<heads>[/<kv_heads>]");
  if (!s.contains("seqlen_k") && !s.contains("seqlens")) fail(spec, "no kv<seqlen_k> or s<seqlen>");
  return {{"group", "inline"}, {"shapes", json::array({s})}};
}

std::vector<ShapeCase> load_inline_shape(const std::string& spec) {
  return load_shape_doc(inline_shape_doc(spec), inline_shape_source(spec));
}

}  // namespace attnbench
