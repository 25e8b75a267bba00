// Checksums: computed while writing, stored with the data, verified on every
// load (resharded included); flipped bytes are named, never loaded.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <algorithm>

#include <fstream>
#include <iterator>

#include "file_bytes.hpp"
#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::data_offset;
using test::flip_byte;
using test::reference_tensor;

template <typename Fn>
std::string checkpoint_error(Fn&& fn) {
  try {
    fn();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a CheckpointError on rank " << test::world_rank();
  return "";
}

const Shape kShape{300, 1100};  // 1.3 MB of float32: more than one checksum slab

StateDict state(int rank, int size) {
  return StateDict{
      {"model", StateDict{{"w", test::grid_shards(reference_tensor(kShape, at::kFloat), size, 1, rank, size)}}},
      {"note", "intact"}};
}

TEST(Integrity, AFlippedDataByteIsCaughtOnEveryKindOfLoad) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  const auto path = dir.file("c.h5");
  save(state(rank, size), path);
  StateDict clean{{"model", StateDict{{"w", at::zeros(kShape)}}}};
  load(clean, path);  // intact: loads

  // A byte in row 250 (in the last rows, whoever saved them).
  flip_byte(path, data_offset(path, "/model/w", (250 * 1100 + 7) * 4 + 1));
  // Every load names the slab holding it: slabs of 1 MiB (238 rows) from the
  // start of the saved chunk holding row 250 (test::grid_shards' uneven cuts
  // of the 300 rows). At 1 rank the chunk has two slabs and the damage is in
  // the second, which a same-sharding load reads into place after checking
  // the first.
  const auto cuts = test::uneven_cuts(300, size);
  const std::int64_t chunk_start = *std::prev(std::upper_bound(cuts.begin(), cuts.end(), std::int64_t{250}));
  const std::int64_t chunk_end = *std::upper_bound(cuts.begin(), cuts.end(), std::int64_t{250});
  const std::int64_t slab_start = chunk_start + (250 - chunk_start) / 238 * 238;
  const std::int64_t slab_end = std::min(slab_start + 238, chunk_end);
  const std::string damaged_slab = "slab [" + std::to_string(slab_start) + ":" + std::to_string(slab_end) + ", 0:1100]";
  for (const auto& layout : {"same", "columns", "whole"}) {
    StateDict target;
    if (std::string(layout) == "same")
      target["model"] =
          StateDict{{"w", test::zeros_like(std::get<ShardedTensor>(value_at(state(rank, size), "model/w")))}};
    else if (std::string(layout) == "columns")
      target["model"] = StateDict{{"w", test::zeros_like(test::grid_shards(at::zeros(kShape), 1, size, rank, size))}};
    else
      target["model"] = StateDict{{"w", at::zeros(kShape)}};
    const auto message = checkpoint_error([&] { load(target, path); });
    EXPECT_NE(message.find("checksum mismatch in 'model/w'"), std::string::npos) << layout << ": " << message;
    EXPECT_NE(message.find("the checkpoint is damaged"), std::string::npos) << message;
    EXPECT_NE(message.find(damaged_slab), std::string::npos) << layout << ": " << message;
  }
  // The export to torch.save (one process) checks each slab as it streams it,
  // and leaves nothing behind.
  if (rank == 0) {
    std::string message;
    try {
      checkpoint_to_torch_save(path, dir.file("c.pt"));
      ADD_FAILURE() << "the export of a damaged checkpoint succeeded";
    } catch (const FormatError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("checksum mismatch in 'model/w'"), std::string::npos) << message;
    EXPECT_NE(message.find(damaged_slab), std::string::npos) << message;
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.h5"});
  }
  // Without verification the damage goes through: the flip was real.
  StateDict blind{{"model", StateDict{{"w", at::zeros(kShape)}}}};
  LoadOptions no_verify;
  no_verify.verify_checksums = false;
  load(blind, path, no_verify);
  EXPECT_FALSE(bitwise_equal(std::get<at::Tensor>(value_at(blind, "model/w")), reference_tensor(kShape, at::kFloat)));
}

