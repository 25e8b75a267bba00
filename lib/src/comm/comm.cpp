#include "comm/comm.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/exception_text.hpp"
#include "base/fault_injection.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp {
H5DCP_MESSAGE_FIELDS(detail::Setting, m.name, m.value);
}

namespace h5dcp::detail {
namespace {

// Communicators whose exchange timed out, kept until MPI_Finalize (see
// Comm::release).
std::mutex retired_mutex;
std::vector<MPI_Comm>& retired_comms() {
  static std::vector<MPI_Comm> comms;
  return comms;
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still
// works: the one hook MPI gives for freeing what must live until the end.
int free_retired_comms(MPI_Comm, int, void*, void*) {
  std::lock_guard<std::mutex> lock(retired_mutex);
  for (auto& comm : retired_comms()) MPI_Comm_free(&comm);
  retired_comms().clear();
  return MPI_SUCCESS;
}

void retire_until_finalize(MPI_Comm comm) noexcept {
  std::lock_guard<std::mutex> lock(retired_mutex);
  static const bool hooked = [] {
    int keyval = MPI_KEYVAL_INVALID;
    const bool set =
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_retired_comms, &keyval, nullptr) == MPI_SUCCESS &&
        MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr) == MPI_SUCCESS;
    // Freed now, released by MPI once the attribute is deleted (in
    // MPI_Finalize): nothing is left for the leak checker.
    if (keyval != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&keyval);
    return set;
  }();
  (void)hooked;  // without the hook the communicator is only never freed
  try {
    retired_comms().push_back(comm);
  } catch (...) {
  }
}

int checked_count(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw Error("h5dcp: message of " + std::to_string(n) + " bytes exceeds MPI's int count");
  return static_cast<int>(n);
}

// Byte displacements for the v-collectives; throws when they overflow int.
std::vector<int> displacements(const std::vector<int>& counts) {
  std::vector<int> displs(counts.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    displs[i] = checked_count(total);
    total += static_cast<std::size_t>(counts[i]);
  }
  checked_count(total);
  return displs;
}

}  // namespace

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  throw IoError(std::string("h5dcp: ") + call + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

bool mpi_is_active() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

Comm::Comm(MPI_Comm comm, int coordinator) {
  if (mpi_is_active()) {
    check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    // Errors become exceptions here instead of aborting the job.
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    // Ranks that disagree on the coordinator would wait for each other
    // forever; agree first (no root needed), so all of them throw.
    int bounds[2] = {coordinator, -coordinator};
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
    if (bounds[0] != -bounds[1]) {
      release();
      throw UsageError("h5dcp: ranks passed different coordinator ranks (from " + std::to_string(-bounds[1]) + " to " +
                       std::to_string(bounds[0]) + "); every rank must pass the same");
    }
  }
  if (coordinator < 0 || coordinator >= size_) {
    release();
    throw UsageError("h5dcp: coordinator rank " + std::to_string(coordinator) +
                     " is not a rank of a communicator of size " + std::to_string(size_));
  }
  coordinator_ = coordinator;
}

Comm Comm::single_process() { return Comm(); }

Comm::Comm(Comm&& other) noexcept
    : comm_(other.comm_), rank_(other.rank_), size_(other.size_), coordinator_(other.coordinator_) {
  other.comm_ = MPI_COMM_NULL;
}

Comm& Comm::operator=(Comm&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = other.comm_;
    rank_ = other.rank_;
    size_ = other.size_;
    coordinator_ = other.coordinator_;
    other.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

Comm::~Comm() { release(); }

void Comm::release() noexcept {
  // A communicator whose exchange timed out still has messages in flight
  // (a late rank's part of the abandoned step): freeing it now would let
  // the next duplicate reuse its context id and receive them (a later
  // save or load then hangs). It is freed when MPI finalizes instead.
  if (timed_out_ && comm_ != MPI_COMM_NULL && mpi_is_active()) {
    retire_until_finalize(comm_);
    comm_ = MPI_COMM_NULL;
    return;
  }
  // Only our own duplicate is ever freed; after MPI_Finalize nothing may be.
  if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && mpi_is_active())
    MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

void Comm::barrier() const {
  if (distributed()) check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

void Comm::broadcast(Bytes& data) const {
  if (!distributed()) return;
  auto size = static_cast<std::uint64_t>(data.size());
  MPI_Request r1 = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(&size, 1, MPI_UINT64_T, coordinator_, comm_, &r1), "MPI_Ibcast");
  complete(r1);
  data.resize(static_cast<std::size_t>(size));
  MPI_Request r2 = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(data.data(), checked_count(data.size()), MPI_BYTE, coordinator_, comm_, &r2), "MPI_Ibcast");
  complete(r2);
}

std::vector<Bytes> Comm::gather(const Bytes& data) const {
  if (!distributed()) return {data};
  int count = checked_count(data.size());
  std::vector<int> counts(is_coordinator() ? static_cast<std::size_t>(size_) : 0);
  MPI_Request r1 = MPI_REQUEST_NULL;
  check_mpi(MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, coordinator_, comm_, &r1), "MPI_Igather");
  complete(r1);
  std::vector<int> displs;
  Bytes all;
  if (is_coordinator()) {
    displs = displacements(counts);
    all.resize(static_cast<std::size_t>(displs.back()) + static_cast<std::size_t>(counts.back()));
  }
  MPI_Request r2 = MPI_REQUEST_NULL;
  check_mpi(MPI_Igatherv(data.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, coordinator_,
                         comm_, &r2),
            "MPI_Igatherv");
  complete(r2);
  std::vector<Bytes> result;
  for (std::size_t i = 0; i < counts.size(); ++i) result.emplace_back(all.substr(displs[i], counts[i]));
  return result;
}

