// An inline shape (`--shape 'd128 h32/8 b1 q1 kv4096'`): one attention shape on the command line, written as a
// shape document of the group "inline" and loaded by the shape-file loader, so it obeys every rule a file does.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cases/shapes.hpp"

namespace attnbench {

// The grammar, for usage messages and --help.
extern const char* const kInlineShapeGrammar;

// The document `spec` stands for: {"group": "inline", "shapes": [{...}]}. A token it cannot read is a UsageError
// naming the spec and the token.
nlohmann::json inline_shape_doc(const std::string& spec);
// Its cases (one per dtype), as load_shape_file gives a file's; errors name "--shape 'SPEC'".
std::vector<ShapeCase> load_inline_shape(const std::string& spec);
// "--shape 'SPEC'": the cases' `file`, and the name errors give the spec.
std::string inline_shape_source(const std::string& spec);

}  // namespace attnbench
