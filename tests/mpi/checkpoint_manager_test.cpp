// CheckpointManager at 1-4 ranks: retention, the atomic `latest` pointer,
// a stale or dangling pointer, orphaned partial files, a damaged newest
// checkpoint, async saves and their failures; the directory lock against a
// second manager, a save that cannot fit on its file system, keys that
// could not be read back, and LibTorch's backtraces kept out of errors
// (issue 15).

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "h5dcp/checkpoint_manager.hpp"
#include "h5dcp/h5dcp.hpp"
#include "h5dcp/stateful.hpp"
#include "storage/durable_file.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

namespace fs = std::filesystem;
using test::bitwise_equal;

// The manager's lock file in its directory (never removed).
const std::string kLock = ".h5dcp-manager.lock";

const std::vector<std::int64_t> kShape{10, 3};

// A state whose values depend on `step`: rows of a sharded tensor, a
// replicated one, and the step.
StateDict state_at(std::int64_t step) {
  const auto full = test::reference_tensor(kShape, at::kFloat, step);
  const auto layout = chunk_dim0(kShape, test::world_rank(), test::world_size());
  const auto rows = chunk_dim0_sizes(kShape, test::world_rank(), test::world_size())[0];
  return StateDict{
      {"w", ShardedTensor(kShape, {Shard{full.narrow(0, layout.offsets[0], rows).clone(), layout.offsets}})},
      {"b", test::reference_tensor({4}, at::kDouble, step)},
      {"step", step},
  };
}

StateDict zeros_like(const StateDict& state) {
  return StateDict{{"w", test::zeros_like(std::get<ShardedTensor>(state.at("w")))},
                   {"b", at::zeros({4}, at::kDouble)},
                   {"step", std::int64_t{-1}}};
}

bool same_state(const StateDict& a, const StateDict& b) {
  const auto& wa = std::get<ShardedTensor>(a.at("w")).local_shards();
  const auto& wb = std::get<ShardedTensor>(b.at("w")).local_shards();
  return wa.size() == 1 && wb.size() == 1 && bitwise_equal(wa[0].tensor, wb[0].tensor) &&
         bitwise_equal(std::get<at::Tensor>(a.at("b")), std::get<at::Tensor>(b.at("b"))) &&
         std::get<std::int64_t>(a.at("step")) == std::get<std::int64_t>(b.at("step"));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The coordinator's pid, on every rank.
long rank0_pid() {
  long pid = static_cast<long>(::getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return pid;
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// The "<host>.<pid>" a temporary file name carries (detail::writer_tag()).
std::string writer_tag_of(long pid) {
  const auto own = detail::writer_tag();
  return own.substr(0, own.rfind('.')) + "." + std::to_string(pid);
}

// A pid that no process has (the writer of a killed save).
long dead_pid() {
  for (long pid = 4000000; pid > 1000; --pid)
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return pid;
  return -1;
}

// Rank 0 runs `fn` on the file system; everyone waits for it.
template <typename Fn>
void on_rank0(Fn fn) {
  if (test::world_rank() == 0) fn();
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CheckpointManager, KeepsTheNewestAndEveryKth) {
  test::TempDir dir;
  CheckpointManager manager(dir.file("run"), Retention{3, 4});
  for (std::int64_t step = 1; step <= 10; ++step) manager.save(step, state_at(step));
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{4, 8, 9, 10}));
  EXPECT_EQ(read_text(dir.file("run/latest")), "step-00000010.h5\n");
  EXPECT_EQ(manager.path_for(10), dir.file("run/step-00000010.h5"));
  const auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 10);
  EXPECT_TRUE(manager.last_scan().pointer_current);
  EXPECT_TRUE(manager.last_scan().skipped.empty());

  auto loaded = zeros_like(state_at(10));
  const auto found = manager.load(loaded);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, manager.path_for(10));
  EXPECT_TRUE(same_state(loaded, state_at(10)));
}

