// run_as_background_thread: the calling thread, and only it, becomes
// SCHED_BATCH (Linux).

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "base/background_thread.hpp"

namespace h5dcp::detail {
namespace {

TEST(BackgroundThread, TheCallingThreadAloneBecomesBatchWork) {
  int policy_inside = -1;
  std::thread worker([&] {
    run_as_background_thread();
    policy_inside = sched_getscheduler(0);
  });
  worker.join();
  EXPECT_EQ(policy_inside, SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

}  // namespace
}  // namespace h5dcp::detail
