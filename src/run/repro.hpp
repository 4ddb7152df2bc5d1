// The `repro` field of a result row: a command line that reruns exactly that row.
#pragma once
#include <map>
#include <string>

#include "run/run_options.hpp"

namespace attnbench {

// Same case, kernel, mode, backend, gate settings, seed and knobs (those off their table default).
std::string repro_command(const RunOptions& o, const ShapeCase& c, const std::string& kernel, Backend backend,
                          Mode mode, const std::map<std::string, std::string>& knobs);

}  // namespace attnbench