TEST(CheckpointManager, NeverRemovesTheCheckpointJustSaved) {
  test::TempDir dir;
  CheckpointManager manager(dir.path(), Retention{2, 0});
  manager.save(10, state_at(10));
  manager.save(11, state_at(11));
  manager.save(5, state_at(5));  // an older step, e.g. after resuming from an older checkpoint
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{5, 10, 11}));
  EXPECT_EQ(read_text(dir.file("latest")), "step-00000005.h5\n");
  // The newest complete checkpoint wins over the pointer.
  EXPECT_EQ(manager.latest()->step, 11);
  EXPECT_FALSE(manager.last_scan().pointer_current);
  EXPECT_THROW(manager.save(-1, state_at(1)), UsageError);
}

TEST(CheckpointManager, KeepLastZeroKeepsEverything) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  for (std::int64_t step : {3, 1, 2}) manager.save(step, state_at(step));
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(CheckpointManager, AsyncSavesPublishThePointerWhenDone) {
  test::TempDir dir;
  CheckpointManager manager(dir.path(), Retention{1, 0});
  EXPECT_TRUE(manager.poll());  // nothing in flight
  auto state = state_at(2);
  auto first = manager.async_save(2, state);
  EXPECT_EQ(manager.in_flight(), std::optional<std::int64_t>(2));
  // Staged: changing the tensors now does not change the checkpoint.
  std::get<at::Tensor>(state["b"]).fill_(42.0);
  // The next save waits for the first and publishes it.
  auto second = manager.async_save(4, state_at(4));
  EXPECT_EQ(first.get().metadata.world_size, test::world_size());
  const auto result = manager.wait();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(second.get().bytes_per_rank, result->bytes_per_rank);
  EXPECT_TRUE(manager.poll());
  EXPECT_FALSE(manager.in_flight().has_value());
  EXPECT_FALSE(manager.wait().has_value());  // nothing more
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{4}));
  EXPECT_EQ(read_text(dir.file("latest")), "step-00000004.h5\n");

  auto loaded = zeros_like(state_at(4));
  EXPECT_EQ(manager.load(loaded)->step, 4);
  EXPECT_TRUE(same_state(loaded, state_at(4)));
}

TEST(CheckpointManager, SavesWhoseShardingHoldsReuseThePlan) {
  test::TempDir dir;
  CheckpointManager manager(dir.path(), Retention{0, 0});
  EXPECT_FALSE(manager.save(1, state_at(1)).plan_reused);
  EXPECT_TRUE(manager.save(2, state_at(2)).plan_reused);
  EXPECT_TRUE(manager.async_save(3, state_at(3)).get().plan_reused);
  // A caller's own planner is never given the manager's cache.
  DefaultSavePlanner planner;
  SaveOptions own;
  own.planner = &planner;
  EXPECT_FALSE(manager.save(4, state_at(4), own).plan_reused);
  // Another layout: planned anew, then reused again.
  auto more = state_at(5);
  more["extra"] = std::int64_t{1};
  EXPECT_FALSE(manager.save(5, more).plan_reused);
  EXPECT_FALSE(manager.save(6, state_at(6)).plan_reused);  // the first layout again: planned anew
  EXPECT_TRUE(manager.save(7, state_at(7)).plan_reused);
  for (std::int64_t step : {2, 3, 7}) {
    auto loaded = zeros_like(state_at(step));
    EXPECT_TRUE(manager.load(loaded).has_value());
    auto whole = load_all(manager.path_for(step));
    EXPECT_EQ(std::get<std::int64_t>(whole.at("step")), step);
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(whole.at("b")), test::reference_tensor({4}, at::kDouble, step)));
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(whole.at("w")), test::reference_tensor(kShape, at::kFloat, step)));
  }
}

TEST(CheckpointManager, StepTwoWasSavedBeforeItChanged) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  auto state = state_at(2);
  manager.async_save(2, state);
  std::get<at::Tensor>(state["b"]).fill_(42.0);
  manager.wait();
  auto loaded = zeros_like(state_at(2));
  manager.load(loaded);
  EXPECT_TRUE(same_state(loaded, state_at(2)));
}

