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

ReadItem want(const std::string& fqn, DType dtype, Shape global, Shape offsets, Shape sizes) {
  return ReadItem{MetadataIndex{fqn, offsets, 0}, dtype, std::move(global), {offsets, sizes}};
}

TEST(LoadPlan, AnyBlockOfASavedTensorCanBeRead) {
  const auto plan = create_local_load_plan({want("w", DType::Float32, {8, 4}, {3, 1}, {5, 2})}, saved());
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].box.offsets, (Shape{3, 1}));
}

TEST(LoadPlan, EveryProblemIsReportedAtOnce) {
  try {
    create_local_load_plan({want("missing.a", DType::Float32, {1}, {0}, {1}),
                            want("missing.b", DType::Float32, {1}, {0}, {1}),
                            want("w", DType::Float32, {8, 5}, {0, 0}, {8, 5}),
                            want("b", DType::Int32, {4}, {0}, {4})},
                           saved());
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("missing from the checkpoint: 'missing.a', 'missing.b'"), std::string::npos) << m;
    EXPECT_NE(m.find("'w' has global shape [8, 4] in the checkpoint but [8, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("'b' is int64 in the checkpoint but int32"), std::string::npos) << m;
  }
}

TEST(LoadPlan, BlockOutsideTheSavedShapeIsRefused) {
  EXPECT_THROW(create_local_load_plan({want("w", DType::Float32, {8, 4}, {6, 0}, {4, 4})}, saved()), UsageError);
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
