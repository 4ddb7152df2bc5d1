#include "cases/shapes.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cases/shape_features.hpp"
#include "cases/shape_parse.hpp"
#include "core/errors.hpp"
#include "core/json_file.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace attnbench {

const char* op_name(Op op) {
  switch (op) {
    case Op::attention: return "attention";
    case Op::gated_block: return "gated_block";
    case Op::attention_backward: return "attention_backward";
    case Op::gated_block_backward: return "gated_block_backward";
  }
  return "?";
}

std::string ShapeCase::describe() const {
  std::ostringstream os;
  if (is_attention_like()) {
    const auto& p = attention;
    if (op == Op::attention_backward) os << "bwd ";
    os << "d" << p.head_size << " H" << p.heads << "/KV" << p.kv_heads << " B" << p.num_seqs() << " q"
       << p.max_seqlen_q() << " kv" << p.max_seqlen_k() << (p.causal ? " causal" : " full")
       << (p.top_left ? " top-left" : "");
  } else {
    const auto& g = gated;
    os << "d_model " << g.d_model << " h " << g.h_q << "/" << g.h_kv << " d" << g.d_head << " S" << g.seqlen
       << (g.causal ? " causal" : " full");
    if (g.window_left >= 0 || g.window_right >= 0) os << " window " << g.window_left << "/" << g.window_right;
    if (!g.causal_bottom_right) os << " top-left";
    if (!g.seq_lens.empty()) os << " seq_lens";
    if (g.mx)
      os << " mx w " << mx_codes_name(g.mx->w_qkvg) << "/" << mx_codes_name(g.mx->w_o) << " o "
         << mx::mx_format_name(mx_o_format(*g.mx));
    if (g.fp8) os << " fp8";
    if (op == Op::gated_block_backward) os << " bwd " << recompute_policy_name(g.bwd.recompute);
  }
  return os.str();
}

namespace shape_parse {

int get_int(const json& j, const std::string& key, const Where& w, long long max_value, int min_value) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) w.fail(key, "expected an integer, got " + compact_value(v.dump()));
  const bool above = v.is_number_unsigned() ? v.get<unsigned long long>() > static_cast<unsigned long long>(max_value)
                                            : v.get<long long>() > max_value;
  if (above) w.fail(key, "too large: " + compact_value(v.dump()) + " (at most " + std::to_string(max_value) + ")");
  const long long x = v.get<long long>();
  if (x < min_value) w.fail(key, "must be >= " + std::to_string(min_value) + ", got " + std::to_string(x));
  return static_cast<int>(x);
}

bool get_bool(const json& j, const std::string& key, const Where& w) {
  const json& v = j.at(key);
  if (!v.is_boolean()) w.fail(key, "expected true or false, got " + compact_value(v.dump()));
  return v.get<bool>();
}

void require(const json& j, const std::string& key, const Where& w) {
  if (!j.contains(key)) w.fail(key, "missing");
}

}  // namespace shape_parse

namespace {
constexpr std::size_t kMaxNameLength = 100;
}  // namespace

bool safe_name(const std::string& n) {
  if (n.empty() || n.size() > kMaxNameLength || !std::isalnum(static_cast<unsigned char>(n[0]))) return false;
  for (char ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '+' && ch != '-') return false;
  return true;
}
const char* const kSafeNameRule = "letters, digits and ._+- only, starting with a letter or digit, at most 100 characters";

namespace {

using namespace shape_parse;

const std::set<std::string> kTopKeys = {"group", "op", "description", "defaults", "shapes"};
const std::set<std::string> kAttentionKeys = [] {
  std::set<std::string> k = {"name",     "batch",     "seqlen_q", "seqlen_k", "seqlens",    "heads",
                             "kv_heads", "head_size", "dtypes",   "causal",   "block_size", "scale", "kv_dtype",
                             "q_dtype",  "causal_bottom_right", "return_lse", "scores"};
  k.insert(feature_keys().begin(), feature_keys().end());
  return k;
}();
// The backward's: the forward's lengths, heads, mask and scale, the window and softcap (no paged layout, no 8-bit
// storage, no other feature: attention_bwd_conflict).
const std::set<std::string> kAttentionBwdKeys = {"name",     "batch",     "seqlen_q",     "seqlen_k",     "seqlens",
                                                 "heads",    "kv_heads",  "head_size",    "dtypes",       "causal",
                                                 "scale",    "scores",    "window_left",  "window_right", "softcap",
                                                 "causal_bottom_right"};

std::vector<DType> get_dtypes(const json& j, const Where& w) {
  if (!j.contains("dtypes")) return {DType::bf16, DType::f16};
  const json& v = j.at("dtypes");
  if (!v.is_array() || v.empty())
    w.fail("dtypes", "expected a non-empty list such as [\"bf16\", \"fp16\"], got " + compact_value(v.dump()));
  std::vector<DType> out;
  for (const auto& e : v) {
    if (!e.is_string()) w.fail("dtypes", "expected strings, got " + compact_value(e.dump()));
    auto d = parse_dtype(e.get<std::string>());
    if (!d) w.fail("dtypes", "unsupported dtype " + compact_value(e.dump()) + " (supported: " + dtype_names() + ")");
    if (std::find(out.begin(), out.end(), *d) != out.end())
      w.fail("dtypes", "dtype " + e.dump() + " listed twice (each would give the same rows)");
    out.push_back(*d);
  }
  return out;
}

void check_keys(const json& j, const std::set<std::string>& allowed, const Where& w, const char* what) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!allowed.count(it.key())) {
      std::string known;
      for (const auto& k : allowed) known += (known.empty() ? "" : ", ") + k;
      w.fail(it.key(), std::string("unknown field in ") + what + " (known: " + known + ")");
    }
  }
}