TEST(CheckpointManager, FindsTheNewestCheckpointWhenThePointerIsStaleOrDangling) {
  test::TempDir dir;
  {
    CheckpointManager manager(dir.path());
    for (std::int64_t step = 1; step <= 3; ++step) manager.save(step, state_at(step));
  }
  // A crash between publishing step 3 and moving the pointer leaves it at 1.
  on_rank0([&] { std::ofstream(dir.file("latest")) << "step-00000001.h5\n"; });
  CheckpointManager manager(dir.path());
  auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 3);
  EXPECT_EQ(manager.last_scan().pointer, std::optional<std::string>("step-00000001.h5"));
  EXPECT_FALSE(manager.last_scan().pointer_current);

  // A pointer to a file that is gone, and no pointer at all.
  on_rank0([&] { std::ofstream(dir.file("latest")) << "step-00000099.h5\n"; });
  EXPECT_EQ(manager.latest()->step, 3);
  on_rank0([&] { fs::remove(dir.file("latest")); });
  EXPECT_EQ(manager.latest()->step, 3);
  EXPECT_FALSE(manager.last_scan().pointer.has_value());

  // The newest checkpoint removed by hand: the one before it.
  on_rank0([&] { fs::remove(manager.path_for(3)); });
  EXPECT_EQ(manager.latest()->step, 2);
}

TEST(CheckpointManager, SkipsADamagedNewestCheckpointWithAWarning) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  manager.save(1, state_at(1));
  manager.save(2, state_at(2));
  on_rank0([&] {
    std::ofstream(manager.path_for(3)) << "not an HDF5 file";  // garbage
    fs::copy_file(manager.path_for(2), manager.path_for(4));   // truncated
    fs::resize_file(manager.path_for(4), fs::file_size(manager.path_for(2)) / 2);
  });
  auto loaded = zeros_like(state_at(2));
  const auto found = manager.load(loaded);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->step, 2);
  EXPECT_TRUE(same_state(loaded, state_at(2)));
  const auto& skipped = manager.last_scan().skipped;
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].step, 4);
  EXPECT_EQ(skipped[1].step, 3);
  EXPECT_EQ(skipped[1].path, manager.path_for(3));
  EXPECT_FALSE(skipped[0].reason.empty());
  EXPECT_FALSE(skipped[1].reason.empty());
  EXPECT_TRUE(manager.last_scan().pointer_current);  // `latest` names step 2: right, the newer files are damaged

  // Saving step 3 again replaces the damaged file.
  manager.save(3, state_at(3));
  EXPECT_EQ(manager.latest()->step, 3);
}

TEST(CheckpointManager, RemovesOrphanedPartialFilesAtStart) {
  test::TempDir dir;
  {
    CheckpointManager manager(dir.path());
    manager.save(1, state_at(1));
  }
  on_rank0([&] {
    for (const char* name :
         {".step-00000002.h5.h5dcp-partial.0123456789abcdef", ".latest.tmp.4242", "notes.txt", ".hidden", "step-2.h5"})
      std::ofstream(dir.file(name)) << "x";
  });
  CheckpointManager manager(dir.path());
  EXPECT_EQ(manager.removed_orphans(),
            (std::vector<std::string>{dir.file(".latest.tmp.4242"),
                                      dir.file(".step-00000002.h5.h5dcp-partial.0123456789abcdef")}));
  EXPECT_EQ(dir.entries(),
            (std::vector<std::string>{kLock, ".hidden", "latest", "notes.txt", "step-00000001.h5", "step-2.h5"}));
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1}));  // "step-2.h5" is not one of its names
  EXPECT_EQ(manager.latest()->step, 1);
}

TEST(CheckpointManager, AnEmptyDirectoryHasNoCheckpoint) {
  test::TempDir dir;
  CheckpointManager manager(dir.file("new/run/"));
  EXPECT_TRUE(fs::is_directory(dir.file("new/run")));
  EXPECT_EQ(manager.directory(), dir.file("new/run"));
  EXPECT_FALSE(manager.latest().has_value());
  auto state = zeros_like(state_at(1));
  EXPECT_FALSE(manager.load(state).has_value());
  EXPECT_EQ(std::get<std::int64_t>(state["step"]), -1);  // untouched
  EXPECT_TRUE(manager.steps().empty());
}

