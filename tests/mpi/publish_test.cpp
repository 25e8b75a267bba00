// Publishing by rename: a replaced large checkpoint is removed in the
// background, and nothing else is left beside the published file.

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "h5dcp/h5dcp.hpp"
#include "storage/deferred_removal.hpp"
#include "storage/durable_file.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::reference_tensor;

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Publish, AReplacedLargeFileIsRemovedAndOnlyTheNewOneStays) {
  test::TempDir dir;
  if (test::world_rank() != 0) return;  // file system only: one rank is enough
  const std::string old_content(static_cast<std::size_t>(detail::kBackgroundRemovalBytes) + 1, 'o');
  write_text(dir.file("ckpt.h5"), old_content);
  write_text(dir.file("new"), "new content");
  detail::publish_by_rename(dir.file("new"), dir.file("ckpt.h5"));
  EXPECT_EQ(read_text(dir.file("ckpt.h5")), "new content");
  detail::finish_background_removals();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.h5"});
}

TEST(Publish, AFailedRenameLeavesTheOldFileAndNoSecondName) {
  test::TempDir dir;
  if (test::world_rank() != 0) return;
  const std::string old_content(static_cast<std::size_t>(detail::kBackgroundRemovalBytes) + 1, 'o');
  write_text(dir.file("ckpt.h5"), old_content);
  EXPECT_THROW(detail::publish_by_rename(dir.file("missing"), dir.file("ckpt.h5")), IoError);
  detail::finish_background_removals();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.h5"});
  EXPECT_EQ(read_text(dir.file("ckpt.h5")), old_content);
}

TEST(Publish, SavesOverALargeCheckpointLoadTheNewestAndLeaveOneFile) {
  test::TempDir dir;
  const auto path = dir.file("ckpt.h5");
  // 24 MiB: past the size from which the replaced file goes to the background.
  for (int round = 0; round < 3; ++round) {
    const auto weights = reference_tensor({6 << 20}, at::kFloat, round);
    save(StateDict{{"w", weights}}, path);
    StateDict loaded{{"w", at::zeros({6 << 20}, at::kFloat)}};
    load(loaded, path);
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(loaded.at("w")), weights)) << "round " << round;
  }
  detail::finish_background_removals();
  MPI_Barrier(MPI_COMM_WORLD);  // every rank's removals (only the coordinator's publish has any)
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.h5"});
}

}  // namespace
}  // namespace h5dcp