std::optional<DType> get_storage_dtype(const json& j, const char* key, const Where& w);

AttentionProblem parse_attention(const json& s, const Where& w) {
  AttentionProblem p;
  const DType first = get_dtypes(s, w).front();  // the types its validation sees; each case sets its own
  p.types = {get_storage_dtype(s, "q_dtype", w).value_or(first), get_storage_dtype(s, "kv_dtype", w).value_or(first),
             first};
  for (const char* k : {"heads", "kv_heads", "head_size"}) require(s, k, w);
  p.heads = get_int(s, "heads", w, kMaxHeads);
  p.kv_heads = get_int(s, "kv_heads", w, kMaxHeads);
  p.head_size = get_int(s, "head_size", w, kMaxWidth);
  if (p.heads % p.kv_heads != 0)
    w.fail("kv_heads", "heads " + std::to_string(p.heads) + " is not a multiple of kv_heads " + std::to_string(p.kv_heads));
  if (s.contains("block_size")) p.block_size = get_int(s, "block_size", w, kMaxBlockSize);
  if (s.contains("causal")) p.causal = get_bool(s, "causal", w);
  if (s.contains("causal_bottom_right")) p.top_left = !get_bool(s, "causal_bottom_right", w);
  if (s.contains("return_lse")) p.return_lse = get_bool(s, "return_lse", w);
  try {
    p.features = parse_features(s);
  } catch (const std::invalid_argument& e) {
    w.fail("", e.what());
  }
  if (s.contains("scale")) {
    const json& v = s.at("scale");
    if (!v.is_number() || !(v.get<double>() >= std::numeric_limits<float>::min()) ||
        v.get<double>() > std::numeric_limits<float>::max())
      w.fail("scale", "expected a number > 0 that fits a float as a normal number (1.2e-38 to 3.4e38), got " +
                          compact_value(v.dump()));
    p.scale = v.get<float>();
  }
  const bool ragged = s.contains("seqlens");
  const bool uniform = s.contains("seqlen_k") || s.contains("seqlen_q") || s.contains("batch");
  if (ragged && uniform) w.fail("seqlens", "give either seqlens or batch/seqlen_q/seqlen_k, not both");
  if (ragged) {
    const json& v = s.at("seqlens");
    if (!v.is_array() || v.empty())
      w.fail("seqlens", "expected a non-empty list of [q, kv] pairs, got " + compact_value(v.dump()));
    if (static_cast<long long>(v.size()) > kMaxBatch)
      w.fail("seqlens", std::to_string(v.size()) + " sequences, at most " + std::to_string(kMaxBatch));
    for (const auto& e : v) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer())
        w.fail("seqlens", "expected [q, kv] integer pairs, got " + compact_value(e.dump()));
      const auto too_large = [](const json& x) {
        return x.is_number_unsigned() ? x.get<unsigned long long>() > static_cast<unsigned long long>(kMaxLength)
                                      : x.get<long long>() > kMaxLength;
      };
      if (too_large(e[0]) || too_large(e[1]))
        w.fail("seqlens", "too large: " + compact_value(e.dump()) + " (at most " + std::to_string(kMaxLength) + ")");
      const long long q = e[0].get<long long>(), kv = e[1].get<long long>();
      if (q < 1 || kv < 1) w.fail("seqlens", "lengths must be >= 1, got " + e.dump());
      if (q > kv) w.fail("seqlens", "seqlen_q > seqlen_k in " + e.dump());
      p.q_lens.push_back(static_cast<int>(q));
      p.kv_lens.push_back(static_cast<int>(kv));
    }
  } else {
    require(s, "seqlen_k", w);
    const int batch = s.contains("batch") ? get_int(s, "batch", w, kMaxBatch) : 1;
    const int kv = get_int(s, "seqlen_k", w, kMaxLength);
    const int q = s.contains("seqlen_q") ? get_int(s, "seqlen_q", w, kMaxLength) : kv;
    if (q > kv) w.fail("seqlen_q", "seqlen_q " + std::to_string(q) + " > seqlen_k " + std::to_string(kv));
    p.q_lens.assign(batch, q);
    p.kv_lens.assign(batch, kv);
  }
  // cu_seqlens_q holds int32 offsets into the packed Q.
  if (p.total_q() > std::numeric_limits<int32_t>::max())
    w.fail(ragged ? "seqlens" : "seqlen_q", "the query tokens of all sequences add up to " +
                                                std::to_string(p.total_q()) + ", more than 2^31 - 1");
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    w.fail("", e.what());
  }
  return p;
}

