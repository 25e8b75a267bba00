// AsyncSaver: plan and stage in the caller's thread, write in the background.

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <torch/cuda.h>  // declarations only: device_count() is 0 without CUDA or without a GPU

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "api/checkpoint_session.hpp"
#include "api/save_steps.hpp"
#include "api/stateful_expansion.hpp"
#include "base/fault_injection.hpp"
#include "comm/comm.hpp"
#include "comm/plain_calls.hpp"
#include "h5dcp/async_save.hpp"
#include "h5dcp/error.hpp"
#include "hdf5/hdf5_error.hpp"
#include "hdf5/hdf5_file.hpp"
#include "hdf5/hdf5_gate.hpp"
#include "plan/staging_pieces.hpp"
#include "storage/staging_ring.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp {
namespace {

// One block of this rank's data on its way through the staging memory.
struct Piece {
  std::size_t tensor;         // index into plan.tensors
  const PlannedChunk* chunk;  // the planned block it belongs to
  ChunkStorageMetadata box;   // the piece, in global coordinates
  std::int64_t bytes;
};

// A piece the caller staged, or the failure that stopped staging.
struct Staged {
  std::int64_t offset = 0;
  std::exception_ptr failure;
};

struct Job {
  GlobalSavePlan plan;
  std::string path;
  std::vector<Piece> pieces;
  std::promise<SaveResult> promise;
  // The HDF5 gate, taken by the caller in save(): given back when the
  // background thread drops the finished job.
  std::optional<detail::Hdf5GateHold> gate;
  bool fits_staging = false;  // every piece fits the staging memory at once
};

at::TensorOptions staging_options() {
  auto options = at::TensorOptions().dtype(at::kByte);
  // Pinned memory speeds device-to-host copies. It needs a GPU, not only a
  // LibTorch built with CUDA: on a machine without one (a CUDA build on a
  // login node, CI) cudaHostAlloc fails, so ask for it only when a device is
  // there, and use pageable memory otherwise.
  return torch::cuda::device_count() > 0 ? options.pinned_memory(true) : options;
}

}  // namespace

struct AsyncSaver::Impl {
  detail::Comm comm;
  detail::StagingRing ring;
  at::Tensor staging;  // the staging memory, allocated once
  AsyncStats stats;

  std::mutex mutex;
  std::condition_variable changed;
  std::unique_ptr<Job> job;   // the save in flight
  bool busy = false;          // a job exists and is not finished
  bool staging_done = true;   // the caller finished staging the job
  std::deque<Staged> staged;  // pieces staged, not yet written
  bool stop = false;
  std::thread worker;
  const double timeout;  // the saver's (AsyncOptions), for saves that set none

