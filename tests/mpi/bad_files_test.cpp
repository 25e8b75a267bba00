// Bad files: empty, not HDF5, truncated, a foreign HDF5 file, a newer
// format version, damaged metadata. Each is a clear error on every rank,
// never a crash or silently wrong tensors.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/checksum.hpp"
#include "h5dcp/h5dcp.hpp"
#include "hdf5/attributes.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

// The good file's one tensor: 80 KiB, above format 1.2's packs (64 KiB), so
// it is a dataset of its own whose attributes the tests damage.
const Shape kShape{160, 128};

std::string load_error(const std::string& path) {
  StateDict target{{"w", at::zeros(kShape)}};
  try {
    load(target, path);
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "load:metadata") << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a CheckpointError for " << path << " on rank " << test::world_rank();
  return "";
}

class BadFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = dir_.file("good.h5");
    save(StateDict{{"w", test::reference_tensor(kShape, at::kFloat)}}, good_);
  }
  // Runs `make` on rank 0 only, then every rank continues.
  template <typename Fn>
  void on_rank0(Fn&& make) {
    if (test::world_rank() == 0) make();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Rewrites a string attribute of `object` in a copy of the good file.
  std::string with_attribute(const std::string& name, const char* object, const char* attribute,
                             const std::vector<std::int64_t>& ints, const std::string& text = "") {
    const auto path = dir_.file(name);
    on_rank0([&] {
      std::filesystem::copy_file(good_, path);
      const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      const hid_t o = H5Oopen(f, object, H5P_DEFAULT);
      H5Adelete(o, attribute);
      if (!ints.empty()) {
        const hsize_t dims[1] = {ints.size()};
        const hid_t space = H5Screate_simple(1, dims, nullptr);
        const hid_t a = H5Acreate2(o, attribute, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT64, ints.data());
        H5Aclose(a);
        H5Sclose(space);
      } else {
        const hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, H5T_VARIABLE);
        const hid_t space = H5Screate(H5S_SCALAR);
        const hid_t a = H5Acreate2(o, attribute, type, space, H5P_DEFAULT, H5P_DEFAULT);
        const char* value = text.c_str();
        H5Awrite(a, type, &value);
        H5Aclose(a);
        H5Sclose(space);
        H5Tclose(type);
      }
      H5Oclose(o);
      H5Fclose(f);
    });
    return path;
  }

  // A copy of the good file, changed by `edit(file)` with plain HDF5 on rank 0.
  template <typename Edit>
  std::string edited(const std::string& name, Edit&& edit) {
    const auto path = dir_.file(name);
    on_rank0([&] {
      std::filesystem::copy_file(good_, path);
      const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      edit(f);
      H5Fclose(f);
    });
    return path;
  }

  // A group marked as a dict entry `name` under `parent`.
  static hid_t dict_group(hid_t parent, const char* name) {
    const hid_t g = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    detail::write_string_attribute(g, "h5dcp.key", name);
    detail::write_string_attribute(g, "h5dcp.container", "dict");
    return g;
  }

  // A dataset of `dims` (never written: no storage) marked as `attributes`.
  static void unwritten_dataset(hid_t parent, const char* name, hid_t type, std::vector<hsize_t> dims, bool chunked,
                                const std::vector<std::pair<const char*, std::string>>& attributes) {
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) {
      const std::vector<hsize_t> one(dims.size(), 1);
      H5Pset_chunk(dcpl, static_cast<int>(one.size()), one.data());
    }
    const hid_t d = H5Dcreate2(parent, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    for (const auto& [attribute, text] : attributes) detail::write_string_attribute(d, attribute, text);
    detail::write_string_attribute(d, "h5dcp.key", name);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
  }

  test::TempDir dir_;
  std::string good_;
};

TEST_F(BadFiles, EmptyAndNonHdf5Files) {
  on_rank0([&] {
    std::ofstream(dir_.file("empty.h5"));
    std::ofstream(dir_.file("text.h5")) << "this is not HDF5\n";
  });
  EXPECT_NE(load_error(dir_.file("empty.h5")).find("is not an HDF5 file"), std::string::npos);
  EXPECT_NE(load_error(dir_.file("text.h5")).find("is not an HDF5 file"), std::string::npos);
}

