// The async save engine: plan in the caller's thread, stage there or on a
// staging thread, write in the background.

#include "api/async_save_engine.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <torch/cuda.h>  // declarations only: device_count() is 0 without CUDA or without a GPU

#include <condition_variable>
#include <deque>
#include <map>
#include <optional>
#include <system_error>
#include <thread>

#include "api/checkpoint_session.hpp"
#include "api/save_steps.hpp"
#include "api/staging_ring.hpp"
#include "api/stateful_expansion.hpp"
#include "base/background_thread.hpp"
#include "base/fault_injection.hpp"
#include "comm/plain_calls.hpp"
#include "h5dcp/error.hpp"
#include "plan/block_writes.hpp"
#include "torch/device_copies.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp::detail {
namespace {

// A piece the caller staged, or the failure that stopped staging.
struct Staged {
  std::int64_t offset = 0;
  std::exception_ptr failure;
};

struct Job {
  // Declared first, destroyed last: the HDF5 gate and the communicator stay
  // until everything else of the save is gone.
  std::unique_ptr<CheckpointSession> session;
  // What is staged: the caller's state dict (its tensors shared, so they
  // stay alive while a staging thread copies them) or its Stateful
  // expansion, and the planner that resolves its blocks.
  StateDict state_dict;
  DefaultSavePlanner default_planner;
  SavePlanner* planner = &default_planner;
  GlobalSavePlan plan;
  bool plan_reused = false;  // plan came from SaveOptions::plan_cache
  std::string path;
  IoMode io_mode = IoMode::Collective;
  std::vector<BlockWrite> blocks;    // this rank's, in plan order
  std::vector<StagingPiece> pieces;  // the blocks, as staged
  // Every rank stages its blocks whole and at once (the plan says so to all
  // ranks alike): the background then writes them like save() does, in
  // io_mode. Otherwise blocks stream through staging, written independently.
  bool whole_blocks = false;
  bool fits_staging = false;  // this rank's pieces all fit the staging memory at once
  std::promise<SaveResult> promise;
  std::promise<void> staged;  // this rank's tensors are free again
  CallerWork caller_work;     // where the caller's GPU work stood when it called
};

at::TensorOptions staging_options() {
  auto options = at::TensorOptions().dtype(at::kByte);
  // Pinned memory speeds device-to-host copies. It needs a GPU, not only a
  // LibTorch built with CUDA: on a machine without one (a CUDA build on a
  // login node, CI) cudaHostAlloc fails, so ask for it only when a device is
  // there, and use pageable memory otherwise.
  return torch::cuda::device_count() > 0 ? options.pinned_memory(true) : options;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Whether every rank's blocks, staged whole one after another, fit `ring`
// at once. Every rank computes the same answer from the global plan, in one
// pass over it: this runs while the caller is blocked.
bool every_rank_fits_whole(const GlobalSavePlan& plan, const StagingRing& ring) {
  for (const auto& sizes : block_bytes_by_rank(plan))
    if (!ring.fits_at_once(sizes)) return false;
  return true;
}

}  // namespace

struct AsyncSaveEngine::Impl {
  StagingRing ring;
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
  std::thread stager;  // the job's staging thread, if it stages in the background

  explicit Impl(std::int64_t staging_bytes) : ring(staging_bytes) {
    staging = at::empty({staging_bytes}, staging_options());
    staging.zero_();  // touch every page now, not during a save
    stats.staging_bytes = staging_bytes;
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

  void wait_staging_done() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [this] { return staging_done; });
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

  char* staged_at(std::int64_t offset) const { return static_cast<char*>(staging.data_ptr()) + offset; }