TEST(Integrity, AFlippedValueIsCaughtWhenTheMetadataIsRead) {
  test::TempDir dir;
  const auto path = dir.file("v.h5");
  save(state(test::world_rank(), test::world_size()), path);
  flip_byte(path, data_offset(path, "/note", 2));
  StateDict target{{"note", ""}};
  const auto message = checkpoint_error([&] { load(target, path); });
  EXPECT_NE(message.find("checksum mismatch in the value 'note'"), std::string::npos) << message;
}

TEST(Integrity, AsyncAndSyncSavesStoreTheSameChecksums) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  save(state(rank, size), dir.file("sync.h5"));
  // Pieces smaller than slabs: the shard streams through 64 KiB.
  async_save(state(rank, size), dir.file("async.h5"), test::staging_of(64 * 1024)).get();
  if (rank == 0) {
    auto digests = [](const std::string& file) {
      const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      const hid_t d = H5Dopen2(f, "/model/w", H5P_DEFAULT);
      const hid_t a = H5Aopen(d, "h5dcp.checksums", H5P_DEFAULT);
      const hid_t s = H5Aget_space(a);
      std::vector<std::uint64_t> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(s)));
      H5Aread(a, H5T_NATIVE_UINT64, v.data());
      H5Sclose(s);
      H5Aclose(a);
      H5Dclose(d);
      H5Fclose(f);
      return v;
    };
    const auto a = digests(dir.file("sync.h5"));
    EXPECT_GE(a.size(), 2u);  // more than one slab
    EXPECT_EQ(a, digests(dir.file("async.h5")));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Sets H5DCP_INJECT_FAULT for the scope of one save.
struct InjectFault {
  explicit InjectFault(const std::string& spec) { ::setenv("H5DCP_INJECT_FAULT", spec.c_str(), 1); }
  ~InjectFault() { ::unsetenv("H5DCP_INJECT_FAULT"); }
};

// Early write-back (storage/early_writeback.hpp) at its most frequent, on row
// shards (independent writes), column shards (collective writes) and the
// async saver's pieces: every byte arrives, the checksums agree.
TEST(Integrity, EarlyWritebackKeepsEveryByte) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  ::setenv("H5DCP_WRITEBACK_MIB", "1", 1);
  const auto full = reference_tensor({1536, 1024}, at::kFloat, 11);  // 6 MiB
  for (const bool async : {false, true}) {
    for (const bool rows : {true, false}) {
      const auto path = dir.file(std::string(async ? "async-" : "") + (rows ? "rows.h5" : "columns.h5"));
      StateDict sd{{"w", test::grid_shards(full, rows ? size : 1, rows ? 1 : size, rank, size)}};
      if (async) {
        async_save(sd, path, test::staging_of(1 << 20)).get();  // streamed in pieces of 512 KiB
      } else {
        save(sd, path);
      }
      StateDict back{{"w", at::zeros({1536, 1024})}};
      load(back, path);
      EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(back.at("w")), full)) << path;
      if (rank == 0) {
        const auto report = verify_checkpoint(path);
        EXPECT_TRUE(report.ok()) << path;
        // A shared checkpoint is not a node-local copy.
        EXPECT_FALSE(report.local_copy.has_value()) << path;
        EXPECT_FALSE(read_local_copy_summary(path).has_value()) << path;
      }
    }
  }
  ::unsetenv("H5DCP_WRITEBACK_MIB");
}

// A write that loses its tail without an error (what a short write the I/O
// stack did not report looks like) publishes a file whose data is wrong:
// the checksums, taken from memory, must stop every load from using it.
TEST(Integrity, AShortWriteIsCaughtOnLoadAndByVerify) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  const int writer = size - 1;
  for (const bool async : {false, true}) {
    const auto path = dir.file(async ? "short-async.h5" : "short.h5");
    {
      InjectFault fault("save:write@" + std::to_string(writer) + "!short");
      if (async) {
        async_save(state(rank, size), path, test::staging_of(256 * 1024)).get();
      } else {
        save(state(rank, size), path);
      }
    }
    StateDict target{{"model", StateDict{{"w", at::zeros(kShape)}}}};
    const auto message = checkpoint_error([&] { load(target, path); });
    EXPECT_NE(message.find("checksum mismatch in 'model/w'"), std::string::npos) << async << ": " << message;
    if (rank == 0) {
      const auto report = verify_checkpoint(path);
      ASSERT_FALSE(report.ok());
      EXPECT_EQ(report.problems.front().check, "checksums");
      EXPECT_EQ(report.problems.front().where, "model/w");
    }
    // The damage is real: without verification some values are wrong, and
    // every wrong one is a zero the short write left behind.
    LoadOptions no_verify;
    no_verify.verify_checksums = false;
    load(target, path, no_verify);
    const auto loaded = std::get<at::Tensor>(value_at(target, "model/w"));
    // (compared as bits: the reference holds NaNs)
    const auto wrong = loaded.view(at::kInt).ne(reference_tensor(kShape, at::kFloat).view(at::kInt));
    EXPECT_GT(wrong.sum().item<std::int64_t>(), 0);
    EXPECT_TRUE(loaded.masked_select(wrong).eq(0).all().item<bool>());
  }
}

