// The feature fields of an attention shape (README, "Shape files"): types are checked here, values by
// AttentionFeatures::validate() with the rest of the problem.
#pragma once
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "attnbench/features.hpp"

namespace attnbench {

const std::set<std::string>& feature_keys();

// Throws std::invalid_argument "field 'F': why" for a field of the wrong type.
AttentionFeatures parse_features(const nlohmann::json& shape);

// The features a case sets, for its result rows' dims ({} for plain attention).
nlohmann::json features_json(const AttentionFeatures& f);

}  // namespace attnbench
