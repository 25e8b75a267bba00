// Scheduling for the library's own threads (the async save's writer and
// staging threads, the deferred removal): they work for the caller, not
// instead of it.

#pragma once

namespace h5dcp::detail {

/// Marks the calling thread as background work: SCHED_BATCH on Linux, so
/// that waking it never preempts the thread that started it (a training
/// loop returning from async_stage_and_save would otherwise lose its core
/// for a scheduler slice, milliseconds, to the copy it just handed off).
/// Its share of a busy core is unchanged. Best effort: where the policy
/// cannot be set the thread runs as before. Never throws.
void run_as_background_thread() noexcept;

}  // namespace h5dcp::detail