// Many small tensors: saved whole into the packs, each rank writing its
// share of them as one range of the pack, straight from the tensors.
StateDict small_tensors(bool zeroed = false) {
  StateDict sd;
  for (int i = 0; i < 300; ++i)
    sd["t" + std::to_string(i)] = zeroed ? at::zeros({16, 16}) : reference_tensor({16, 16}, at::kFloat, i);
  return sd;
}

// small_tensors() saved at `path` with H5DCP_INJECT_FAULT=`spec`.
void save_small_tensors_with(const std::string& spec, const std::string& path) {
  InjectFault fault(spec);
  save(small_tensors(), path);
}

// A pack range that loses its tail without an error is caught like a
// dataset block: by the checksums taken from the tensors' memory.
TEST(Integrity, AShortWriteOfAPackIsCaughtOnLoadAndByVerify) {
  test::TempDir dir;
  const auto path = dir.file("short-pack.h5");
  save_small_tensors_with("save:write@*!short", path);
  auto target = small_tensors(/*zeroed=*/true);
  const auto message = checkpoint_error([&] { load(target, path); });
  EXPECT_NE(message.find("checksum mismatch in 't"), std::string::npos) << message;
  if (test::world_rank() == 0) {
    const auto report = verify_checkpoint(path);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.problems.front().check, "checksums");
  }
  // Unverified, the tail of every rank's range is zeros: the last tensor
  // is wrong, the first right.
  LoadOptions no_verify;
  no_verify.verify_checksums = false;
  load(target, path, no_verify);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(target.at("t0")), reference_tensor({16, 16}, at::kFloat, 0)));
  const auto& last = std::get<at::Tensor>(target.at("t99"));  // "t99" sorts last
  EXPECT_FALSE(bitwise_equal(last, reference_tensor({16, 16}, at::kFloat, 99)));
  EXPECT_TRUE(last.eq(0).all().item<bool>());
}

// With every write(2) cut to a few bytes, the packs written straight from
// the tensors (pwritev of a range) are whole: the loop goes on after short
// writes, piece by piece.
TEST(Integrity, PacksWrittenByShortPosixWritesLoseNothing) {
  test::TempDir dir;
  const auto path = dir.file("posix-short-pack.h5");
  save_small_tensors_with("posix:write@*!short", path);
  auto target = small_tensors(/*zeroed=*/true);
  load(target, path);
  for (int i = 0; i < 300; ++i) {
    const auto key = "t" + std::to_string(i);
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(target.at(key)), reference_tensor({16, 16}, at::kFloat, i))) << key;
  }
  if (test::world_rank() == 0) {
    EXPECT_TRUE(verify_checkpoint(path).ok());
  }
}

// Our own POSIX writes (torch.save files, the manager's pointer) go on after
// short write(2)s: with every write cut to a few bytes the bytes are the same.
TEST(Integrity, PosixShortWritesLoseNothing) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  const auto path = dir.file("src.h5");
  save(state(rank, size), path);
  if (rank == 0) {
    checkpoint_to_torch_save(path, dir.file("plain.pt"));
    {
      InjectFault fault("posix:write@*!short");
      checkpoint_to_torch_save(path, dir.file("short.pt"));
    }
    auto bytes = [](const std::string& file) {
      std::ifstream in(file, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto plain = bytes(dir.file("plain.pt"));
    EXPECT_GT(plain.size(), 1000000u);
    EXPECT_EQ(plain, bytes(dir.file("short.pt")));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace h5dcp