  Impl(MPI_Comm user_comm, const AsyncOptions& options)
      : comm(user_comm, 0), ring(options.staging_bytes), timeout(detail::resolve_timeout(options.timeout_seconds)) {
    // Agreed before it is used (see CheckpointSession).
    comm.require_same("AsyncSaver", {{"timeout_seconds", detail::timeout_text(timeout)}});
    comm.set_timeout(timeout);
    if (options.staging_bytes < 4096) throw UsageError("h5dcp: AsyncOptions::staging_bytes must be at least 4096");
    if (comm.distributed()) detail::require_thread_multiple("async saves");
    staging = at::empty({options.staging_bytes}, staging_options());
    staging.zero_();  // touch every page now, not during a save
    stats.staging_bytes = options.staging_bytes;
    stats.staging_allocations = 1;
    worker = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [this] { return !busy; });
      stop = true;
    }
    changed.notify_all();
    worker.join();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [this] { return !busy; });
  }

  void push(Staged s) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      staged.push_back(std::move(s));
    }
    changed.notify_all();
  }

  Staged pop() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [this] { return !staged.empty(); });
    auto s = std::move(staged.front());
    staged.pop_front();
    return s;
  }

  // The background thread: one job at a time, every HDF5 call of it.
  void run() {
    while (true) {
      Job* current = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [this] { return stop || (busy && job); });
        if (stop) return;
        current = job.get();
      }
      write_job(*current);
      {
        // The caller may still be staging (after a failure it stops at the
        // next piece): the ring is reset only once it is done.
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [this] { return staging_done; });
        ring.reset();
        staged.clear();
        job.reset();  // gives the HDF5 gate back
        busy = false;
      }
      changed.notify_all();
    }
  }

  void write_job(Job& j) {
    try {
      detail::SilenceHdf5Errors silence;
      detail::write_and_publish(comm, j.plan, j.path, [&](detail::ContainerWriter& writer) {
        // When the staging memory holds the whole shard there is nothing to
        // pipeline: writing only once the caller is done keeps its copy
        // (the time it is blocked) from competing with the write for cores
        // and memory bandwidth.
        if (j.fits_staging) {
          std::unique_lock<std::mutex> lock(mutex);
          changed.wait(lock, [this] { return staging_done; });
        }
        std::optional<detail::SlabHasher> hasher;
        std::vector<detail::ChunkChecksums> checksums;
        for (std::size_t i = 0; i < j.pieces.size(); ++i) {
          const auto& piece = j.pieces[i];
          const auto s = pop();
          if (s.failure) std::rethrow_exception(s.failure);
          const auto* staged_bytes = static_cast<const char*>(staging.data_ptr()) + s.offset;
          // Checksummed here, from the staged bytes about to be written
          // (off the caller's critical path), chunk by chunk.
          const auto& t = j.plan.tensors[piece.tensor];
          const auto chunk_index = static_cast<std::size_t>(piece.chunk - t.chunks.data());
          if (i == 0 || j.pieces[i - 1].chunk != piece.chunk)
            hasher.emplace(detail::chunk_hasher(j.plan, piece.tensor, chunk_index));
          hasher->update(staged_bytes, piece.bytes);
          if (i + 1 == j.pieces.size() || j.pieces[i + 1].chunk != piece.chunk)
            checksums.push_back({static_cast<std::uint32_t>(piece.tensor), static_cast<std::uint32_t>(chunk_index),
                                 detail::chunk_slab_rows(j.plan, piece.tensor, chunk_index), hasher->digests()});
          writer.write_block(piece.tensor, piece.box, staged_bytes);
          ring.release_oldest();
        }
        writer.write_values(comm.rank());
        return checksums;
      });
      j.promise.set_value(detail::save_result_of(j.plan));
    } catch (...) {
      ring.abort();  // a caller still staging stops
      j.promise.set_exception(std::current_exception());
    }
  }

  // The caller's part: copy every piece into the staging memory, in order.
  void stage(Job& j, SavePlanner& planner) {
    for (std::size_t i = 0; i < j.pieces.size(); ++i) {
      const auto& piece = j.pieces[i];
      try {
        detail::fault_point("async:stage", comm.rank());
        const auto& t = j.plan.tensors[piece.tensor];
        auto source = detail::resolve_block(planner, t, *piece.chunk);
        for (std::size_t d = 0; d < piece.box.sizes.size(); ++d)
          source = source.narrow(static_cast<std::int64_t>(d), piece.box.offsets[d] - piece.chunk->chunk.offsets[d],
                                 piece.box.sizes[d]);
        const auto offset = ring.reserve(piece.bytes);
        if (!offset) return;  // the background failed: the future says why
        auto* staged_bytes = static_cast<char*>(staging.data_ptr()) + *offset;
        auto target =
            at::from_blob(staged_bytes, piece.box.sizes, at::TensorOptions().dtype(detail::to_scalar_type(t.dtype)));
        target.copy_(source);
        stats.staged_bytes += piece.bytes;
        push(Staged{*offset, nullptr});
      } catch (...) {
        push(Staged{0, std::current_exception()});
        return;
      }
    }
  }
};

AsyncSaver::AsyncSaver(MPI_Comm comm, AsyncOptions options) : impl_(std::make_unique<Impl>(comm, options)) {}

AsyncSaver::~AsyncSaver() = default;

void AsyncSaver::wait() { impl_->wait_idle(); }

AsyncStats AsyncSaver::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