  // The background thread: one job at a time, every HDF5 call of it.
  void run() {
    run_as_background_thread();
    while (true) {
      Job* current = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [this] { return stop || (busy && job); });
        if (stop) return;
        current = job.get();
      }
      write_job(*current);
      std::thread finished_stager;
      {
        // The caller (or the staging thread) may still be staging (after a
        // failure it stops at the next piece): the ring is reset only once
        // it is done.
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [this] { return staging_done; });
        finished_stager = std::move(stager);
      }
      if (finished_stager.joinable()) finished_stager.join();
      {
        std::lock_guard<std::mutex> lock(mutex);
        ring.reset();
        staged.clear();
        job.reset();  // frees the communicator, gives the HDF5 gate back
        busy = false;
      }
      changed.notify_all();
    }
  }

  void write_job(Job& j) {
    try {
      // When every block is staged whole, the save, creating the file
      // included, starts once the copy is done, whoever copies (the caller
      // in async_save, the staging thread in async_stage_and_save):
      // creating the file is tens of milliseconds of HDF5 and MPI-IO work
      // (MPI polls while it waits) on every rank, which took cores from the
      // copy, and the copy is what the caller waits for (blocked in the
      // call, or on `staged` before its next step). Nothing is written
      // before the copy is done either way (write_whole). The choice is the
      // same on every rank (the plan decides it), so no rank waits in the
      // collective create for one still copying.
      if (j.whole_blocks) wait_staging_done();
      const auto& comm = j.session->comm();
      write_and_publish(comm, j.plan, j.path, [&](ContainerWriter& writer) {
        return j.whole_blocks ? write_whole(j, writer) : write_streamed(j, writer);
      });
      j.promise.set_value(save_result_of(j.plan, j.plan_reused));
    } catch (...) {
      ring.abort();  // a caller still staging stops
      j.promise.set_exception(std::current_exception());
    }
  }

  // Every block is staged whole: written like save() writes, once the copy
  // is done (write_job waits for it before the file is created, so that the
  // copy does not compete with the save for cores and memory bandwidth).
  std::vector<ChunkChecksums> write_whole(Job& j, ContainerWriter& writer) {
    std::map<std::pair<std::size_t, std::size_t>, std::size_t> block_of;
    for (std::size_t b = 0; b < j.blocks.size(); ++b) block_of[{j.blocks[b].tensor, j.blocks[b].chunk}] = b;
    std::vector<std::int64_t> offset_of(j.blocks.size(), -1);
    std::exception_ptr failure;
    for (const auto& piece : j.pieces) {
      auto s = pop();
      if (s.failure) {
        failure = s.failure;
        break;  // staging stopped here
      }
      offset_of[piece.block] = s.offset;
    }
    std::vector<ChunkChecksums> checksums;
    // A rank whose staging failed still takes part in every collective
    // write, with nothing to write: the writer reports the failure after.
    writer.write(j.session->comm().rank(), j.io_mode, [&](const PlannedTensor& tensor, const PlannedChunk& chunk) {
      if (failure) std::rethrow_exception(failure);
      const auto t = static_cast<std::size_t>(&tensor - j.plan.tensors.data());
      const auto k = static_cast<std::size_t>(&chunk - tensor.chunks.data());
      const auto b = block_of.at({t, k});
      const char* bytes = staged_at(offset_of[b]);
      // Checksummed here, from the staged bytes about to be written.
      checksums.push_back(checksum_block(j.blocks[b], bytes));
      return std::shared_ptr<const void>(bytes, [](const void*) {});
    });
    return checksums;
  }

  // Pieces stream through the staging memory: each is written (independent
  // I/O) as soon as it is staged, and its room given back.
  std::vector<ChunkChecksums> write_streamed(Job& j, ContainerWriter& writer) {
    // When the staging memory holds the whole shard there is nothing to
    // pipeline: writing only once the caller is done keeps its copy from
    // competing with the write.
    if (j.fits_staging) wait_staging_done();
    std::optional<SlabHasher> hasher;
    std::vector<ChunkChecksums> checksums;
    for (std::size_t i = 0; i < j.pieces.size(); ++i) {
      const auto& piece = j.pieces[i];
      const auto& block = j.blocks[piece.block];
      const auto s = pop();
      if (s.failure) std::rethrow_exception(s.failure);
      const char* bytes = staged_at(s.offset);
      // Checksummed here (off the caller's critical path), block by block.
      if (i == 0 || j.pieces[i - 1].block != piece.block) hasher.emplace(block_hasher(block));
      hasher->update(bytes, piece.bytes);
      if (i + 1 == j.pieces.size() || j.pieces[i + 1].block != piece.block)
        checksums.push_back(block_checksums(block, *hasher));
      writer.write_block(block.tensor, piece.box, bytes);
      ring.release_oldest();
    }
    writer.write_values(j.session->comm().rank());
    return checksums;
  }

  // Staging (in the caller's thread or the staging thread): copies every
  // piece into the staging memory, in order, then says so to the background
  // thread and to whoever waits on the job's `staged`.
  void stage_and_finish(Job& j, std::chrono::steady_clock::time_point started) {
    const auto copied = stage(j);
    {
      std::lock_guard<std::mutex> lock(mutex);
      stats.staged_bytes = copied;
      stats.staging_seconds = seconds_since(started);
    }
    // The stats first (whoever waits on `staged` may read them), and before
    // staging_done: from then on the background thread may free the job.
    j.staged.set_value();
    {
      std::lock_guard<std::mutex> lock(mutex);
      staging_done = true;
    }
    changed.notify_all();
  }

  // Returns the bytes copied. A failure goes to the background thread,
  // which fails the save on every rank. Copies from a GPU run on a side
  // stream, after the work the caller had queued when it called: each piece
  // goes to the writer once its copy is in host memory, while the next ones
  // are copied.
  std::int64_t stage(Job& j) {
    const int rank = j.session->comm().rank();
    // Staged bytes are plain copies: no autograd graph for them.
    const at::NoGradGuard no_grad;
    DeviceToHost copies(j.caller_work);
    std::deque<std::pair<std::size_t, std::int64_t>> copying;  // copy number, offset: not yet handed over
    // Hands over, in order, the pieces whose copies are done (`all`: waits
    // for every one).
    auto hand_over = [&](bool all) {
      while (!copying.empty()) {
        const auto [number, offset] = copying.front();
        if (all)
          copies.wait(number);
        else if (!copies.finished(number))
          return;
        copying.pop_front();
        push(Staged{offset, nullptr});
      }
    };
    std::int64_t copied = 0;
    try {
      for (const auto& piece : j.pieces) {
        fault_point("async:stage", rank);
        const auto& block = j.blocks[piece.block];
        const auto& t = j.plan.tensors[block.tensor];
        const auto& chunk = t.chunks[block.chunk];
        auto source = resolve_block(*j.planner, t, chunk);
        for (std::size_t d = 0; d < piece.box.sizes.size(); ++d)
          source = source.narrow(static_cast<std::int64_t>(d), piece.box.offsets[d] - chunk.chunk.offsets[d],
                                 piece.box.sizes[d]);
        auto offset = ring.try_reserve(piece.bytes);
        if (!offset) {
          // The writer may need the room of the pieces still copying.
          hand_over(true);
          offset = ring.reserve(piece.bytes);
        }
        if (!offset) return copied;  // the background failed: the future says why
        auto target =
            at::from_blob(staged_at(*offset), piece.box.sizes, at::TensorOptions().dtype(to_scalar_type(t.dtype)));
        copying.emplace_back(copies.start(source, target), *offset);
        copied += piece.bytes;
        hand_over(false);
      }
      hand_over(true);
    } catch (...) {
      push(Staged{0, std::current_exception()});
    }
    return copied;
  }
};

