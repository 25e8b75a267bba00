// Bad files: empty, not HDF5, truncated, a foreign HDF5 file, a newer
// format version, damaged metadata. Each is a clear error on every rank,
// never a crash or silently wrong tensors.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

std::string load_error(const std::string& path) {
  StateDict target{{"w", at::zeros({16, 8})}};
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
    save(StateDict{{"w", test::reference_tensor({16, 8}, at::kFloat)}}, good_);
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
  StateDict old_target{{"w", at::zeros({16, 8})}};
  load(old_target, old);
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(old_target.at("w")), test::reference_tensor({16, 8}, at::kFloat)));
  const auto minor = with_attribute("v1_9.h5", "/", "h5dcp.format_version", {1, 9});
  StateDict target{{"w", at::zeros({16, 8})}};
  load(target, minor);
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(target.at("w")), test::reference_tensor({16, 8}, at::kFloat)));
}

TEST_F(BadFiles, DamagedMetadata) {
  auto message = load_error(with_attribute("dtype.h5", "/w", "h5dcp.dtype", {}, "complex256"));
  EXPECT_NE(message.find("unknown dtype 'complex256'"), std::string::npos) << message;
  message = load_error(with_attribute("lies.h5", "/w", "h5dcp.dtype", {}, "int32"));
  EXPECT_NE(message.find("is marked int32 but its HDF5 type is different"), std::string::npos) << message;
  message = load_error(with_attribute("chunks.h5", "/w", "h5dcp.chunk_sizes", {99, 8}));
  EXPECT_NE(message.find("outside its shape"), std::string::npos) << message;
  message = load_error(with_attribute("sums.h5", "/w", "h5dcp.checksum_rows", {1, 2, 3}));
  EXPECT_NE(message.find("checksum rows"), std::string::npos) << message;
}

}  // namespace
}  // namespace h5dcp
