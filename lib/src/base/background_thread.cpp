#include "base/background_thread.hpp"

#include <sched.h>

namespace h5dcp::detail {

void run_as_background_thread() noexcept {
#ifdef SCHED_BATCH
  // pid 0 is the calling thread. SCHED_BATCH takes priority 0 and needs no
  // privilege (it only gives up wakeup preemption).
  sched_param param{};
  param.sched_priority = 0;
  (void)sched_setscheduler(0, SCHED_BATCH, &param);
#endif
}

}  // namespace h5dcp::detail