AsyncSaveEngine::AsyncSaveEngine(std::int64_t staging_bytes) : impl_(std::make_unique<Impl>(staging_bytes)) {}

AsyncSaveEngine::~AsyncSaveEngine() = default;

std::int64_t AsyncSaveEngine::staging_bytes() const noexcept { return impl_->ring.capacity(); }

void AsyncSaveEngine::wait_idle() { impl_->wait_idle(); }

AsyncStats AsyncSaveEngine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

StagedSave AsyncSaveEngine::start(std::unique_ptr<CheckpointSession> session, const StateDict& state_dict,
                                  const std::string& path, const SaveOptions& options,
                                  std::chrono::steady_clock::time_point started, bool stage_in_background) {
  auto& impl = *impl_;
  const auto& comm = session->comm();
  auto job = std::make_unique<Job>();
  if (options.planner != nullptr) job->planner = options.planner;
  auto planned = plan_save(
      comm, *job->planner, job->state_dict, path,
      [&] { job->state_dict = has_stateful(state_dict) ? expand_for_save(state_dict) : state_dict; },
      options.plan_cache);
  job->plan = std::move(planned.plan);
  job->plan_reused = planned.reused;
  // In the caller's thread: the copies, made later on a side stream, wait
  // for what it queued on its streams before the call.
  job->caller_work = CallerWork(job->state_dict);
  job->path = path;
  job->io_mode = options.io_mode;
  job->blocks = blocks_written_by(job->plan, comm.rank());
  job->whole_blocks = every_rank_fits_whole(job->plan, impl.ring);
  // Streamed pieces are at most half the staging memory, so one can be
  // written while the next is copied.
  const auto piece_limit =
      job->whole_blocks ? impl.ring.capacity() : std::max<std::int64_t>(impl.ring.capacity() / 2, 64);
  job->pieces = staging_pieces(job->plan, job->blocks, piece_limit);
  std::vector<std::int64_t> piece_bytes;
  for (const auto& p : job->pieces) piece_bytes.push_back(p.bytes);
  job->fits_staging = impl.ring.fits_at_once(piece_bytes);
  StagedSave handles{job->staged.get_future().share(), job->promise.get_future().share()};
  // The session (its HDF5 gate, taken in the same collective order on every
  // rank) now belongs to the job: the background thread gives it back.
  session->hand_over();
  job->session = std::move(session);
  Job& running = *job;
  const auto staging_started = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.stats.staged_bytes = 0;
    impl.stats.staging_seconds = 0;
    impl.stats.background_staging = stage_in_background;
    impl.staging_done = false;
    impl.job = std::move(job);
    impl.busy = true;
    // Set here when a thread stages: once it is woken it may hold the lock
    // while it waits for a core, and the caller would wait with it.
    impl.stats.blocking_seconds = seconds_since(started);
    // Started under the lock: the background thread takes it over (to join
    // it) only once staging is done, which needs the lock too.
    if (stage_in_background) {
      try {
        impl.stager = std::thread([&impl, &running, staging_started] {
          run_as_background_thread();
          impl.stage_and_finish(running, staging_started);
        });
      } catch (const std::system_error&) {
        stage_in_background = false;  // no thread to be had: stage here, as async_save does
        impl.stats.background_staging = false;
      }
    }
  }
  impl.changed.notify_all();
  if (stage_in_background) return handles;
  impl.stage_and_finish(running, staging_started);
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.stats.blocking_seconds = seconds_since(started);
  }
  return handles;
}