std::vector<Bytes> Comm::all_gather(const Bytes& data) const {
  if (!distributed()) return {data};
  int count = checked_count(data.size());
  std::vector<int> counts(static_cast<std::size_t>(size_));
  MPI_Request r1 = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_, &r1), "MPI_Iallgather");
  complete(r1);
  const auto displs = displacements(counts);
  Bytes all(static_cast<std::size_t>(displs.back()) + static_cast<std::size_t>(counts.back()), '\0');
  MPI_Request r2 = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Iallgatherv(data.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, comm_, &r2),
      "MPI_Iallgatherv");
  complete(r2);
  std::vector<Bytes> result;
  for (std::size_t i = 0; i < counts.size(); ++i) result.emplace_back(all.substr(displs[i], counts[i]));
  return result;
}

Bytes Comm::scatter(const std::vector<Bytes>& data) const {
  if (!distributed()) return data.at(0);
  std::vector<int> counts;
  std::vector<int> displs;
  Bytes all;
  if (is_coordinator()) {
    if (data.size() != static_cast<std::size_t>(size_))
      throw Error("h5dcp: scatter needs one payload per rank (" + std::to_string(size_) + "), got " +
                  std::to_string(data.size()));
    for (const auto& d : data) {
      counts.push_back(checked_count(d.size()));
      all += d;
    }
    displs = displacements(counts);
  }
  int count = 0;
  MPI_Request r1 = MPI_REQUEST_NULL;
  check_mpi(MPI_Iscatter(counts.data(), 1, MPI_INT, &count, 1, MPI_INT, coordinator_, comm_, &r1), "MPI_Iscatter");
  complete(r1);
  Bytes mine(static_cast<std::size_t>(count), '\0');
  MPI_Request r2 = MPI_REQUEST_NULL;
  check_mpi(MPI_Iscatterv(all.data(), counts.data(), displs.data(), MPI_BYTE, mine.data(), count, MPI_BYTE,
                          coordinator_, comm_, &r2),
            "MPI_Iscatterv");
  complete(r2);
  return mine;
}

// --- exception-robust steps -------------------------------------------------
//
// Every payload a step exchanges starts with a tag byte: kOk followed by the
// value, or kFailed followed by an encoded rank -> (kind, message) map, so
// that every rank learns what kind of error each failing rank threw. A rank whose
// map throws still takes part in every collective of the step, so nobody
// waits for it.
namespace {

constexpr char kOk = 'O';
constexpr char kFailed = 'F';

Bytes ok(Bytes value) { return kOk + std::move(value); }

using Failures = std::map<int, RankFailure>;

Bytes failed(const Failures& failures) {
  ByteWriter w;
  w.put<std::uint64_t>(failures.size());
  for (const auto& [rank, failure] : failures) {
    w.put<std::int32_t>(rank);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(failure.kind));
    w.put_string(failure.message);
  }
  return kFailed + w.take();
}

