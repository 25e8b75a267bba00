#include <gtest/gtest.h>

#include "h5dcp/error.hpp"
#include "plan/load_plan.hpp"

namespace h5dcp::detail {
namespace {

Metadata saved() {
  Metadata md;
  md.state_dict_metadata["w"] = TensorStorageMetadata{{DType::Float32}, {8, 4}, {{{0, 0}, {8, 4}}}};
  md.state_dict_metadata["b"] = TensorStorageMetadata{{DType::Int64}, {4}, {{{0}, {4}}}};
  return md;
}

LoadRequest want(const std::string& fqn, DType dtype, Shape global, Shape offsets, Shape sizes) {
  return LoadRequest{MetadataIndex{fqn, offsets, 0}, false, dtype, std::move(global), {offsets, sizes}};
}

TEST(LoadPlan, AnyBlockOfASavedTensorCanBeRead) {
  const auto plan = create_local_load_plan({want("w", DType::Float32, {8, 4}, {3, 1}, {5, 2})}, saved(), true, false);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].storage_offsets, (Shape{3, 1}));
  EXPECT_EQ(plan.items[0].lengths, (Shape{5, 2}));
  EXPECT_EQ(plan.items[0].dest_offsets, (Shape{0, 0}));
  EXPECT_EQ(plan.unexpected, std::vector<std::string>{"b"});
  EXPECT_EQ(plan.items[0].source_chunks, std::vector<std::size_t>{0});
}

TEST(LoadPlan, BlocksKnowTheSavedChunksTheyOverlap) {
  Metadata md;
  md.state_dict_metadata["r"] =
      TensorStorageMetadata{{DType::Float32}, {9, 4}, {{{0, 0}, {3, 4}}, {{3, 0}, {3, 4}}, {{6, 0}, {3, 4}}}};
  const auto plan = create_local_load_plan({want("r", DType::Float32, {9, 4}, {2, 1}, {5, 2})}, md, true, false);
  EXPECT_EQ(plan.items.at(0).source_chunks, (std::vector<std::size_t>{0, 1, 2}));
  // Damaged chunk attributes that leave a hole are caught.
  std::get<TensorStorageMetadata>(md.state_dict_metadata["r"]).chunks.pop_back();
  EXPECT_THROW(create_local_load_plan({want("r", DType::Float32, {9, 4}, {5, 0}, {4, 4})}, md, true, false),
               FormatError);
}

TEST(LoadPlan, EveryProblemIsReportedAtOnce) {
  try {
    create_local_load_plan({want("missing.a", DType::Float32, {1}, {0}, {1}),
                            want("missing.b", DType::Float32, {1}, {0}, {1}),
                            want("w", DType::Float32, {8, 5}, {0, 0}, {8, 5}),
                            want("b", DType::Int32, {4}, {0}, {4})},
                           saved(), true, false);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("missing from the checkpoint: 'missing.a', 'missing.b'"), std::string::npos) << m;
    EXPECT_NE(m.find("'w' has global shape [8, 4] in the checkpoint but [8, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("'b' is int64 in the checkpoint but int32"), std::string::npos) << m;
  }
}

TEST(LoadPlan, BlockOutsideTheSavedShapeIsRefused) {
  EXPECT_THROW(create_local_load_plan({want("w", DType::Float32, {8, 4}, {6, 0}, {4, 4})}, saved(), true, false),
               UsageError);
}

TEST(Metadata, FindTensorMetadataNamesTheKey) {
  const auto md = saved();
  EXPECT_EQ(find_tensor_metadata(md, "w").size, (Shape{8, 4}));
  try {
    find_tensor_metadata(md, "nope");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos);
  }
}

}  // namespace
}  // namespace h5dcp::detail