TEST(CheckpointManager, AFailedAsyncSaveIsThrownByWaitOnEveryRankAndPublishesNothing) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  manager.save(1, state_at(1));
  const std::string fault = "save:write@" + std::to_string(test::world_size() - 1);
  ::setenv("H5DCP_INJECT_FAULT", fault.c_str(), 1);
  auto future = manager.async_save(2, state_at(2));
  future.wait();
  ::unsetenv("H5DCP_INJECT_FAULT");
  EXPECT_TRUE(manager.poll());
  try {
    manager.wait();
    ADD_FAILURE() << "wait() did not throw";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "save:write");
    EXPECT_EQ(e.failures().count(test::world_size() - 1), 1u);
  }
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(read_text(dir.file("latest")), "step-00000001.h5\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{kLock, "latest", "step-00000001.h5"}));  // no partial file left
  // The manager goes on.
  manager.async_save(3, state_at(3));
  manager.wait();
  EXPECT_EQ(manager.latest()->step, 3);
}

TEST(CheckpointManager, RanksMustAgreeOnTheDirectory) {
  test::TempDir dir;
  if (test::world_size() > 1) {
    EXPECT_THROW(CheckpointManager(dir.file("rank" + std::to_string(test::world_rank() % 2))), UsageError);
  }
  EXPECT_THROW(CheckpointManager(dir.path(), Retention{-1, 0}), UsageError);
}

// --- the directory lock and orphans (issue 15, item 10) ------------------------

TEST(CheckpointManagerOrphans, RemovesThoseWhoseWriterIsGoneOrUnknownButNotALiveOne) {
  test::TempDir dir;
  const auto alive = writer_tag_of(rank0_pid());  // the coordinator's own: a plain save of this process
  const std::string dead = writer_tag_of(dead_pid());
  const std::vector<std::string> gone{".step-00000003.h5.h5dcp-partial." + dead + ".0123456789abcdef",
                                      ".step-00000004.h5.h5dcp-partial.other-host.4242.0123456789abcdef",
                                      ".latest.tmp." + dead};
  const std::string live = ".step-00000005.h5.h5dcp-partial." + alive + ".0123456789abcdef";
  on_rank0([&] {
    for (const auto& name : gone) std::ofstream(dir.file(name)) << "x";
    std::ofstream(dir.file(live)) << "x";
  });
  CheckpointManager manager(dir.path());
  std::vector<std::string> removed;
  for (const auto& name : gone) removed.push_back(dir.file(name));
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(manager.removed_orphans(), removed);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{kLock, live}));
}

// A killed job's ranks stay zombies until init reaps them (their mpiexec was
// killed too), which may be after the next job starts: kill(pid, 0) still
// answers for a zombie, yet its save will never finish.
TEST(CheckpointManagerOrphans, AZombieWriterIsGone) {
  test::TempDir dir;
  pid_t zombie = -1;
  std::string name;
  on_rank0([&] {
    zombie = ::fork();
    if (zombie == 0) ::_exit(0);
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);  // exited, not reaped
    ASSERT_EQ(::kill(zombie, 0), 0);
    name = ".step-00000007.h5.h5dcp-partial." + writer_tag_of(zombie) + ".0123456789abcdef";
    std::ofstream(dir.file(name)) << "x";
    EXPECT_EQ(detail::writer_of_temporary(name), detail::WriterState::Gone);
  });
  CheckpointManager manager(dir.path());
  if (test::world_rank() == 0) {
    EXPECT_EQ(manager.removed_orphans(), std::vector<std::string>{dir.file(name)});
    ::waitpid(zombie, nullptr, 0);
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{kLock});
}

TEST(CheckpointManagerOrphans, ASaveRemovesOnlyPartialFilesOfItsPathWhoseWriterIsGone) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  const auto partial = [&](const std::string& writer) {
    return ".step-00000003.h5.h5dcp-partial." + writer + ".00000000deadbeef";
  };
  const auto alive = partial(writer_tag_of(rank0_pid()));
  const auto elsewhere = partial("other-host.4242");  // another node's save: it may still run
  on_rank0([&] {
    for (const auto& name : {partial(writer_tag_of(dead_pid())), alive, elsewhere})
      std::ofstream(dir.file(name)) << "x";
  });
  manager.save(3, state_at(3));
  std::vector<std::string> expected{kLock, alive, elsewhere, "latest", "step-00000003.h5"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(dir.entries(), expected);
}