ErrorKind kind_from_byte(std::uint8_t byte) {
  const auto kind = static_cast<ErrorKind>(byte);
  switch (kind) {
    case ErrorKind::Usage:
    case ErrorKind::Format:
    case ErrorKind::Io:
    case ErrorKind::Collective:
    case ErrorKind::Other: return kind;
  }
  return ErrorKind::Other;  // a peer of another version: still reported
}

Failures decode_failures(std::string_view body) {
  ByteReader r(body);
  Failures failures;
  for (auto n = r.get_count(); n > 0; --n) {
    const auto rank = r.get<std::int32_t>();
    const auto kind = kind_from_byte(r.get<std::uint8_t>());
    failures[rank] = RankFailure{kind, r.get_string()};
  }
  return failures;
}

// What the exception being handled is, for the other ranks.
RankFailure current_failure() {
  try {
    throw;
  } catch (const std::exception& e) {
    return {error_kind_of(e), exception_text(e)};  // without LibTorch's C++ backtrace
  } catch (...) {
    return {ErrorKind::Other, "unknown exception (not derived from std::exception)"};
  }
}

std::string current_exception_message() { return current_failure().message; }

// Runs `fn` and tags its result; an exception becomes a failure of `rank`.
Bytes run_tagged(int rank, const std::function<Bytes()>& fn) {
  try {
    return ok(fn());
  } catch (...) {
    return failed({{rank, current_failure()}});
  }
}

// Collects the failures among tagged payloads (by rank order).
Failures failures_of(const std::vector<Bytes>& tagged) {
  Failures failures;
  for (std::size_t rank = 0; rank < tagged.size(); ++rank) {
    const auto& t = tagged[rank];
    if (t.empty() || t[0] != kOk) {
      if (t.empty()) {
        failures[static_cast<int>(rank)] = RankFailure{ErrorKind::Other, "empty step payload"};
      } else {
        for (auto& [r, m] : decode_failures(std::string_view(t).substr(1))) failures[r] = std::move(m);
      }
    }
  }
  return failures;
}

// Strips the tag of a step's result, or throws the step's CheckpointError.
Bytes unwrap(std::string_view step, const Bytes& tagged) {
  if (!tagged.empty() && tagged[0] == kOk) return tagged.substr(1);
  throw CheckpointError(std::string(step), tagged.empty()
                                               ? Failures{{-1, RankFailure{ErrorKind::Other, "empty step result"}}}
                                               : decode_failures(std::string_view(tagged).substr(1)));
}

std::vector<Bytes> untag_all(std::vector<Bytes> tagged) {
  for (auto& t : tagged) t.erase(0, 1);
  return tagged;
}

}  // namespace

// --- arrival with a deadline ----------------------------------------------
namespace {

constexpr int kArrivalTag = 23760;
constexpr int kVerdictTag = 23761;
// exchange()'s pieces: MPI matches messages of one source and tag in the
// order they were sent, so a payload's pieces need no numbering.
constexpr int kExchangeTag = 23762;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Polls `requests` until all complete or `deadline`; returns which completed.
// Ranks that arrive together finish a phase within microseconds, so the first
// polls only yield the core; a rank still waiting after them sleeps between
// polls (50 us, doubling to 200 us), leaving the cores to the ranks it waits
// for.
std::vector<bool> wait_until(std::vector<MPI_Request>& requests, double deadline) {
  constexpr int kYieldingPolls = 64;
  constexpr int kFirstSleepMicroseconds = 50;
  constexpr int kLongestSleepMicroseconds = 200;
  std::vector<bool> done(requests.size(), false);
  std::size_t left = requests.size();
  int polls = 0;
  int sleep_us = kFirstSleepMicroseconds;
  while (left > 0) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (done[i]) continue;
      int flag = 0;
      check_mpi(MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (flag) {
        done[i] = true;
        --left;
      }
    }
    if (left == 0 || seconds_now() > deadline) break;
    if (++polls <= kYieldingPolls) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(2 * sleep_us, kLongestSleepMicroseconds);
  }
  return done;
}

