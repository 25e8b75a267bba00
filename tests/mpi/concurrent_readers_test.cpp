// Readers during async saves (issue 15, item 7): on every rank a reader
// thread reads an old checkpoint in a loop, through every serial entry point
// that calls HDF5 (CheckpointReader, verify_checkpoint, detect_file_kind,
// checkpoint_to_torch_save, and a load_all over MPI_COMM_SELF), while the
// main thread runs async saves of another checkpoint. HDF5 is not
// thread-safe: every one of these must go through the HDF5 gate. Every
// iteration must read bit-exact data; nothing may crash or hang.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::reference_tensor;

const at::Tensor& old_weight() {
  static const at::Tensor w = reference_tensor({96, 65}, at::kFloat, 11);
  return w;
}

const at::Tensor& old_bias() {
  static const at::Tensor b = reference_tensor({65}, at::kBFloat16, 12);
  return b;
}

StateDict new_state(int rank, int size, std::int64_t seed) {
  return StateDict{{"w", test::grid_shards(reference_tensor({1024, 513}, at::kFloat, seed), 4, 3, rank, size)},
                   {"step", seed}};
}

// One pass over every reader of `old`; what went wrong, or "".
// (load_all takes the gate the way save and load always did: only every
// fourth pass, so that most of the time goes to the other readers.)
std::string read_everything(const std::string& old, const std::string& scratch, int pass) {
  {
    CheckpointReader reader(old);
    if (!bitwise_equal(reader.read_tensor("w"), old_weight())) return "CheckpointReader read a different 'w'";
    for (std::int64_t start = 0; start < 60; ++start)
      if (!bitwise_equal(reader.read_block("b", ChunkStorageMetadata{{start}, {5}}), old_bias().narrow(0, start, 5)))
        return "CheckpointReader read a different block of 'b'";
    if (std::get<std::int64_t>(reader.value("step")) != 3) return "CheckpointReader read a different 'step'";
    reader.close();
  }
  const auto report = verify_checkpoint(old);
  if (!report.ok()) return "verify_checkpoint found problems: " + report.problems.front().message;
  if (report.bytes_read != static_cast<std::int64_t>(old_weight().nbytes() + old_bias().nbytes()))
    return "verify_checkpoint read too little";
  if (detect_file_kind(old) != FileKind::H5dcpCheckpoint) return "detect_file_kind says it is no checkpoint";
  checkpoint_to_torch_save(old, scratch);
  const auto back = read_torch_save(scratch);
  if (!bitwise_equal(std::get<at::Tensor>(back.at("w")), old_weight())) return "the conversion changed 'w'";
  if (pass % 4 != 3) return "";
  const auto all = load_all(old, {}, MPI_COMM_SELF);
  if (!bitwise_equal(std::get<at::Tensor>(all.at("b")), old_bias())) return "load_all on MPI_COMM_SELF changed 'b'";
  return "";
}

TEST(ConcurrentReaders, ReadAnOldCheckpointWhileAsyncSavesRun) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  const auto old = dir.file("old.h5");
  save(StateDict{{"w", old_weight()}, {"b", old_bias()}, {"step", std::int64_t{3}}}, old);

  std::atomic<bool> saving{true};
  std::vector<std::string> problems;
  int passes = 0;
  std::thread reader([&] {
    const auto scratch = dir.file("back" + std::to_string(rank) + ".pt");
    // At least a few passes, and on until the saves are done.
    while (passes < 4 || saving.load()) {
      try {
        const auto problem = read_everything(old, scratch, passes);
        if (!problem.empty()) problems.push_back("pass " + std::to_string(passes) + ": " + problem);
      } catch (const std::exception& e) {
        problems.push_back("pass " + std::to_string(passes) + ": " + e.what());
      }
      ++passes;
      if (problems.size() > 5) break;
    }
  });

  constexpr std::int64_t kSaves = 12;
  std::vector<SaveFuture> futures;
  for (std::int64_t seed = 1; seed <= kSaves; ++seed) {
    auto state = new_state(rank, size, seed);
    futures.push_back(async_save(state, dir.file("new" + std::to_string(seed % 2) + ".h5"), test::staging_of(1 << 16)));
  }
  for (auto& f : futures) EXPECT_EQ(f.get().metadata.world_size, size);
  finish_async_saves();
  saving = false;
  reader.join();

  EXPECT_TRUE(problems.empty()) << problems.size() << " problems on rank " << rank << ", first: " << problems.front();
  EXPECT_GE(passes, 4);
  std::printf("[rank %d] %d reader passes during %d async saves\n", rank, passes, static_cast<int>(kSaves));
  const auto last = load_all(dir.file("new" + std::to_string(kSaves % 2) + ".h5"));
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(last.at("w")), reference_tensor({1024, 513}, at::kFloat, kSaves)));
  EXPECT_EQ(std::get<std::int64_t>(last.at("step")), kSaves);
}

}  // namespace
}  // namespace h5dcp
