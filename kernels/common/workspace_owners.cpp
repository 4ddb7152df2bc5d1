#include "workspace_owners.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace attnbench {
namespace {

struct Owners {
  std::mutex mu;
  std::unordered_map<const void*, uint64_t> last;  // workspace -> the plan whose state it holds
};

Owners& owners() {  // never destroyed: a plan may outlive static destruction
  static Owners* o = new Owners;
  return *o;
}

}  // namespace

uint64_t new_plan_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

bool workspace_held_by(const void* workspace, uint64_t plan) {
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mu);
  const auto it = o.last.find(workspace);
  return plan != 0 && it != o.last.end() && it->second == plan;
}

void record_workspace_call(const void* workspace, uint64_t plan, bool state_known) {
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mu);
  if (state_known) o.last[workspace] = plan;
  else o.last.erase(workspace);
}

void forget_workspace_plan(uint64_t plan) {
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mu);
  for (auto it = o.last.begin(); it != o.last.end();) it = it->second == plan ? o.last.erase(it) : std::next(it);
}

}  // namespace attnbench
