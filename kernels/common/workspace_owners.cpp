#include "workspace_owners.hpp"

#include <atomic>
#include <iterator>
#include <map>
#include <mutex>

namespace attnbench {
namespace {

struct Held {
  std::uintptr_t end;  // one past the range's last byte
  uint64_t plan;       // the plan that ran there last
  bool known;          // whether its state there is written (not a captured write waiting for a replay)
};

struct Owners {
  std::mutex mu;
  std::map<std::uintptr_t, Held> ranges;  // by first byte; no two overlap
};

Owners& owners() {  // never destroyed: a plan may outlive static destruction
  static Owners* o = new Owners;
  return *o;
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
std::uintptr_t range_end(const void* p, std::size_t bytes) { return address(p) + (bytes > 0 ? bytes : 1); }

}  // namespace

uint64_t new_plan_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

bool workspace_held_by(const void* workspace, std::size_t bytes, uint64_t plan) {
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mu);
  const auto it = o.ranges.find(address(workspace));
  return plan != 0 && it != o.ranges.end() && it->second.plan == plan && it->second.known &&
         it->second.end == range_end(workspace, bytes);
}

void record_workspace_call(const void* workspace, std::size_t bytes, uint64_t plan, bool state_known) {
  const std::uintptr_t begin = address(workspace), end = range_end(workspace, bytes);
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mu);
  auto it = o.ranges.lower_bound(begin);
  if (it != o.ranges.begin() && std::prev(it)->second.end > begin) --it;  // a range that starts before and reaches in
  while (it != o.ranges.end() && it->first < end) {
    if (it->first == begin && it->second.end == end) {  // the same range again (every call): no node to allocate
      it->second = Held{end, plan, state_known};
      ++it;
    } else {
      it = o.ranges.erase(it);
    }
  }
  o.ranges.try_emplace(begin, Held{end, plan, state_known});  // no node made where the range was there
}

void forget_workspace_plan(uint64_t plan) {
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mu);
  for (auto it = o.ranges.begin(); it != o.ranges.end();)
    it = it->second.plan == plan ? o.ranges.erase(it) : std::next(it);
}

}  // namespace attnbench
