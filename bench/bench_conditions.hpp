#pragma once
// What the machine did while a benchmark case ran, beside its wall time: the
// host's share of the CPUs (steal), the kernel's pressure stall information
// (PSI: time tasks waited for a CPU, for I/O), the CPU time the ranks
// themselves used, and what the benchmark directory's block device did (bytes
// written, write requests and the time they took), and,
// in a virtual machine whose kernel hands free memory back to its host (free
// page reporting), how much it handed back: the host takes those pages away,
// and the next touch of each costs a fault on the host that the guest sees as
// its own CPU time in whatever touched it, not as steal.
// A repetition that ran slower than its siblings can then be told apart:
// a disk that wrote the same bytes more slowly, a host that took the CPUs,
// or the ranks doing more work.
//
// The counters are system-wide (every process on the machine counts); the
// ranks' CPU time is this job's alone. Rank 0 reads the system's counters
// just outside the timed region, so reading them costs the case nothing.
// A counter this kernel does not have (no PSI, a file system on no block
// device) reads as -1 in every field that needs it.

#include <mpi.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_mpi_timing.hpp"

namespace h5dcp_bench {

/// The counters read at one moment, in seconds and bytes.
enum Counter : std::size_t {
  kSteal,              // /proc/stat: every CPU's steal time
  kCpuSome,            // /proc/pressure/cpu: some task waited for a CPU
  kIoFull,             // /proc/pressure/io: every non-idle task waited for I/O
  kDiskWriteBytes,     // the block device: bytes written,
  kDiskWrites,         //   write requests completed,
  kDiskWriteSeconds,   //   the time those requests took, added up (issue to completion)
  kHostReportedBytes,  // free memory reported to the host (this kernel's page_reporting counter)
  kCounterCount
};

/// The counters' names in the benchmarks' JSON (the peer's are the same).
inline const char* counter_name(std::size_t c) {
  static constexpr std::array<const char*, kCounterCount> kNames{
      "steal", "cpu_some", "io_full", "disk_write_bytes", "disk_writes", "disk_write_seconds", "host_reported_bytes"};
  return kNames.at(c);
}

/// -1 where this machine has no such counter.
struct MachineCounters {
  MachineCounters() { value.fill(-1); }
  std::array<double, kCounterCount> value{};
};

/// What changed while a case ran (`delta`: -1 where not measured);
/// `ranks_cpu` is the CPU time (user and system, every thread) all ranks
/// used, summed.
struct Conditions {
  MachineCounters delta;
  double ranks_cpu = 0;
};

namespace detail_conditions {

inline double psi_total(const std::string& resource, const char* line_kind) {
  std::ifstream in("/proc/pressure/" + resource);
  std::string kind;
  std::string field;
  while (in >> kind) {
    for (int i = 0; i < 4 && in >> field; ++i) {
      if (kind == line_kind && field.rfind("total=", 0) == 0) return std::stod(field.substr(6)) / 1e6;
    }
  }
  return -1;
}

// /sys/dev/block/MAJOR:MINOR/stat of the device holding `dir` (a partition
// has its own stat file there too).
inline std::string device_stat_path(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return "";
  return "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)) + "/stat";
}

inline constexpr const char* kPageReporting = "/sys/module/page_reporting/parameters/";

}  // namespace detail_conditions

/// The free memory this kernel has reported to its host so far (free page
/// reporting), KiB; -1 where it does not count it.
inline double reported_kib() {
  std::ifstream in(std::string(detail_conditions::kPageReporting) + "reported_kib");
  double kib = 0;
  return in >> kib ? kib : -1;
}

/// The smallest order (log2 of pages) of the free memory blocks this kernel
/// reports to its host, or -1 where it has no free page reporting. Reporting
/// is paused while it is above the largest order the page allocator has
/// (`largest_page_order`), as scripts/bench.sh sets it for its rounds that
/// measure what reporting costs.
inline int page_reporting_order() {
  std::ifstream in(std::string(detail_conditions::kPageReporting) + "page_reporting_order");
  int order = -1;
  return in >> order ? order : -1;
}

/// The largest order the page allocator keeps free blocks of (the columns of
/// /proc/buddyinfo, less one); -1 where unknown.
inline int largest_page_order() {
  std::ifstream in("/proc/buddyinfo");
  std::string line;
  if (!std::getline(in, line)) return -1;
  std::istringstream words(line);
  std::string word;
  int columns = 0;
  for (int i = 0; words >> word; ++i)
    if (i >= 4) ++columns;  // "Node 0, zone NAME" and then one count per order
  return columns - 1;
}

/// Reads every counter now (any process; no MPI).
inline MachineCounters read_machine_counters(const std::string& device_stat) {
  MachineCounters c;
  auto& v = c.value;
  {
    std::ifstream in("/proc/stat");
    std::string cpu;
    std::array<double, 8> f{};  // user nice system idle iowait irq softirq steal
    if (in >> cpu && cpu == "cpu") {
      for (auto& x : f) in >> x;
      if (in) {
        const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
        v[kSteal] = f[7] / hz;
      }
    }
  }
  v[kCpuSome] = detail_conditions::psi_total("cpu", "some");
  v[kIoFull] = detail_conditions::psi_total("io", "full");
  if (!device_stat.empty()) {
    std::ifstream in(device_stat);
    // reads merges sectors ticks, writes merges sectors ticks, ... (sectors of 512 bytes, ticks in ms)
    std::array<double, 8> f{};
    std::size_t n = 0;
    while (n < f.size() && in >> f[n]) ++n;
    if (n == f.size()) {
      v[kDiskWrites] = f[4];
      v[kDiskWriteBytes] = f[6] * 512;
      v[kDiskWriteSeconds] = f[7] / 1e3;
    }
  }
  if (const double kib = reported_kib(); kib >= 0) v[kHostReportedBytes] = kib * 1024;
  return c;
}

/// The bounds settle_page_reporting uses: {quiet, limit} seconds, 2.5 and 45
/// unless H5DCP_BENCH_SETTLE_LIMIT sets the limit (the quiet time is then at
/// most the limit): bench.smoke keeps its runs short with it.
inline std::array<double, 2> reporting_settle_bounds() {
  std::array<double, 2> bounds{2.5, 45};
  if (const char* text = std::getenv("H5DCP_BENCH_SETTLE_LIMIT")) {
    char* end = nullptr;
    const double limit = std::strtod(text, &end);
    if (end != text && *end == '\0' && limit >= 0) bounds = {std::min(bounds[0], limit), limit};
  }
  return bounds;
}

/// What settle_page_reporting still calls quiet: at most this many MiB handed
/// to the host within the quiet time. Once the bulk of a free is reported the
/// kernel goes on handing back a block of 2 MiB now and then (the pages that
/// other processes free meanwhile), which would otherwise keep every wait at
/// its limit; the bulk comes in bursts of hundreds of MiB every two seconds.
inline constexpr double kReportingSettleAllowanceMib = 32;

/// Waits until this VM's kernel has stopped handing freed memory to its host
/// (free page reporting): rank 0 polls its counter until it has grown by at
/// most kReportingSettleAllowanceMib over the last `quiet` seconds, or `limit`
/// seconds have passed; every rank waits for it. The kernel reports a freed
/// block two seconds after the free, and copies that ran while it did were
/// measured slower in trials, on either side of the comparison, so the bench
/// settles it before the cases that compare memory copies, as fresh()
/// settles the disk. Returns the seconds waited (0 where
/// the kernel has no such counter). Collective (MPI_COMM_WORLD). The JSONs
/// record the bounds and the allowance (the report quotes them from there).
inline double settle_page_reporting() {
  // Plain names, not a structured binding: the lambda below uses `quiet`,
  // and clang before 16 refuses to capture a binding.
  const auto bounds = reporting_settle_bounds();
  const double quiet = bounds[0];
  const double limit = bounds[1];
  double waited = 0;
  const double first = world_rank() == 0 ? reported_kib() : -1;
  if (first >= 0) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto seconds = [start](Clock::time_point t) { return std::chrono::duration<double>(t - start).count(); };
    // (seconds since start, counter) every 100 ms: the counter's growth over
    // the last `quiet` seconds is the newest sample less the newest one at
    // least `quiet` old.
    std::vector<std::pair<double, double>> samples{{0.0, first}};
    for (;;) {
      const double at = seconds(Clock::now());
      if (at >= limit) break;
      if (at >= quiet) {
        const auto old =
            std::find_if(samples.rbegin(), samples.rend(), [&](const auto& s) { return s.first <= at - quiet; });
        if (old != samples.rend() && samples.back().second - old->second <= kReportingSettleAllowanceMib * 1024) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      samples.emplace_back(seconds(Clock::now()), reported_kib());
    }
    waited = seconds(Clock::now());
  }
  MPI_Bcast(&waited, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return waited;
}

/// This process's CPU time so far (every thread), seconds.
inline double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

/// Watches the machine around a stretch of code: `start()` and `stop()` on
/// every rank, collective in `stop()` (the ranks' CPU time is summed).
class ConditionsWatch {
 public:
  explicit ConditionsWatch(const std::string& dir) : device_stat_(detail_conditions::device_stat_path(dir)) {}

  void start() {
    cpu_ = process_cpu_seconds();
    if (world_rank() == 0) before_ = read_machine_counters(device_stat_);
  }

  /// `collective` false: rank 0's counters only, no ranks' CPU time (-1),
  /// for a stretch that the ranks do not end together.
  Conditions stop(bool collective = true) const {
    Conditions c;
    c.ranks_cpu = process_cpu_seconds() - cpu_;
    if (world_rank() == 0) {
      const auto after = read_machine_counters(device_stat_);
      for (std::size_t i = 0; i < kCounterCount; ++i) {
        const double a = before_.value[i];
        const double b = after.value[i];
        c.delta.value[i] = a < 0 || b < 0 ? -1.0 : b - a;
      }
    }
    if (collective)
      MPI_Allreduce(MPI_IN_PLACE, &c.ranks_cpu, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    else
      c.ranks_cpu = -1;
    return c;
  }

 private:
  std::string device_stat_;
  double cpu_ = 0;
  MachineCounters before_;
};

/// timed(fn), with what the machine did meanwhile in `conditions`.
template <typename Fn>
double timed_watched(ConditionsWatch& watch, Conditions& conditions, Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  watch.start();
  const double seconds = timed(std::forward<Fn>(fn));
  conditions = watch.stop();
  return seconds;
}

/// One repetition's conditions as a JSON object, beside its wall time
/// (written as the benchmark's own repetitions are, so that the two match);
/// bytes and request counts as integers.
inline std::string conditions_json(double seconds, const Conditions& c) {
  std::ostringstream out;
  out << "{\"seconds\": " << seconds << ", \"ranks_cpu\": " << c.ranks_cpu;
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    const double v = c.delta.value[i];
    const bool count = i == kDiskWriteBytes || i == kDiskWrites || i == kHostReportedBytes;
    out << ", \"" << counter_name(i) << "\": ";
    if (count)
      out << static_cast<long long>(v);
    else
      out << v;
  }
  out << "}";
  return out.str();
}

}  // namespace h5dcp_bench