// Gives up on requests that did not complete.
void abandon(std::vector<MPI_Request>& requests, const std::vector<bool>& done) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (done[i] || requests[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&requests[i]);
    MPI_Request_free(&requests[i]);
  }
}

std::string after(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

}  // namespace

void Comm::complete(MPI_Request& request) const {
  if (timeout_ <= 0) {
    check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    return;
  }
  // A rank that passed the step's arrival but whose partners gave up on it
  // meanwhile (it was late) would wait here forever: the exchange has a
  // deadline too. A collective request cannot be cancelled; the Comm is
  // unusable after this anyway.
  std::vector<MPI_Request> requests{request};
  const auto done = wait_until(requests, seconds_now() + 2 * timeout_ + 1);
  request = requests[0];
  if (done[0]) return;
  timed_out_ = true;
  throw CheckpointError(current_step_, {{rank_, "the exchange of step '" + current_step_ +
                                                    "' did not complete within " + after(2 * timeout_ + 1) +
                                                    " s (another rank stalled, died or gave up); the job should be "
                                                    "restarted"}});
}

void Comm::arrive(std::string_view step) const {
  if (!distributed() || timeout_ <= 0 || size_ == 1) return;
  const std::string what = "did not reach step '" + std::string(step) + "' within " + after(timeout_) +
                           " s (stalled or dead); the job should be restarted";
  // The verdict: [1] when everyone arrived, else [0, count, missing ranks...].
  std::vector<int> verdict(static_cast<std::size_t>(size_) + 2, 0);
  if (is_coordinator()) {
    std::vector<int> flags(static_cast<std::size_t>(size_), 0);
    std::vector<MPI_Request> requests;
    std::vector<int> from;
    for (int r = 0; r < size_; ++r) {
      if (r == coordinator_) continue;
      requests.emplace_back();
      from.push_back(r);
      check_mpi(MPI_Irecv(&flags[static_cast<std::size_t>(r)], 1, MPI_INT, r, kArrivalTag, comm_, &requests.back()),
                "MPI_Irecv");
    }
    const auto done = wait_until(requests, seconds_now() + timeout_);
    std::map<int, std::string> missing;
    for (std::size_t i = 0; i < done.size(); ++i)
      if (!done[i]) missing[from[i]] = what;
    abandon(requests, done);
    verdict[0] = missing.empty() ? 1 : 0;
    verdict[1] = static_cast<int>(missing.size());
    std::size_t k = 2;
    for (const auto& [r, m] : missing) verdict[k++] = r;
    std::vector<MPI_Request> sends;
    for (std::size_t i = 0; i < done.size(); ++i) {
      if (!done[i]) continue;
      sends.emplace_back();
      check_mpi(MPI_Isend(verdict.data(), size_ + 2, MPI_INT, from[i], kVerdictTag, comm_, &sends.back()), "MPI_Isend");
    }
    check_mpi(MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    if (!missing.empty()) {
      timed_out_ = true;
      throw CheckpointError(std::string(step), missing);
    }
    return;
  }
  int one = 1;
  std::vector<MPI_Request> requests(2);
  check_mpi(MPI_Isend(&one, 1, MPI_INT, coordinator_, kArrivalTag, comm_, &requests[0]), "MPI_Isend");
  check_mpi(MPI_Irecv(verdict.data(), size_ + 2, MPI_INT, coordinator_, kVerdictTag, comm_, &requests[1]), "MPI_Irecv");
  // The coordinator may itself wait a full timeout for others first.
  const auto done = wait_until(requests, seconds_now() + 2 * timeout_ + 1);
  if (!done[1]) {
    abandon(requests, done);
    timed_out_ = true;
    throw CheckpointError(
        std::string(step),
        {{coordinator_, "the coordinator did not answer at step '" + std::string(step) + "' within " +
                            after(2 * timeout_ + 1) + " s (stalled or dead); the job should be restarted"}});
  }
  if (verdict[0] == 1) return;
  timed_out_ = true;
  std::map<int, std::string> missing;
  for (int k = 0; k < verdict[1] && k < size_; ++k) missing[verdict[static_cast<std::size_t>(k) + 2]] = what;
  throw CheckpointError(std::string(step), missing);
}

Bytes Comm::run_map(std::string_view step, const std::function<Bytes()>& map) const {
  if (timed_out_)
    throw CheckpointError(std::string(step), {{rank_, "an earlier step timed out; this communicator is unusable"}});
  current_step_ = std::string(step);
  static const bool trace = std::getenv("H5DCP_TRACE") != nullptr;
  const double started = trace ? seconds_now() : 0;
  arrive(step);
  const double arrived = trace ? seconds_now() : 0;
  double worked = 0;  // when this rank's work in the step ended (traced)
  auto tagged = run_tagged(rank_, [&] {
    begin_fault_step();
    auto result = map();
    if (trace) {
      worked = seconds_now();
      std::fprintf(stderr, "[h5dcp trace] rank %d %-16s waited %.4f s, worked %.4f s\n", rank_, current_step_.c_str(),
                   arrived - started, worked - arrived);
    }
    // Every step is a fault-injection point named after it (for tests; one
    // getenv when not injecting). It fires after this rank's work in the
    // step: a rank that skipped collective HDF5 calls inside `map` would
    // leave the others waiting in them, where no deadline reaches.
    fault_point_after_step(step, rank_);
    return result;
  });
  arrive(step);
  // The wait for the slowest rank at the end of the step, on a line of its
  // own: the line above is printed before an injected stall (the cluster
  // tests wait for it) and parsed as it is.
  if (trace && worked > 0)
    std::fprintf(stderr, "[h5dcp trace] rank %d after %s waited %.4f s for the slowest rank\n", rank_,
                 current_step_.c_str(), seconds_now() - worked);
  return tagged;
}

Bytes Comm::reduce_scatter(std::string_view step, const std::function<Bytes()>& map,
                           const std::function<std::vector<Bytes>(std::vector<Bytes>)>& reduce) const {
  const auto gathered = gather(run_map(step, map));
  std::vector<Bytes> replies;
  if (is_coordinator()) {
    auto failures = failures_of(gathered);
    if (failures.empty()) {
      try {
        auto results = reduce(untag_all(gathered));
        if (results.size() != static_cast<std::size_t>(size_))
          throw Error("reduce returned " + std::to_string(results.size()) + " payloads for " + std::to_string(size_) +
                      " ranks");
        for (auto& r : results) replies.push_back(ok(std::move(r)));
      } catch (...) {
        failures[rank_] = current_failure();
      }
    }
    if (!failures.empty()) replies.assign(static_cast<std::size_t>(size_), failed(failures));
  }
  return unwrap(step, scatter(replies));
}

Bytes Comm::all_reduce(std::string_view step, const std::function<Bytes()>& map,
                       const std::function<Bytes(std::vector<Bytes>)>& reduce) const {
  const auto gathered = gather(run_map(step, map));
  Bytes reply;
  if (is_coordinator()) {
    auto failures = failures_of(gathered);
    if (failures.empty()) {
      try {
        reply = ok(reduce(untag_all(gathered)));
      } catch (...) {
        failures[rank_] = current_failure();
      }
    }
    if (!failures.empty()) reply = failed(failures);
  }
  broadcast(reply);
  return unwrap(step, reply);
}

std::vector<Bytes> Comm::all_gather(std::string_view step, const std::function<Bytes()>& map) const {
  auto gathered = all_gather(run_map(step, map));
  const auto failures = failures_of(gathered);
  if (!failures.empty()) throw CheckpointError(std::string(step), failures);
  return untag_all(std::move(gathered));
}

std::vector<Bytes> Comm::exchange(std::string_view step, const std::function<std::vector<Bytes>()>& map) const {
  std::vector<Bytes> outgoing;
  std::vector<Bytes> incoming;
  exchange_into(
      step,
      [&] {
        outgoing = map();
        std::vector<std::string_view> views(outgoing.begin(), outgoing.end());
        if (static_cast<std::size_t>(rank_) < views.size()) views[static_cast<std::size_t>(rank_)] = {};  // moved below
        return views;
      },
      incoming);
  incoming[static_cast<std::size_t>(rank_)] = std::move(outgoing[static_cast<std::size_t>(rank_)]);
  return incoming;
}

void Comm::exchange_into(std::string_view step, const std::function<std::vector<std::string_view>()>& map,
                         std::vector<Bytes>& incoming) const {
  std::vector<std::string_view> outgoing;
  all_gather(step, [&] {
    outgoing = map();
    if (outgoing.size() != static_cast<std::size_t>(size_))
      throw Error("h5dcp: an exchange needs one payload per rank (" + std::to_string(size_) + "), got " +
                  std::to_string(outgoing.size()));
    return Bytes();
  });
  incoming.resize(outgoing.size());
  const auto self = static_cast<std::size_t>(rank_);
  incoming[self].assign(outgoing[self]);
  if (!distributed()) return;
  // The sizes first (a small collective), then the payloads point to point.
  std::vector<std::uint64_t> send_sizes(outgoing.size());
  for (std::size_t r = 0; r < outgoing.size(); ++r) send_sizes[r] = outgoing[r].size();
  std::vector<std::uint64_t> receive_sizes(outgoing.size());
  MPI_Request sizes = MPI_REQUEST_NULL;
  // As bytes: every rank is this machine's kind (one MPI job), and clang-tidy's
  // type check sees std::uint64_t as unsigned long, not MPI_UINT64_T.
  constexpr int kSizeBytes = sizeof(std::uint64_t);
  check_mpi(
      MPI_Ialltoall(send_sizes.data(), kSizeBytes, MPI_BYTE, receive_sizes.data(), kSizeBytes, MPI_BYTE, comm_, &sizes),
      "MPI_Ialltoall");
  complete(sizes);
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  std::vector<MPI_Request> requests;
  std::vector<int> peer_of;
  // MPI's send buffer is const; its C binding is not.
  const auto post = [&](char* data, std::size_t size, int peer, bool send) {
    for (std::size_t at = 0; at < size; at += kPiece) {
      const auto n = checked_count(std::min(kPiece, size - at));
      requests.emplace_back();
      peer_of.push_back(peer);
      if (send)
        check_mpi(MPI_Isend(data + at, n, MPI_BYTE, peer, kExchangeTag, comm_, &requests.back()), "MPI_Isend");
      else
        check_mpi(MPI_Irecv(data + at, n, MPI_BYTE, peer, kExchangeTag, comm_, &requests.back()), "MPI_Irecv");
    }
  };
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    // Same size as the last exchange into it: its memory is reused as is.
    auto& into = incoming[static_cast<std::size_t>(r)];
    into.resize(receive_sizes[static_cast<std::size_t>(r)]);
    post(into.data(), into.size(), r, false);
  }
  for (int r = 0; r < size_; ++r)
    if (r != rank_) {
      const auto& view = outgoing[static_cast<std::size_t>(r)];
      post(const_cast<char*>(view.data()), view.size(), r, true);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    }
  if (timeout_ <= 0) {
    check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    return;
  }
  const auto done = wait_until(requests, seconds_now() + 2 * timeout_ + 1);
  std::map<int, std::string> stalled;
  for (std::size_t i = 0; i < done.size(); ++i)
    if (!done[i])
      stalled[peer_of[i]] = "its transfer of step '" + std::string(step) + "' with rank " + std::to_string(rank_) +
                            " did not complete within " + after(2 * timeout_ + 1) +
                            " s (stalled or dead); the job should be restarted";
  if (stalled.empty()) return;
  abandon(requests, done);
  timed_out_ = true;
  throw CheckpointError(std::string(step), stalled);
}