const std::set<std::string>& shape_keys(Op op) {
  switch (op) {
    case Op::attention: return kAttentionKeys;
    case Op::gated_block: return gated_keys();
    case Op::attention_backward: return kAttentionBwdKeys;
    case Op::gated_block_backward: return gated_bwd_keys();
  }
  return kAttentionKeys;
}

std::string auto_name(const ShapeCase& c) {
  std::ostringstream os;
  if (c.is_attention_like()) {
    const auto& p = c.attention;
    os << "d" << p.head_size << "_h" << p.heads << "kv" << p.kv_heads << "_b" << p.num_seqs() << "_q"
       << p.max_seqlen_q() << "_kv" << p.max_seqlen_k();
  } else {
    os << "s" << c.gated.seqlen;
  }
  return os.str();
}

struct FileHeader {
  std::string group;
  Op op = Op::attention;
  json defaults = json::object();
};

FileHeader parse_header(const json& doc, const Where& top) {
  if (!doc.is_object()) top.fail("", "expected a JSON object with \"shapes\"");
  check_keys(doc, kTopKeys, top, "the file");
  FileHeader h;
  h.group = fs::path(top.file).stem().string();
  if (doc.contains("group")) {
    if (!doc["group"].is_string() || doc["group"].get<std::string>().empty()) top.fail("group", "expected a non-empty string");
    h.group = doc["group"].get<std::string>();
    if (!safe_name(h.group)) top.fail("group", compact_value(doc["group"].dump()) + ": " + kSafeNameRule);
  } else if (!safe_name(h.group)) {
    top.fail("", "the group is named by the file name '" + h.group + "', which has other characters than " +
                     kSafeNameRule + ": give the file a \"group\" field");
  }
  if (doc.contains("op")) {
    const json& v = doc["op"];
    if (v == "attention") h.op = Op::attention;
    else if (v == "gated_block") h.op = Op::gated_block;
    else if (v == "attention_backward") h.op = Op::attention_backward;
    else if (v == "gated_block_backward") h.op = Op::gated_block_backward;
    else top.fail("op", "expected \"attention\", \"attention_backward\", \"gated_block\" or \"gated_block_backward\", got " +
                          compact_value(v.dump()));
  }
  if (doc.contains("defaults")) {
    h.defaults = doc["defaults"];
    if (!h.defaults.is_object()) top.fail("defaults", "expected an object");
    check_keys(h.defaults, shape_keys(h.op), top, "defaults");
    if (h.defaults.contains("name")) top.fail("defaults", "a default 'name' makes every shape name the same");
  }
  if (!doc.contains("shapes") || !doc["shapes"].is_array() || doc["shapes"].empty())
    top.fail("shapes", "expected a non-empty list of shapes");
  return h;
}

// "kv_dtype" / "q_dtype": the K/V cache's / Q's storage dtype for every case of the shape (the rest keeps the
// case's dtype: O always).
std::optional<DType> get_storage_dtype(const json& j, const char* key, const Where& w) {
  if (!j.contains(key)) return std::nullopt;
  const json& v = j.at(key);
  const std::optional<DType> d = v.is_string() ? parse_dtype(v.get<std::string>()) : std::nullopt;
  if (!d) w.fail(key, "unsupported dtype " + compact_value(v.dump()) + " (supported: " + dtype_names() + ")");
  return d;
}

// "scores": "normal" (the default: N(0, 1) inputs) or "wide" (inputs.hpp, wide_scores).
InputSpread parse_scores(const json& s, const AttentionProblem& p, const Where& w) {
  if (!s.contains("scores")) return {};
  const json& v = s.at("scores");
  if (v == "normal") return {};
  if (v == "wide") return wide_scores(p);
  w.fail("scores", "expected \"normal\" or \"wide\", got " + compact_value(v.dump()));
}

