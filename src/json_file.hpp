// Reading a JSON input file (shape files, result files) so that every failure is a UsageError naming the file:
// a missing or unreadable path, a directory, malformed JSON, a number out of range (with where it sits).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace attnbench {

// `what` names the kind of file in messages ("shape file", "results file").
nlohmann::json read_json_file(const std::string& path, const std::string& what);

// A user-given value for a message: as given, shortened when it is long (a 309-digit number stays readable).
std::string compact_value(const std::string& s);

}  // namespace attnbench
