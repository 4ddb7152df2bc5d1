// The record of which plan ran last on a workspace: what cuda.unified's plans trust to know whether the state they
// keep there (split counters, the L2 walk's table) is still theirs.
#include <gtest/gtest.h>

#include "common/workspace_owners.hpp"

namespace attnbench {
namespace {

TEST(WorkspaceOwners, APlanHoldsAWorkspaceUntilAnotherRunsOnIt) {
  int buf[2];
  const uint64_t a = new_plan_id(), b = new_plan_id();
  EXPECT_NE(a, b);
  EXPECT_FALSE(workspace_held_by(&buf[0], a)) << "no call yet";
  record_workspace_call(&buf[0], a, true);
  EXPECT_TRUE(workspace_held_by(&buf[0], a));
  EXPECT_FALSE(workspace_held_by(&buf[1], a)) << "another pointer";
  EXPECT_FALSE(workspace_held_by(&buf[0], b));
  record_workspace_call(&buf[0], b, true);
  EXPECT_FALSE(workspace_held_by(&buf[0], a)) << "b ran there since: a writes its state again";
  EXPECT_TRUE(workspace_held_by(&buf[0], b));
  record_workspace_call(&buf[0], a, true);
  EXPECT_TRUE(workspace_held_by(&buf[0], a));
  forget_workspace_plan(a);
  forget_workspace_plan(b);
}

// A capture that recorded the state's write holds nobody's state until it replays: the next eager call of the same
// plan writes it again.
TEST(WorkspaceOwners, ACapturedWriteLeavesTheStateUnknown) {
  int buf = 0;
  const uint64_t a = new_plan_id();
  record_workspace_call(&buf, a, false);
  EXPECT_FALSE(workspace_held_by(&buf, a));
  record_workspace_call(&buf, a, true);
  EXPECT_TRUE(workspace_held_by(&buf, a));
  forget_workspace_plan(a);
}

// A destroyed plan's entries go (its id is never handed out again), and the other plans' stay.
TEST(WorkspaceOwners, ForgettingAPlanKeepsTheOthers) {
  int buf[2];
  const uint64_t a = new_plan_id(), b = new_plan_id();
  record_workspace_call(&buf[0], a, true);
  record_workspace_call(&buf[1], b, true);
  forget_workspace_plan(a);
  EXPECT_FALSE(workspace_held_by(&buf[0], a));
  EXPECT_TRUE(workspace_held_by(&buf[1], b));
  forget_workspace_plan(b);
  EXPECT_FALSE(workspace_held_by(&buf[1], b));
  EXPECT_FALSE(workspace_held_by(&buf[0], 0)) << "0 is nobody's";
}

}  // namespace
}  // namespace attnbench