TEST_F(BadFiles, ATruncatedFile) {
  on_rank0([&] {
    std::filesystem::copy_file(good_, dir_.file("cut.h5"));
    std::filesystem::resize_file(dir_.file("cut.h5"), std::filesystem::file_size(good_) / 2);
  });
  const auto message = load_error(dir_.file("cut.h5"));
  EXPECT_NE(message.find("cut.h5"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
}

TEST_F(BadFiles, AForeignHdf5File) {
  on_rank0([&] {
    const hid_t f = H5Fcreate(dir_.file("foreign.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[1] = {4};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t d = H5Dcreate2(f, "data", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  });
  EXPECT_NE(load_error(dir_.file("foreign.h5")).find("is an HDF5 file but not an h5dcp checkpoint"), std::string::npos);
}

TEST_F(BadFiles, ANewerMajorFormatVersionIsRefused) {
  const auto path = with_attribute("v2.h5", "/", "h5dcp.format_version", {2, 0});
  const auto message = load_error(path);
  EXPECT_NE(message.find("has container format 2.0, newer than the 1.x"), std::string::npos) << message;
  EXPECT_NE(message.find("upgrade h5dcp"), std::string::npos) << message;
  // Format 1.0 (before PyTorch 2.x's dtypes) and a newer minor version load.
  const auto old = with_attribute("v1_0.h5", "/", "h5dcp.format_version", {1, 0});
  StateDict old_target{{"w", at::zeros(kShape)}};
  load(old_target, old);
  EXPECT_TRUE(
      test::bitwise_equal(std::get<at::Tensor>(old_target.at("w")), test::reference_tensor(kShape, at::kFloat)));
  const auto minor = with_attribute("v1_9.h5", "/", "h5dcp.format_version", {1, 9});
  StateDict target{{"w", at::zeros(kShape)}};
  load(target, minor);
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(target.at("w")), test::reference_tensor(kShape, at::kFloat)));
}

TEST_F(BadFiles, DamagedMetadata) {
  auto message = load_error(with_attribute("dtype.h5", "/w", "h5dcp.dtype", {}, "complex256"));
  EXPECT_NE(message.find("unknown dtype 'complex256'"), std::string::npos) << message;
  message = load_error(with_attribute("lies.h5", "/w", "h5dcp.dtype", {}, "int32"));
  EXPECT_NE(message.find("is marked int32 but its HDF5 type is different"), std::string::npos) << message;
  message = load_error(with_attribute("chunks.h5", "/w", "h5dcp.chunk_sizes", {999, 128}));
  EXPECT_NE(message.find("outside its shape"), std::string::npos) << message;
  message = load_error(with_attribute("sums.h5", "/w", "h5dcp.checksum_rows", {1, 2, 3}));
  EXPECT_NE(message.find("checksum rows"), std::string::npos) << message;
}

// A group holding a hard link to itself: the container walk recursed until
// the stack overflowed (SIGSEGV in inspect, verify, convert and load).
TEST_F(BadFiles, GroupsLinkedIntoThemselvesAreRefused) {
  const auto self = edited("self.h5", [](hid_t f) {
    const hid_t g = dict_group(f, "g");
    H5Lcreate_hard(g, ".", g, "g", H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
  });
  auto message = load_error(self);
  EXPECT_NE(message.find("'g/g' in '" + self + "' is the object already read as 'g': a group or dataset linked twice"),
            std::string::npos)
      << message;
  const auto soft = edited("soft.h5", [](hid_t f) {
    const hid_t g = dict_group(f, "g");
    H5Lcreate_soft("/g", g, "g", H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
  });
  message = load_error(soft);
  EXPECT_NE(message.find("'g/g' in '" + soft + "' is a soft link: h5dcp checkpoints hold only hard links"),
            std::string::npos)
      << message;
  const auto report = verify_checkpoint(self);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].check, "metadata");
}

// Nesting beyond what any state dict reaches is refused before the walk's
// recursion gets deep (a few hundred KB of groups reach any stack's end).
TEST_F(BadFiles, NestingDeeperThan256ContainersIsRefused) {
  const auto deep = edited("deep.h5", [](hid_t f) {
    std::vector<hid_t> groups{dict_group(f, "d")};
    for (int i = 1; i < 300; ++i) groups.push_back(dict_group(groups.back(), "d"));
    for (const auto g : groups) H5Gclose(g);
  });
  const auto message = load_error(deep);
  EXPECT_NE(message.find("is nested 256 containers deep, deeper than the 256 h5dcp reads"), std::string::npos)
      << message;
}

// Sizes the file claims are checked before anything is allocated for them.
TEST_F(BadFiles, SizesBeyondTheFileAreRefusedBeforeAllocating) {
  // A 4 GiB value never written: 8.5 GB resident before.
  auto message = load_error(edited("value.h5", [](hid_t f) {
    unwritten_dataset(f, "blob", H5T_STD_U8LE, {hsize_t{1} << 32}, false, {{"h5dcp.kind", "bytes"}});
  }));
  EXPECT_NE(message.find("value 'blob' holds 4294967296 bytes, more than the"), std::string::npos) << message;
  // 2^31 one-row checksum slabs: the slab list alone took 10 GB before.
  message = load_error(edited("slabs.h5", [](hid_t f) {
    unwritten_dataset(f, "big", H5T_STD_U8LE, {hsize_t{1} << 31}, false,
                      {{"h5dcp.kind", "tensor"}, {"h5dcp.dtype", "uint8"}});
    const hid_t d = H5Dopen2(f, "big", H5P_DEFAULT);
    detail::write_int64_attribute(d, "h5dcp.chunk_offsets", {0}, 1);
    detail::write_int64_attribute(d, "h5dcp.chunk_sizes", {std::int64_t{1} << 31}, 1);
    detail::write_int64_attribute(d, "h5dcp.checksum_rows", {1});
    detail::write_uint64_attribute(d, "h5dcp.checksums", {0});
    H5Dclose(d);
  }));
  EXPECT_NE(message.find("'big' in '"), std::string::npos) << message;
  EXPECT_NE(message.find("holds 2147483648 bytes, but"), std::string::npos) << message;
  // [2^32, 2^32]: volume() wrapped to 0, and verify said OK without reading.
  const auto huge = edited("huge.h5", [](hid_t f) {
    unwritten_dataset(f, "huge", H5T_STD_U8LE, {hsize_t{1} << 32, hsize_t{1} << 32}, true,
                      {{"h5dcp.kind", "tensor"}, {"h5dcp.dtype", "uint8"}});
    const hid_t d = H5Dopen2(f, "huge", H5P_DEFAULT);
    detail::write_int64_attribute(d, "h5dcp.chunk_offsets", {0, 0}, 1);
    detail::write_int64_attribute(d, "h5dcp.chunk_sizes", {std::int64_t{1} << 32, std::int64_t{1} << 32}, 1);
    H5Dclose(d);
  });
  message = load_error(huge);
  EXPECT_NE(message.find("has the shape [4294967296, 4294967296] of uint8, more bytes than 64 bits count"),
            std::string::npos)
      << message;
  const auto report = verify_checkpoint(huge);
  EXPECT_FALSE(report.ok());
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_NE(report.problems[0].message.find("more bytes than 64 bits count"), std::string::npos);
}

// Chunks [0:2] and [1:3] of a [4, 2] tensor, with the checksums of the rows
// they name: their volumes add up to the tensor's, the old coverage check
// passed, and row 3 was never read (stale values in load, uninitialised
// memory in load_all, and no error).
TEST_F(BadFiles, OverlappingChunksAreRefusedOnEveryLoad) {
  const auto reference = test::reference_tensor({4, 2}, at::kFloat);
  const auto path = dir_.file("overlap.h5");
  // Saved as two chunks: a dataset of its own, not packed (format 1.2).
  save(StateDict{{"w", test::grid_shards(reference, 2, 1, test::world_rank(), test::world_size())}}, path);
  on_rank0([&] {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "w", H5P_DEFAULT);
    for (const char* name : {"h5dcp.chunk_offsets", "h5dcp.chunk_sizes", "h5dcp.checksum_rows", "h5dcp.checksums"})
      H5Adelete(d, name);
    detail::write_int64_attribute(d, "h5dcp.chunk_offsets", {0, 0, 1, 0}, 2);
    detail::write_int64_attribute(d, "h5dcp.chunk_sizes", {2, 2, 2, 2}, 2);
    detail::write_int64_attribute(d, "h5dcp.checksum_rows", {2, 2});
    const auto rows = [&](std::int64_t first) {
      const auto block = reference.slice(0, first, first + 2).contiguous();
      return detail::checksum(block.data_ptr(), static_cast<std::size_t>(block.nbytes()));
    };
    detail::write_uint64_attribute(d, "h5dcp.checksums", {rows(0), rows(1)});
    H5Dclose(d);
    H5Fclose(f);
  });
  const std::string expected = "shards of 'w' overlap: [0:2, 0:2] and [1:3, 0:2]";
  StateDict target{{"w", at::full({4, 2}, 7.0f)}};
  try {
    load(target, path);
    ADD_FAILURE() << "load read " << std::get<at::Tensor>(target.at("w"));
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  try {
    const auto all = load_all(path);
    ADD_FAILURE() << "load_all read " << std::get<at::Tensor>(all.at("w"));
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  if (test::world_rank() == 0) {
    EXPECT_THROW(CheckpointReader reader(path), FormatError);
    const auto report = verify_checkpoint(path);
    ASSERT_FALSE(report.problems.empty());
    EXPECT_EQ(report.problems[0].check, "tiling");
    EXPECT_NE(report.problems[0].message.find(expected), std::string::npos) << report.problems[0].message;
  }
}

}  // namespace
}  // namespace h5dcp