std::future<SaveResult> AsyncSaver::save(const StateDict& state_dict, const std::string& path,
                                         const SaveOptions& options) {
  auto& impl = *impl_;
  const auto started = std::chrono::steady_clock::now();
  impl.wait_idle();
  // Agreed before any rank can refuse on its own (and leave the others
  // waiting in the plan step). A save that sets no timeout has the saver's;
  // one that does has its own, for every phase of this save (no job is in
  // flight after wait_idle, so the background reads the new value only with
  // the job handed over under the mutex).
  const double timeout = options.timeout_seconds == 0 ? impl.timeout : detail::resolve_timeout(options.timeout_seconds);
  impl.comm.require_same("async save", {{"path", "'" + path + "'"},
                                        {"coordinator", std::to_string(options.coordinator)},
                                        {"io_mode", detail::io_mode_text(options.io_mode)},
                                        {"timeout_seconds", detail::timeout_text(timeout)}});
  impl.comm.set_timeout(timeout);
  if (options.coordinator != 0) throw UsageError("h5dcp: async saves use rank 0 as the coordinator");
  impl.comm.require_visible("async save", path, [&] { detail::check_directory_of(path); });
  // Held until the background finishes the job (the job owns it then):
  // taken here, in the same collective order on every rank, and given back
  // by this hold if anything fails before the hand-over.
  detail::Hdf5GateHold gate;
  DefaultSavePlanner default_planner;
  SavePlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  auto job = std::make_unique<Job>();
  StateDict expanded;
  const bool expand = detail::has_stateful(state_dict);
  job->plan = detail::plan_save(impl.comm, planner, expand ? expanded : state_dict, path, [&] {
    if (expand) expanded = detail::expand_for_save(state_dict);
  });
  job->path = path;
  // Pieces of at most half the staging memory, so one can be written while
  // the next is copied.
  const auto piece_limit = std::max<std::int64_t>(impl.ring.capacity() / 2, 64);
  const int rank = impl.comm.rank();
  for (std::size_t ti = 0; ti < job->plan.tensors.size(); ++ti) {
    const auto& t = job->plan.tensors[ti];
    const auto element = static_cast<std::int64_t>(dtype_size(t.dtype));
    for (const auto& c : t.chunks)
      if (c.writer == rank)
        for (auto& box : detail::split_block(c.chunk, element, piece_limit)) {
          std::int64_t bytes = element;
          for (auto s : box.sizes) bytes *= s;
          job->pieces.push_back(Piece{ti, &c, std::move(box), bytes});
        }
  }
  std::vector<std::int64_t> piece_bytes;
  for (const auto& p : job->pieces) piece_bytes.push_back(p.bytes);
  job->fits_staging = impl.ring.fits_at_once(piece_bytes);
  auto future = job->promise.get_future();
  gate.hand_over();
  job->gate.emplace(std::move(gate));
  Job& running = *job;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.stats.staged_bytes = 0;
    impl.staging_done = false;
    impl.job = std::move(job);
    impl.busy = true;
  }
  impl.changed.notify_all();
  impl.stage(running, planner);
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.staging_done = true;
    impl.stats.blocking_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  impl.changed.notify_all();
  return future;
}

// --- the process-wide savers of async_save ------------------------------------

namespace {

std::mutex savers_mutex;
std::map<MPI_Comm, std::unique_ptr<AsyncSaver>>& savers() {
  static std::map<MPI_Comm, std::unique_ptr<AsyncSaver>> instance;
  return instance;
}

}  // namespace

std::future<SaveResult> async_save(const StateDict& state_dict, const std::string& path, const SaveOptions& options,
                                   MPI_Comm comm) {
  AsyncSaver* saver = nullptr;
  {
    std::lock_guard<std::mutex> lock(savers_mutex);
    auto& slot = savers()[comm];
    if (!slot) slot = std::make_unique<AsyncSaver>(comm);
    saver = slot.get();
  }
  return saver->save(state_dict, path, options);
}

void finish_async_saves() {
  std::lock_guard<std::mutex> lock(savers_mutex);
  savers().clear();
}

}  // namespace h5dcp