// Whether another process can take the fcntl() lock of `lock_file` now, and
// what its holder wrote into it. Forks: the child only makes system calls.
std::pair<bool, std::string> probe_lock_from_another_process(const std::string& lock_file) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {false, "pipe failed"};
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    const int fd = ::open(lock_file.c_str(), O_RDWR);
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    char report[300] = {};
    report[0] = fd >= 0 && ::fcntl(fd, F_SETLK, &lock) == 0 ? 'L' : 'H';  // locked it / held by another
    const auto n = fd >= 0 ? ::pread(fd, report + 1, sizeof report - 2, 0) : 0;
    (void)!::write(pipe_fds[1], report, 1 + static_cast<std::size_t>(n > 0 ? n : 0));
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char report[300] = {};
  const auto n = ::read(pipe_fds[0], report, sizeof report);
  ::close(pipe_fds[0]);
  ::waitpid(child, nullptr, 0);
  if (n <= 0) return {false, "no report"};
  return {report[0] == 'L', std::string(report + 1, static_cast<std::size_t>(n - 1))};
}

TEST(CheckpointManagerLock, ASecondManagerInTheSameProcessIsRefusedAndTheFirstKeepsItsLock) {
  test::TempDir dir;
  const auto pid = rank0_pid();
  std::optional<CheckpointManager> first(std::in_place, dir.path());
  first->save(1, state_at(1));
  // The first manager's save in progress on another node.
  const std::string in_progress = ".step-00000002.h5.h5dcp-partial.other-host.4242.0123456789abcdef";
  on_rank0([&] { std::ofstream(dir.file(in_progress)) << "x"; });
  // Another spelling of the same directory: the lock file is the same file.
  const auto e = test::expect_checkpoint_error([&] { CheckpointManager second(dir.path() + "/."); });
  EXPECT_EQ(e.step(), "checkpoint-manager:start");
  ASSERT_EQ(e.failures().size(), 1u);
  EXPECT_EQ(e.failures().count(0), 1u);
  EXPECT_EQ(e.failures().begin()->second, "h5dcp: checkpoint directory '" + dir.path() +
                                              "/.' is in use by another CheckpointManager of this "
                                              "process (lock held by pid " +
                                              std::to_string(pid) + " on host " + host_name() +
                                              "); one manager (one job) at a time per directory");
  on_rank0([&] {
    EXPECT_TRUE(fs::exists(dir.file(in_progress))) << "the refused manager removed a save in progress";
    // The refused manager did not drop the first one's lock (closing any
    // descriptor of a file drops the process's fcntl() locks on it).
    const auto [locked, holder] = probe_lock_from_another_process(dir.file(kLock));
    EXPECT_FALSE(locked);
    EXPECT_EQ(holder, "pid " + std::to_string(pid) + " on host " + host_name() + "\n");
  });
  first.reset();  // releases the directory
  on_rank0([&] { EXPECT_TRUE(probe_lock_from_another_process(dir.file(kLock)).first); });
  CheckpointManager again(dir.path());
  EXPECT_EQ(again.latest()->step, 1);
  EXPECT_EQ(again.removed_orphans(), std::vector<std::string>{dir.file(in_progress)});  // its writer is gone now
}