// One shape's cases (one per dtype) appended to `out`; w.name is set as soon as the shape's name is known.
void add_shape(const json& raw, const FileHeader& h, Where& w, std::set<std::string>& names,
               std::vector<ShapeCase>& out) {
  if (!raw.is_object()) w.fail("", "expected an object, got " + compact_value(raw.dump()));
  if (raw.contains("name")) {
    if (!raw["name"].is_string() || raw["name"].get<std::string>().empty()) w.fail("name", "expected a non-empty string");
    if (!safe_name(raw["name"].get<std::string>())) w.fail("name", compact_value(raw["name"].dump()) + ": " + kSafeNameRule);
    w.name = raw["name"].get<std::string>();
  }
  check_keys(raw, shape_keys(h.op), w, "a shape");
  if (raw.contains("seqlens") && (raw.contains("batch") || raw.contains("seqlen_q") || raw.contains("seqlen_k")))
    w.fail("seqlens", "give either seqlens or batch/seqlen_q/seqlen_k, not both");
  json s = h.defaults;
  s.update(raw);
  // A shape's own lengths replace the other form given in the defaults.
  if (s.contains("seqlens") && !raw.contains("seqlens") &&
      (raw.contains("seqlen_k") || raw.contains("seqlen_q") || raw.contains("batch")))
    s.erase("seqlens");
  if (raw.contains("seqlens")) {
    s.erase("batch");
    s.erase("seqlen_q");
    s.erase("seqlen_k");
  }
  ShapeCase base;
  base.group = h.group;
  base.file = w.file;
  base.op = h.op;
  if (base.is_attention_like()) {
    base.attention = parse_attention(s, w);
    base.input_spread = parse_scores(s, base.attention, w);
  } else {
    base.gated = parse_gated(s, w);
    if (h.op == Op::gated_block_backward) base.gated.bwd = parse_gated_bwd(s, w);
  }
  base.name = w.name.empty() ? auto_name(base) : w.name;
  if (!names.insert(base.name).second) w.fail("name", "duplicate shape name '" + base.name + "'");
  const std::optional<DType> kv = get_storage_dtype(s, "kv_dtype", w), q = get_storage_dtype(s, "q_dtype", w);
  for (DType d : get_dtypes(s, w)) {
    ShapeCase c = base;
    c.dtype = d;
    c.attention.types = {q.value_or(d), kv.value_or(d), d};
    if (c.is_attention_like()) {
      try {
        c.attention.validate();  // the rules that depend on the case's types
      } catch (const std::invalid_argument& e) {
        w.fail("", e.what());
      }
    }
    out.push_back(c);
  }
}

}  // namespace

std::vector<ShapeCase> load_shape_file(const std::string& path) {
  return load_shape_doc(read_json_file(path, "shape file"), path);
}

std::vector<ShapeCase> load_shape_doc(const json& doc, const std::string& path) {
  const Where top{path, -1, ""};
  FileHeader h;
  try {
    h = parse_header(doc, top);
  } catch (const json::exception& e) {  // a value of a type the checks above did not expect
    top.fail("", e.what());
  }
  std::vector<ShapeCase> out;
  std::set<std::string> names;
  int i = 0;
  for (const auto& raw : doc["shapes"]) {
    Where w{path, i++, ""};
    try {
      add_shape(raw, h, w, names, out);
    } catch (const json::exception& e) {
      w.fail("", e.what());
    }
  }
  return out;
}

std::string shapes_dir() {
  if (const char* e = std::getenv("ATTNBENCH_SHAPES_DIR")) return e;
  std::vector<fs::path> candidates = {fs::current_path() / "shapes"};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "shapes");
    candidates.push_back(exe.parent_path().parent_path() / "shapes");
    candidates.push_back(exe.parent_path().parent_path().parent_path() / "shapes");
  }
#ifdef ATTNBENCH_SOURCE_DIR
  candidates.push_back(fs::path(ATTNBENCH_SOURCE_DIR) / "shapes");
#endif
  for (const auto& c : candidates)
    if (fs::exists(c / "decode.json")) return c.string();
  throw UsageError("cannot find the shapes directory (set ATTNBENCH_SHAPES_DIR or use --shapes FILE)");
}

std::vector<std::string> list_groups() {
  std::vector<std::string> g;
  const std::string dir = shapes_dir();
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json") g.push_back(it->path().stem().string());
  if (ec) throw UsageError("shapes directory " + dir + ": cannot list it: " + ec.message());
  std::sort(g.begin(), g.end());
  return g;
}

std::vector<ShapeCase> load_group(const std::string& group) {
  const fs::path p = fs::path(shapes_dir()) / (group + ".json");
  if (!safe_name(group) || !fs::exists(p)) {  // a group name, never a path: --shapes FILE reads a file
    std::string known;
    for (const auto& g : list_groups()) known += (known.empty() ? "" : ", ") + g;
    throw UsageError("unknown group '" + group + "' (known: " + known + "; a file of shapes is --shapes FILE)");
  }
  return load_shape_file(p.string());
}

}  // namespace attnbench
