// Shape groups: JSON files (shapes/<group>.json, or any file through --shapes) expanded into cases, one per
// (shape, dtype). Every malformed input is a UsageError naming the file, the shape and the field.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnbench/attention.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/gated_fp8.hpp"
#include "attnbench/gated_mx.hpp"
#include "cases/inputs.hpp"

namespace attnbench {

// attention_backward: the gradients of the attention op (attention_bwd.hpp), packed varlen inputs.
// gated_block_backward: the gated block's gradients (gated_block_bwd.hpp) from dy and the forward's save set.
enum class Op { attention, gated_block, attention_backward, gated_block_backward };
const char* op_name(Op op);

// The gated attention block's geometry (op "gated_block").
struct GatedShape {
  int batch = 1, seqlen = 0, d_model = 0, h_q = 0, h_kv = 0, d_head = 0, rope_dim = 0;
  bool qk_norm = true, causal = true;
  int window_left = -1, window_right = -1;  // GatedOptions' sliding window
  bool causal_bottom_right = true;          // GatedOptions::causal_bottom_right
  std::vector<int> seq_lens;                // GatedBlockParams::seq_lens, [batch] or empty
  bool return_lse = false;                  // GatedOptions::return_lse
  std::optional<MxQuantSpec> mx;            // GatedOptions::mx
  std::optional<Fp8QuantSpec> fp8;          // GatedOptions::fp8 (defaults from the geometry for fields not given)
  GatedBwdOptions bwd;                      // op gated_block_backward: "recompute" and "need"
};

struct ShapeCase {
  std::string group, file, name;
  Op op = Op::attention;
  DType dtype = DType::bf16;    // the shape's "dtypes" entry of this case
  AttentionProblem attention;  // op == attention (attention.types: O in dtype; Q in "q_dtype" or dtype, K/V in
                               // "kv_dtype" or dtype) and op == attention_backward (the forward it differentiates)
  InputSpread input_spread;    // op == attention(_backward): "scores": "wide" widens Q and K (inputs.hpp)
  GatedShape gated;            // op == gated_block(_backward)
  std::string describe() const;  // one line: dims of the case
  // The dtype label of the case and its rows: the dtype, or q-kv-o where a shape's q_dtype or kv_dtype differs.
  std::string dtype_label() const { return op == Op::attention ? attention.types.name() : dtype_name(dtype); }
  bool is_attention_like() const { return op == Op::attention || op == Op::attention_backward; }
};

// Loads one file; `group_hint` names the group when the file has no "group" field.
std::vector<ShapeCase> load_shape_file(const std::string& path);
// Loads a parsed shape document; `source` names it in errors and is each case's `file`.
std::vector<ShapeCase> load_shape_doc(const nlohmann::json& doc, const std::string& source);
// Loads shapes/<group>.json from the shapes directory.
std::vector<ShapeCase> load_group(const std::string& group);
// Group names available (file stems in the shapes directory), sorted.
std::vector<std::string> list_groups();
// The shapes directory: $ATTNBENCH_SHAPES_DIR, ./shapes, next to the binary, or the source tree.
std::string shapes_dir();

// Group, shape and kernel names make result ids (group/shape/dtype), table columns and file names: letters,
// digits and ._+- only, starting with a letter or digit, at most 100 characters (kSafeNameRule says so).
bool safe_name(const std::string& name);
extern const char* const kSafeNameRule;

}  // namespace attnbench
