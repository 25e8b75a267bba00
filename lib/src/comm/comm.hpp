#pragma once
// The thin MPI layer (PyTorch DCP's _DistWrapper): a move-only wrapper over a
// duplicated communicator, byte collectives, and exception-robust steps.
//
// Call-order rule: every member except the accessors is collective; all ranks
// call the same members in the same order. The steps never let an exception
// escape on one rank only: a throw in `map` or `reduce` on any rank is caught,
// exchanged, and becomes the same CheckpointError on every rank (naming the
// step and each failing rank with its message).
//
// Without MPI initialized (or after MPI_Finalize) a Comm is a single process
// of rank 0 and every collective is a local no-op copy, like PyTorch DCP's
// no_dist mode. Needs only MPI_THREAD_SINGLE, used from one thread at a time.

#include <mpi.h>

#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_codec.hpp"

namespace h5dcp::detail {

/// Throws IoError naming `call` and MPI's error string when `code` is not
/// MPI_SUCCESS.
void check_mpi(int code, const char* call);

/// True between MPI_Init and MPI_Finalize.
bool mpi_is_active();

/// An argument of a collective call that every rank must pass the same: its
/// name and its value as text (compared exactly, shown in errors).
struct Setting {
  std::string name;
  std::string value;
};

class Comm {
 public:
  /// Duplicates `comm` (so h5dcp's messages never mix with the caller's) when
  /// MPI is active; a single-process Comm otherwise. Collective over `comm`.
  /// Throws UsageError (on every rank) when `coordinator` is not a rank of
  /// `comm` or when ranks passed different coordinators.
  explicit Comm(MPI_Comm comm, int coordinator = 0);
  /// A single-process Comm, whether MPI is active or not.
  static Comm single_process();

  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  Comm(Comm&& other) noexcept;
  Comm& operator=(Comm&& other) noexcept;
  /// Frees the duplicate (never WORLD/SELF, never after MPI_Finalize).
  ~Comm();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  int coordinator() const noexcept { return coordinator_; }
  bool is_coordinator() const noexcept { return rank_ == coordinator_; }
  bool distributed() const noexcept { return comm_ != MPI_COMM_NULL; }
  /// The duplicated communicator; MPI_COMM_NULL for a single process.
  MPI_Comm raw() const noexcept { return comm_; }

  void barrier() const;
  /// The coordinator's `data` on every rank.
  void broadcast(Bytes& data) const;
  /// Every rank's `data`, in rank order, on the coordinator; empty elsewhere.
  std::vector<Bytes> gather(const Bytes& data) const;
  /// Every rank's `data`, in rank order, on every rank.
  std::vector<Bytes> all_gather(const Bytes& data) const;
  /// Element `rank` of the coordinator's `data` on each rank (`data` is only
  /// read on the coordinator and must hold size() elements there).
  Bytes scatter(const std::vector<Bytes>& data) const;

  /// Runs `map` on every rank, `reduce` on the coordinator over all results
  /// (rank order); `reduce` returns one payload per rank; each rank gets its own.
  Bytes reduce_scatter(std::string_view step, const std::function<Bytes()>& map,
                       const std::function<std::vector<Bytes>(std::vector<Bytes>)>& reduce) const;
  /// Runs `map` on every rank, `reduce` on the coordinator, and returns the
  /// reduced payload on every rank.
  Bytes all_reduce(std::string_view step, const std::function<Bytes()>& map,
                   const std::function<Bytes(std::vector<Bytes>)>& reduce) const;
  /// Runs `map` on every rank and returns all results on every rank.
  std::vector<Bytes> all_gather(std::string_view step, const std::function<Bytes()>& map) const;
  /// Runs `map` on the coordinator and returns its result on every rank.
  Bytes broadcast(std::string_view step, const std::function<Bytes()>& map) const;
  /// Runs `map` on every rank, which returns one payload per rank (what this
  /// rank sends to each; empty: nothing), and returns what every rank sent
  /// to this one, by source rank. A failing map is the step's CheckpointError
  /// on every rank before anything moves. The payloads travel point to point
  /// (in pieces of at most 1 GiB, so any size goes), and with a timeout the
  /// wait for them has the deadline of an exchange: a peer that dies
  /// mid-transfer makes the others throw CheckpointError, not hang.
  std::vector<Bytes> exchange(std::string_view step, const std::function<std::vector<Bytes>()>& map) const;
  /// As exchange, but `map` returns views of the caller's buffers (sent as
  /// they are, not copied; they must outlive the call), and each payload
  /// lands in `incoming[source]` (resized to one per rank), whose memory is
  /// reused when it is as large: a step that exchanges the same sizes time
  /// after time allocates nothing more (and page-faults nothing more).
  void exchange_into(std::string_view step, const std::function<std::vector<std::string_view>()>& map,
                     std::vector<Bytes>& incoming) const;

  /// Bounds how long a step waits for the other ranks (0: forever). With a
  /// timeout, every step first checks, with point-to-point messages and a
  /// deadline, that every rank arrived (before its map and before the
  /// exchange): the ranks that arrived throw a CheckpointError naming the
  /// ranks that did not, instead of waiting in a collective forever. After a
  /// timeout the Comm is unusable (timed_out()): its steps throw at once,
  /// and callers must not start collective cleanup with it.
  void set_timeout(double seconds) noexcept { timeout_ = seconds; }
  double timeout() const noexcept { return timeout_; }
  bool timed_out() const noexcept { return timed_out_; }

  /// Throws UsageError on every rank unless all ranks passed the same
  /// `value` (compared by hash): catches calls whose arguments differ across
  /// ranks (paths, options) before they can deadlock or write two files.
  void require_same(std::string_view what, std::string_view value) const;

  /// Throws UsageError on every rank unless all ranks passed the same
  /// `settings` (the same names in the same order). One allreduce of a hash;
  /// only when they differ are the settings exchanged, to name each one that
  /// differs, the ranks that differ from the coordinator and their values:
  /// "h5dcp: load: ranks passed different options: rank 2 has
  /// timeout_seconds=5, rank 0 has 30; every rank must pass the same". A
  /// setting named "path" is a checkpoint path. Plain collectives, no
  /// deadline: this is what agrees on the timeout in the first place.
  void require_same(std::string_view operation, const std::vector<Setting>& settings) const;

  /// Agrees on a local check of `path` (it exists, it is the right kind of
  /// file) that must pass on every rank before a collective call uses it:
  /// runs `check` on every rank, then one allreduce of the outcome. When it
  /// failed on some ranks only, every rank throws the same IoError: "h5dcp:
  /// load: '<path>' is not visible on ranks 1, 3: use a shared file system
  /// (rank 1: <what it threw>)". Otherwise returns this rank's failure when
  /// the check failed on every rank (callers rethrow it or let the usual
  /// path report it), nullptr when it passed everywhere.
  std::exception_ptr require_visible(std::string_view operation, const std::string& path,
                                     const std::function<void()>& check) const;

 private:
  Comm() = default;
  void release() noexcept;
  /// Waits for a request of a byte exchange: forever without a timeout,
  /// else until a deadline (then throws CheckpointError, timed_out()).
  void complete(MPI_Request& request) const;
  /// Checks that every rank reached this point of `step` within the timeout.
  void arrive(std::string_view step) const;
  /// arrive, map (tagged with success or failure), arrive.
  Bytes run_map(std::string_view step, const std::function<Bytes()>& map) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int coordinator_ = 0;
  double timeout_ = 0;
  mutable bool timed_out_ = false;
  mutable std::string current_step_;  // for errors of the byte exchanges
};

}  // namespace h5dcp::detail
