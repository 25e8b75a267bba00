// The fault-injection points: one step fires its point once, whether the
// step placed it itself or Comm fires it after the step's work.

#include <gtest/gtest.h>

#include <cstdlib>

#include "base/fault_injection.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

struct Injected {
  explicit Injected(const char* spec) { ::setenv("H5DCP_INJECT_FAULT", spec, 1); }
  ~Injected() { ::unsetenv("H5DCP_INJECT_FAULT"); }
};

TEST(FaultInjection, AStepFiresItsPointAfterItsWork) {
  Injected fault("save:sync@1");
  begin_fault_step();
  EXPECT_THROW(fault_point_after_step("save:sync", 1), Error);
  begin_fault_step();
  EXPECT_NO_THROW(fault_point_after_step("save:sync", 0));   // another rank
  EXPECT_NO_THROW(fault_point_after_step("save:write", 1));  // another point
}

TEST(FaultInjection, APointTheStepPlacedItselfDoesNotFireAgainAfterIt) {
  Injected fault("save:commit@*,save:block@0");
  begin_fault_step();
  EXPECT_THROW(fault_point("save:commit", 0), Error);  // placed before the rename
  EXPECT_NO_THROW(fault_point_after_step("save:commit", 0));
  // Other points passed in the step do not count as the step's own.
  begin_fault_step();
  EXPECT_THROW(fault_point("save:block", 0), Error);
  EXPECT_THROW(fault_point_after_step("save:commit", 0), Error);
  // A new step starts afresh.
  begin_fault_step();
  EXPECT_THROW(fault_point_after_step("save:commit", 3), Error);
}

TEST(FaultInjection, NothingFiresWithoutTheVariable) {
  ::unsetenv("H5DCP_INJECT_FAULT");
  begin_fault_step();
  EXPECT_NO_THROW(fault_point("save:commit", 0));
  EXPECT_NO_THROW(fault_point_after_step("save:plan", 0));
  EXPECT_FALSE(short_write_requested("save:write", 0));
}

}  // namespace
}  // namespace h5dcp::detail
