// h5dcp::async_save: the process's async save slot.

#include "api/async_save_engine.hpp"

namespace h5dcp {
namespace {

detail::AsyncSaveSlot& process_slot() {
  static detail::AsyncSaveSlot slot;
  return slot;
}

}  // namespace

SaveFuture async_save(const StateDict& state_dict, const std::string& path, const AsyncSaveOptions& options,
                      MPI_Comm comm) {
  return process_slot().save(state_dict, path, options, comm, false).saved;
}

StagedSave async_stage_and_save(const StateDict& state_dict, const std::string& path, const AsyncSaveOptions& options,
                                MPI_Comm comm) {
  return process_slot().save(state_dict, path, options, comm, true);
}

AsyncStats last_async_save_stats() { return process_slot().stats(); }

void finish_async_saves() { process_slot().finish(); }

}  // namespace h5dcp
