// Publishing by rename: a replaced large checkpoint is removed in the
// background, and nothing else is left beside the published file; a
// directory (an export) is swapped with the one it replaces in one step.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "h5dcp/h5dcp.hpp"
#include "storage/deferred_removal.hpp"
#include "storage/directory_publish.hpp"
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

// A directory holding `files` (name -> content).
void make_directory(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  for (const auto& [name, text] : files) write_text(dir + "/" + name, text);
}

// Whether `dir` lies on a file system whose rename(2) exchanges (ext4, xfs,
// btrfs, tmpfs: every kernel this project supports), where exchange_paths
// must swap rather than report that it cannot.
bool exchanges_here(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return false;
  const auto type = static_cast<unsigned long>(fs.f_type);
  return type == 0xEF53UL || type == 0x58465342UL || type == 0x9123683EUL || type == 0x01021994UL;
}

TEST(Publish, ExchangePathsSwapsTwoDirectoriesInOneStep) {
  test::TempDir dir;
  if (test::world_rank() != 0) return;
  make_directory(dir.file("dst"), {{"x", "old"}});
  make_directory(dir.file("new"), {{"x", "new"}, {"y", "new only"}});
  const bool swapped = detail::exchange_paths(dir.file("new"), dir.file("dst"));
  if (exchanges_here(dir.path())) EXPECT_TRUE(swapped) << "this file system can exchange";
  if (swapped) {
    EXPECT_EQ(read_text(dir.file("dst/x")), "new");
    EXPECT_EQ(read_text(dir.file("dst/y")), "new only");
    EXPECT_EQ(read_text(dir.file("new/x")), "old");
  } else {
    EXPECT_EQ(read_text(dir.file("dst/x")), "old");
  }
  // A missing target: nothing to swap with, and nothing changed.
  EXPECT_FALSE(detail::exchange_paths(dir.file("new"), dir.file("missing")));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"dst", "new"}));
}

TEST(Publish, ADirectoryReplacesAnEarlierOneAndOnlyItsOwnFilesAreRemoved) {
  test::TempDir dir;
  if (test::world_rank() != 0) return;
  const auto ours = [](const std::string& name) { return name == ".metadata" || name == "__0_0.distcp"; };
  // No earlier one: a plain rename.
  make_directory(dir.file("first"), {{".metadata", "1"}, {"__0_0.distcp", "1"}});
  detail::publish_directory(dir.file("first"), dir.file("dst"), ours);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"dst"});
  EXPECT_EQ(read_text(dir.file("dst/.metadata")), "1");
  // An earlier one: replaced, and nothing of it left.
  make_directory(dir.file("second"), {{".metadata", "2"}, {"__0_0.distcp", "2"}});
  detail::publish_directory(dir.file("second"), dir.file("dst"), ours);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"dst"});
  EXPECT_EQ(read_text(dir.file("dst/.metadata")), "2");
  EXPECT_EQ(read_text(dir.file("dst/__0_0.distcp")), "2");
  // An earlier one holding a file the export did not write: the user's file
  // is kept, in the replaced directory under its hidden name, alone.
  write_text(dir.file("dst/notes.txt"), "the user's");
  make_directory(dir.file("third"), {{".metadata", "3"}, {"__0_0.distcp", "3"}});
  detail::publish_directory(dir.file("third"), dir.file("dst"), ours);
  EXPECT_EQ(read_text(dir.file("dst/.metadata")), "3");
  const auto entries = dir.entries();
  ASSERT_EQ(entries.size(), 2U) << ::testing::PrintToString(entries);
  ASSERT_EQ(std::count(entries.begin(), entries.end(), "dst"), 1) << ::testing::PrintToString(entries);
  const auto replaced = entries[0] == "dst" ? entries[1] : entries[0];
  if (exchanges_here(dir.path()))
    EXPECT_EQ(replaced, "third") << "swapped: the replaced directory has the new one's temporary name";
  else
    EXPECT_EQ(replaced.rfind(".dst.h5dcp-partial.", 0), 0U) << replaced;
  const std::string kept = dir.file(replaced);
  EXPECT_EQ(read_text(kept + "/notes.txt"), "the user's");
  struct stat info {};
  EXPECT_NE(::stat((kept + "/.metadata").c_str(), &info), 0) << "the replaced export's own files are removed";
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