Bytes Comm::broadcast(std::string_view step, const std::function<Bytes()>& map) const {
  Bytes reply;
  if (is_coordinator()) {
    reply = run_map(step, map);
  } else {
    run_map(step, [] { return Bytes(); });
  }
  broadcast(reply);
  return unwrap(step, reply);
}

namespace {

// "rank 2" or "ranks 1, 3, 4" (the first kMaxRanksNamed, then how many more).
std::string describe_ranks(const std::vector<int>& ranks) {
  // Enough to see the pattern; a 4096-rank job's error stays readable.
  constexpr std::size_t kMaxRanksNamed = 16;
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kMaxRanksNamed; ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kMaxRanksNamed) out += " and " + std::to_string(ranks.size() - kMaxRanksNamed) + " more";
  return out;
}

// "rank 2 has timeout_seconds=5, rank 0 has 30": every value of setting `k`
// other than the coordinator's, with the ranks that passed it.
std::string describe_difference(const std::vector<std::vector<Setting>>& all, std::size_t k, int coordinator) {
  const auto& reference = all[static_cast<std::size_t>(coordinator)];
  std::map<std::string, std::vector<int>> ranks_by_value;
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    const auto& value = k < all[rank].size() ? all[rank][k].value : std::string("(missing)");
    if (value != reference[k].value) ranks_by_value[value].push_back(static_cast<int>(rank));
  }
  std::string out;
  for (const auto& [value, ranks] : ranks_by_value)
    out += (out.empty() ? "" : ", ") + describe_ranks(ranks) + (ranks.size() == 1 ? " has " : " have ") +
           reference[k].name + "=" + value;
  return out + ", rank " + std::to_string(coordinator) + " has " + reference[k].value;
}

}  // namespace