TEST(CheckpointManagerLock, ASecondJobIsRefusedOnEveryRankAndRemovesNothing) {
  test::TempDir dir;
  { CheckpointManager first(dir.path()); }  // the lock file exists
  const std::string in_progress = ".step-00000007.h5.h5dcp-partial.other-host.4242.0123456789abcdef";
  // Rank 0 starts "another job": a process that holds the directory's lock
  // as a manager does, until told to go.
  int go[2] = {-1, -1};
  int ready[2] = {-1, -1};
  pid_t other_job = -1;
  if (test::world_rank() == 0) {
    std::ofstream(dir.file(in_progress)) << "x";
    // No ASSERT on one rank here: the others would wait in the next collective.
    EXPECT_EQ(::pipe(go), 0);
    EXPECT_EQ(::pipe(ready), 0);
    const auto lock_file = dir.file(kLock);
    const auto host = host_name();
    other_job = ::fork();
    if (other_job == 0) {
      ::close(go[1]);  // or the read below never sees the end of the pipe
      ::close(ready[0]);
      const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT, 0644);
      struct flock lock {};
      lock.l_type = F_WRLCK;
      lock.l_whence = SEEK_SET;
      if (fd < 0 || ::fcntl(fd, F_SETLK, &lock) != 0) ::_exit(1);
      char text[300];
      const int n = std::snprintf(text, sizeof text, "pid %d on host %s\n", static_cast<int>(::getpid()), host.c_str());
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text, static_cast<std::size_t>(n), 0) != n) ::_exit(1);
      (void)!::write(ready[1], "r", 1);
      char byte;
      (void)!::read(go[0], &byte, 1);  // until rank 0 closes the pipe
      ::_exit(0);
    }
    ::close(go[0]);
    ::close(ready[1]);
    char byte = 0;
    EXPECT_EQ(::read(ready[0], &byte, 1), 1) << "the other job did not take the lock";
  }
  long other_pid = static_cast<long>(other_job);
  MPI_Bcast(&other_pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);

  const auto e = test::expect_checkpoint_error([&] { CheckpointManager second(dir.path()); });
  EXPECT_EQ(e.step(), "checkpoint-manager:start");
  EXPECT_EQ(e.failures().size(), 1u);
  EXPECT_EQ(e.failures().count(0), 1u);
  EXPECT_NE(std::string(e.what()).find("h5dcp: checkpoint directory '" + dir.path() +
                                       "' is in use by another job (lock held by pid " + std::to_string(other_pid) +
                                       " on host " + host_name() + ")"),
            std::string::npos)
      << e.what();
  on_rank0([&] { EXPECT_TRUE(fs::exists(dir.file(in_progress))) << "the second job removed the first one's save"; });

  if (test::world_rank() == 0) {  // the other job ends
    ::close(go[1]);
    ::close(ready[0]);
    int status = -1;
    ::waitpid(other_job, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CheckpointManager after(dir.path());
  EXPECT_EQ(after.removed_orphans(), std::vector<std::string>{dir.file(in_progress)});
}

// --- a save that cannot fit (issue 15, item 11) -------------------------------

// A tmpfs of `mib` MiB mounted at `path` by rank 0 for the test's lifetime;
// mounted() is false (on every rank) where mounting is not permitted.
class SmallFileSystem {
 public:
  SmallFileSystem(const std::string& path, int mib) : path_(path) {
    int ok = 0;
    if (test::world_rank() == 0) {
      fs::create_directories(path);
      ok = ::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + std::to_string(mib) + "m").c_str()) == 0;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    mounted_ = ok != 0;
  }
  ~SmallFileSystem() {
    if (mounted_ && test::world_rank() == 0) ::umount2(path_.c_str(), MNT_DETACH);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  bool mounted() const { return mounted_; }
  std::int64_t available() const {
    struct statvfs s {};
    ::statvfs(path_.c_str(), &s);
    return static_cast<std::int64_t>(s.f_bavail * s.f_frsize);
  }

 private:
  std::string path_;
  bool mounted_ = false;
};

TEST(CheckpointManagerSpace, ASaveThatCannotFitIsRefusedBeforeFillingTheDisk) {
  test::TempDir dir;
  const auto small = dir.file("small");
  SmallFileSystem disk(small, 8);
  if (!disk.mounted()) GTEST_SKIP() << "mounting a tmpfs needs root (CAP_SYS_ADMIN)";
  {
    CheckpointManager manager(small);
    manager.save(1, state_at(1));
    const auto free_before = disk.available();
    auto big = state_at(2);
    big["big"] = at::zeros({8 << 20}, at::kFloat);  // 32 MiB, on an 8 MiB file system
    const auto e = test::expect_checkpoint_error([&] { manager.save(2, big); });
    EXPECT_EQ(e.step(), "save:reserve");
    ASSERT_EQ(e.failures().count(0), 1u) << e.what();
    const auto& message = e.failures().at(0);
    const std::string head = "h5dcp: not enough free space for '" + small +
                             "/step-00000002.h5' (No space left on device): the checkpoint needs ";
    EXPECT_EQ(message.substr(0, head.size()), head) << message;
    EXPECT_NE(message.find(" available; nothing was written (the previous checkpoint is untouched)"), std::string::npos)
        << message;
    // Nothing was allocated and nothing is left (once the coordinator has
    // removed the temporary file); step 1 is intact.
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_GE(disk.available(), free_before);
    EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1}));
    EXPECT_EQ(read_text(small + "/latest"), "step-00000001.h5\n");
    auto loaded = zeros_like(state_at(1));
    EXPECT_EQ(manager.load(loaded)->step, 1);
    EXPECT_TRUE(same_state(loaded, state_at(1)));
    MPI_Barrier(MPI_COMM_WORLD);
    on_rank0([&] {
      std::vector<std::string> names;
      for (const auto& entry : fs::directory_iterator(small)) names.push_back(entry.path().filename().string());
      std::sort(names.begin(), names.end());
      EXPECT_EQ(names, (std::vector<std::string>{kLock, "latest", "step-00000001.h5"}));
    });
  }
}

