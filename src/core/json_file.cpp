#include "core/json_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "core/errors.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace attnbench {

namespace {

// A structural rule of read_json_file's broken (nesting past kMaxJsonDepth, a key given twice in one object).
struct JsonRuleBroken {
  std::string why;
};

// Follows the parser's events so that an error without a byte offset (a number out of range) can say where it
// is: "shapes[1].block_size"; it also refuses nesting past kMaxJsonDepth (a value that deep would overflow the stack
// of whatever walks it later) and a key given twice in one object (the parser would keep the last one silently).
class PathTracker {
 public:
  bool on_event(json::parse_event_t ev, const json& parsed) {
    using E = json::parse_event_t;
    switch (ev) {
      case E::object_start:
      case E::array_start:
        if (!frames_.empty() && frames_.back().array) ++frames_.back().count;
        frames_.push_back({ev == E::array_start, 0, "", {}});
        if (frames_.size() > kMaxJsonDepth)
          throw JsonRuleBroken{"nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at " + where()};
        break;
      case E::object_end:
      case E::array_end:
        if (!frames_.empty()) frames_.pop_back();
        break;
      case E::key:
        if (!frames_.empty()) {
          Frame& f = frames_.back();
          f.key = parsed.is_string() ? parsed.get<std::string>() : parsed.dump();
          if (!f.keys.insert(f.key).second) throw JsonRuleBroken{"key '" + f.key + "' given twice at " + where()};
        }
        break;
      case E::value:
        if (!frames_.empty() && frames_.back().array) ++frames_.back().count;
        break;
    }
    return true;
  }

  // The place of the value being parsed: a nested container's index is its parent's last counted element, a
  // scalar that failed is the next one.
  std::string where() const {
    std::string s;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.array) s += "[" + std::to_string(i + 1 == frames_.size() ? f.count : f.count - 1) + "]";
      else if (!f.key.empty()) s += (s.empty() ? "" : ".") + f.key;
    }
    return s;
  }

 private:
  struct Frame {
    bool array;
    size_t count;
    std::string key;
    std::set<std::string> keys;  // an object's keys so far
  };
  std::vector<Frame> frames_;
};

}  // namespace

std::string compact_value(const std::string& s) {
  if (s.size() <= 40) return s;
  return s.substr(0, 24) + "... (" + std::to_string(s.size()) + " characters)";
}

json read_json_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw UsageError(path + ": cannot open " + what + " (" + (ec ? ec.message() : std::string("no such file")) + ")");
  if (fs::is_directory(st)) throw UsageError(path + ": is a directory, expected a " + what);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError(path + ": cannot open " + what + ": " + std::strerror(errno));
  std::string text;
  try {
    std::ostringstream os;
    os << f.rdbuf();
    text = os.str();
  } catch (const std::exception& e) {
    throw UsageError(path + ": cannot read " + what + ": " + e.what());
  }
  if (f.bad()) throw UsageError(path + ": cannot read " + what);
  return parse_json_text(text, path, what);
}

json parse_json_text(const std::string& text, const std::string& source, const std::string& what) {
  PathTracker tracker;
  try {
    return json::parse(text, [&tracker](int, json::parse_event_t ev, json& parsed) {
      return tracker.on_event(ev, parsed);
    });
  } catch (const JsonRuleBroken& e) {
    throw UsageError(source + ": malformed " + what + ": " + e.why);
  } catch (const json::parse_error& e) {
    throw UsageError(source + ": malformed JSON: " + e.what());
  } catch (const json::exception& e) {
    const std::string at = tracker.where();
    throw UsageError(source + ": malformed JSON" + (at.empty() ? std::string() : " at " + at) + ": " + e.what());
  }
}

}  // namespace attnbench