// --- the slot ------------------------------------------------------------------

StagedSave AsyncSaveSlot::save(const StateDict& state_dict, const std::string& path, const AsyncSaveOptions& options,
                               MPI_Comm comm, bool stage_in_background) {
  std::lock_guard<std::recursive_mutex> lock(callers_);
  const auto started = std::chrono::steady_clock::now();
  if (engine_) engine_->wait_idle();
  require_thread_multiple("async saves");
  auto session =
      std::make_unique<CheckpointSession>(comm, options.coordinator, "async_save", path, options.timeout_seconds, [&] {
        auto settings = save_settings(options);
        settings.push_back({"staging_bytes", std::to_string(options.staging_bytes)});
        return settings;
      }());
  // Agreed above, so every rank refuses alike.
  if (options.staging_bytes < 4096)
    throw UsageError("h5dcp: AsyncSaveOptions::staging_bytes must be at least 4096, not " +
                     std::to_string(options.staging_bytes));
  session->require_directory_everywhere();
  // Made (or remade for a new size) in a collective step, so that a rank
  // that cannot allocate its staging memory fails the save on every rank.
  session->comm().all_gather("async_save:staging", [&] {
    if (!engine_ || engine_->staging_bytes() != options.staging_bytes) {
      engine_.reset();
      engine_ = std::make_unique<AsyncSaveEngine>(options.staging_bytes);
      ++allocations_;
    }
    return Bytes();
  });
  return engine_->start(std::move(session), state_dict, path, options, started, stage_in_background);
}

void AsyncSaveSlot::finish() noexcept {
  std::lock_guard<std::recursive_mutex> lock(callers_);
  engine_.reset();
  allocations_ = 0;
}

AsyncStats AsyncSaveSlot::stats() const {
  std::lock_guard<std::recursive_mutex> lock(callers_);
  auto stats = engine_ ? engine_->stats() : AsyncStats{};
  stats.staging_allocations = allocations_;
  return stats;
}

}  // namespace h5dcp::detail
