// The record of which plan ran last on a workspace: what cuda.unified's plans trust to know whether the state they
// keep there (split counters, the L2 walk's table) is still theirs.
#include <gtest/gtest.h>

#include "common/workspace_owners.hpp"

namespace attnbench {
namespace {

TEST(WorkspaceOwners, APlanHoldsAWorkspaceUntilAnotherRunsOnIt) {
  int buf[2];
  const std::size_t n = sizeof(int);
  const uint64_t a = new_plan_id(), b = new_plan_id();
  EXPECT_NE(a, b);
  EXPECT_FALSE(workspace_held_by(&buf[0], n, a)) << "no call yet";
  record_workspace_call(&buf[0], n, a, true);
  EXPECT_TRUE(workspace_held_by(&buf[0], n, a));
  EXPECT_FALSE(workspace_held_by(&buf[1], n, a)) << "another pointer";
  EXPECT_FALSE(workspace_held_by(&buf[0], 2 * n, a)) << "more bytes than it ran on";
  EXPECT_FALSE(workspace_held_by(&buf[0], n, b));
  record_workspace_call(&buf[0], n, b, true);
  EXPECT_FALSE(workspace_held_by(&buf[0], n, a)) << "b ran there since: a writes its state again";
  EXPECT_TRUE(workspace_held_by(&buf[0], n, b));
  record_workspace_call(&buf[0], n, a, true);
  EXPECT_TRUE(workspace_held_by(&buf[0], n, a));
  forget_workspace_plan(a);
  forget_workspace_plan(b);
}

// Plans on overlapping parts of one buffer: a call on any byte of another plan's range takes that range's trust
// away, whether it starts before, inside or after it; ranges that only touch keep theirs.
TEST(WorkspaceOwners, ACallOnOverlappingBytesTakesTheTrustAway) {
  char buf[64];
  const uint64_t a = new_plan_id(), b = new_plan_id(), c = new_plan_id();
  record_workspace_call(buf + 16, 16, a, true);  // a: [16, 32)
  record_workspace_call(buf, 16, b, true);       // b: [0, 16), touches a
  record_workspace_call(buf + 32, 32, c, true);  // c: [32, 64), touches a
  EXPECT_TRUE(workspace_held_by(buf + 16, 16, a));
  EXPECT_TRUE(workspace_held_by(buf, 16, b));
  EXPECT_TRUE(workspace_held_by(buf + 32, 32, c));

  record_workspace_call(buf + 8, 16, c, true);  // [8, 24): b's tail and a's head
  EXPECT_FALSE(workspace_held_by(buf, 16, b)) << "starts before and reaches in";
  EXPECT_FALSE(workspace_held_by(buf + 16, 16, a)) << "starts inside";
  EXPECT_TRUE(workspace_held_by(buf + 32, 32, c)) << "c's other range is untouched";
  EXPECT_TRUE(workspace_held_by(buf + 8, 16, c));

  record_workspace_call(buf + 40, 4, a, false);  // a capture inside c's [32, 64)
  EXPECT_FALSE(workspace_held_by(buf + 32, 32, c)) << "an unknown write inside";
  EXPECT_FALSE(workspace_held_by(buf + 40, 4, a));
  EXPECT_TRUE(workspace_held_by(buf + 8, 16, c));
  for (uint64_t plan : {a, b, c}) forget_workspace_plan(plan);
}

// A capture that recorded the state's write holds nobody's state until it replays: the next eager call of the same
// plan writes it again.
TEST(WorkspaceOwners, ACapturedWriteLeavesTheStateUnknown) {
  int buf = 0;
  const uint64_t a = new_plan_id();
  record_workspace_call(&buf, sizeof buf, a, false);
  EXPECT_FALSE(workspace_held_by(&buf, sizeof buf, a));
  record_workspace_call(&buf, sizeof buf, a, true);
  EXPECT_TRUE(workspace_held_by(&buf, sizeof buf, a));
  forget_workspace_plan(a);
}

// A destroyed plan's entries go (its id is never handed out again), and the other plans' stay.
TEST(WorkspaceOwners, ForgettingAPlanKeepsTheOthers) {
  int buf[2];
  const std::size_t n = sizeof(int);
  const uint64_t a = new_plan_id(), b = new_plan_id();
  record_workspace_call(&buf[0], n, a, true);
  record_workspace_call(&buf[1], n, b, true);
  forget_workspace_plan(a);
  EXPECT_FALSE(workspace_held_by(&buf[0], n, a));
  EXPECT_TRUE(workspace_held_by(&buf[1], n, b));
  forget_workspace_plan(b);
  EXPECT_FALSE(workspace_held_by(&buf[1], n, b));
  EXPECT_FALSE(workspace_held_by(&buf[0], n, 0)) << "0 is nobody's";
}

}  // namespace
}  // namespace attnbench
