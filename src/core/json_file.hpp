// Reading a JSON input file (shape files, result files) so that every failure is a UsageError naming the file:
// a missing or unreadable path, a directory, malformed JSON, a number out of range (with where it sits).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace attnbench {

// Input JSON nests at most this deep: far past any shape or results file, well short of a stack overflow.
inline constexpr std::size_t kMaxJsonDepth = 64;

// `what` names the kind of file in messages ("shape file", "results file"). Nesting past kMaxJsonDepth and a key
// given twice in one object are errors naming the place ("shapes[1].name").
nlohmann::json read_json_file(const std::string& path, const std::string& what);
// The same rules over text that is not a file (`source` names it in messages, e.g. "--shape").
nlohmann::json parse_json_text(const std::string& text, const std::string& source, const std::string& what);

// A user-given value for a message: as given, shortened when it is long (a 309-digit number stays readable).
std::string compact_value(const std::string& s);

}  // namespace attnbench