// --- keys that could not be read back as themselves (issue 15, item 9) --------

TEST(CheckpointManagerKeys, ANulByteInAKeyIsRefusedOnEveryRankBeforeAnyFileExists) {
  using namespace std::string_literals;
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  manager.save(1, state_at(1));
  auto state = state_at(2);
  state["model"] = StateDict{{"emb\0ed"s, at::zeros({2})}};
  const auto e = test::expect_checkpoint_error([&] { manager.save(2, state); });
  EXPECT_EQ(e.step(), "save:plan");
  EXPECT_EQ(e.failures().size(), static_cast<std::size_t>(test::world_size()));  // every rank holds the key
  for (const auto& [rank, message] : e.failures())
    EXPECT_EQ(message,
              "h5dcp: the key 'model/emb\\x00ed' holds a NUL byte: keys must be valid UTF-8 without NUL bytes (as "
              "the str keys of torch.save files are), or they could not be read back as the same key")
        << "rank " << rank;
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{kLock, "latest", "step-00000001.h5"}));
}

TEST(CheckpointManagerKeys, AKeyThatIsNotUtf8OnOneRankIsNamedWithThatRank) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  const int last = test::world_size() - 1;
  auto state = state_at(1);
  if (test::world_rank() == last) state["opt\xff"] = std::int64_t{1};
  const auto e = test::expect_checkpoint_error([&] { manager.save(1, state); });
  EXPECT_EQ(e.step(), "save:plan");
  ASSERT_EQ(e.failures().size(), 1u);
  EXPECT_EQ(e.failures().count(last), 1u);
  EXPECT_EQ(e.failures().begin()->second.substr(0, 48), "h5dcp: the key 'opt\\xff' is not valid UTF-8: key");
  EXPECT_TRUE(manager.steps().empty());
}

TEST(CheckpointManagerKeys, ConvertingATorchSaveFileWithANulKeyIsRefused) {
  using namespace std::string_literals;
  test::TempDir dir;
  const auto src = dir.file("nul.pt");
  const auto dst = dir.file("nul.h5");
  on_rank0([&] { write_torch_save(StateDict{{"emb\0ed"s, at::ones({3})}, {"ok", at::ones({2})}}, src); });
  const auto e = test::expect_checkpoint_error([&] { torch_save_to_checkpoint(src, dst); });
  EXPECT_EQ(e.step(), "save:plan");
  ASSERT_FALSE(e.failures().empty());
  for (const auto& [rank, message] : e.failures())
    EXPECT_NE(message.find("the key 'emb\\x00ed' holds a NUL byte"), std::string::npos)
        << "rank " << rank << ": " << message;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"nul.pt"});
}

// --- LibTorch's backtraces stay out of h5dcp's errors (issue 15, item 11) ---

class BrokenState final : public Stateful {
 public:
  StateDict state_dict() override {
    TORCH_CHECK(false, "deliberately broken state");
    return {};
  }
  void load_state_dict(const StateDict&) override {}
};

TEST(CheckpointManagerErrors, ALibTorchErrorIsReportedWithoutItsBacktrace) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  StateDict state{{"broken", std::make_shared<BrokenState>()}};
  const auto e = test::expect_checkpoint_error([&] { manager.save(1, state); });
  EXPECT_EQ(e.failures().size(), static_cast<std::size_t>(test::world_size()));
  for (const auto& [rank, message] : e.failures()) {
    EXPECT_NE(message.find("deliberately broken state"), std::string::npos) << message;
    EXPECT_EQ(message.find("Exception raised from"), std::string::npos) << message;
    EXPECT_EQ(message.find("frame #"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace h5dcp