void Comm::require_same(std::string_view operation, const std::vector<Setting>& settings) const {
  if (!distributed()) return;
  const auto mine = encode_message(settings);
  const auto hash = static_cast<unsigned long long>(std::hash<std::string_view>{}(mine));
  unsigned long long bounds[2] = {hash, ~hash};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm_), "MPI_Allreduce");
  if (bounds[0] == ~bounds[1]) return;
  // Rare: exchange them all, so that every rank composes the same message.
  std::vector<std::vector<Setting>> all;
  for (const auto& b : all_gather(mine)) all.push_back(ByteReader::decode<std::vector<Setting>>(b));
  const auto& reference = all[static_cast<std::size_t>(coordinator_)];
  bool path_differs = false;
  bool option_differs = false;
  std::string details;
  for (std::size_t k = 0; k < reference.size(); ++k) {
    bool same = true;
    for (const auto& s : all) same = same && k < s.size() && s[k].value == reference[k].value;
    if (same) continue;
    (reference[k].name == "path" ? path_differs : option_differs) = true;
    details += (details.empty() ? "" : "; ") + describe_difference(all, k, coordinator_);
  }
  if (details.empty()) details = "the ranks passed different sets of arguments";
  const std::string what = path_differs && option_differs ? "checkpoint paths and options"
                           : path_differs                 ? "checkpoint paths"
                                                          : "options";
  throw UsageError("h5dcp: " + std::string(operation) + ": ranks passed different " + what + ": " + details +
                   "; every rank must pass the same");
}

std::exception_ptr Comm::require_visible(std::string_view operation, const std::string& path,
                                         const std::function<void()>& check) const {
  std::exception_ptr failure;
  std::string message;
  try {
    check();
  } catch (...) {
    failure = std::current_exception();
    message = current_exception_message();
  }
  if (!distributed()) return failure;
  // [ranks that failed, ranks that passed]
  int counts[2] = {failure ? 1 : 0, failure ? 0 : 1};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, comm_), "MPI_Allreduce");
  if (counts[0] == 0 || counts[1] == 0) return failure;
  // Some ranks see it and some do not: which, and why (the first one's reason).
  const auto all = all_gather(failure ? "F" + message : Bytes("O"));
  std::vector<int> blind;
  std::string first_reason;
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    if (all[rank].empty() || all[rank][0] != 'F') continue;
    if (blind.empty()) first_reason = " (rank " + std::to_string(rank) + ": " + all[rank].substr(1) + ")";
    blind.push_back(static_cast<int>(rank));
  }
  throw IoError("h5dcp: " + std::string(operation) + ": '" + path + "' is not visible on " + describe_ranks(blind) +
                ": use a shared file system" + first_reason);
}

void Comm::require_same(std::string_view what, std::string_view value) const {
  if (!distributed()) return;
  const auto hash = static_cast<unsigned long long>(std::hash<std::string_view>{}(value));
  unsigned long long bounds[2] = {hash, ~hash};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm_), "MPI_Allreduce");
  if (bounds[0] != ~bounds[1])
    throw UsageError("h5dcp: ranks passed different " + std::string(what) + " (this rank: '" + std::string(value) +
                     "'); every rank must pass the same");
}

}  // namespace h5dcp::detail
