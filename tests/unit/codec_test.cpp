#include <gtest/gtest.h>

#include "base/key_escape.hpp"
#include "h5dcp/dtype.hpp"
#include "h5dcp/error.hpp"
#include "plan/codec.hpp"

namespace h5dcp::detail {
namespace {

TEST(Codec, GlobalSavePlanRoundTrips) {
  GlobalSavePlan plan;
  plan.temp_path = "/tmp/.x.h5dcp-partial.1";
  plan.created = "2026-11-21T00:00:00Z";
  plan.world_size = 3;
  plan.tensors.push_back(PlannedTensor{"a/b c", DType::BFloat16, {5, 0, 2}, true, {{{{0, 0, 0}, {5, 0, 2}}, 2, 7}}});
  plan.tensors.push_back(PlannedTensor{"s", DType::Bool, {}, false, {{{{}, {}}, 1, 0}}});
  plan.values.push_back(PlannedValue{"x/y", "int", std::string(8, '\7'), 2});
  plan.containers.emplace_back("x", ContainerKind::Dict);
  const auto back = decode_global_save_plan(encode(plan));
  EXPECT_EQ(back.temp_path, plan.temp_path);
  EXPECT_EQ(back.created, plan.created);
  EXPECT_EQ(back.world_size, 3);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].fqn, "a/b c");
  EXPECT_EQ(back.tensors[0].dtype, DType::BFloat16);
  EXPECT_EQ(back.tensors[0].global_shape, (Shape{5, 0, 2}));
  EXPECT_EQ(back.tensors[0].chunks[0].writer, 2);
  EXPECT_EQ(back.tensors[0].chunks[0].writer_shard_index, 7u);
  EXPECT_TRUE(back.tensors[1].global_shape.empty());
  ASSERT_EQ(back.values.size(), 1u);
  EXPECT_EQ(back.values[0].payload, std::string(8, '\7'));
  EXPECT_EQ(back.values[0].writer, 2);
  EXPECT_EQ(back.containers, plan.containers);
}

TEST(Codec, SavePlanAndMetadataRoundTrip) {
  SavePlan plan{
      {WriteItem{MetadataIndex{"w", Shape{2}, 1}, WriteItemType::Shard, DType::Int16, {4}, {{2}, {2}}, {}, {}},
       WriteItem{MetadataIndex{"v", std::nullopt, std::nullopt},
                 WriteItemType::Value,
                 DType::UInt8,
                 {},
                 {},
                 "bytes",
                 std::string("\0\1\2", 3)}},
      {{"d", ContainerKind::Dict}, {"d/l", ContainerKind::List}}};
  const auto back = decode_save_plan(encode(plan));
  ASSERT_EQ(back.items.size(), 2u);
  EXPECT_EQ(back.items[1].type, WriteItemType::Value);
  EXPECT_EQ(back.items[1].encoding, "bytes");
  EXPECT_EQ(back.items[1].payload, std::string("\0\1\2", 3));
  EXPECT_EQ(back.containers, plan.containers);
  EXPECT_EQ(back.items[0].index, plan.items[0].index);
  EXPECT_EQ(back.items[0].index.index, std::optional<std::size_t>(1));
  EXPECT_EQ(back.items[0].chunk, plan.items[0].chunk);

  Metadata md;
  md.format_version_major = 1;
  md.library_version = "0.1.0";
  md.world_size = 4;
  md.state_dict_metadata["t"] = TensorStorageMetadata{{DType::Float16}, {3}, {{{0}, {1}}, {{1}, {2}}}};
  md.state_dict_metadata["v"] = BytesStorageMetadata{"str", 5};
  md.containers["d"] = ContainerKind::List;
  const auto md2 = decode_metadata(encode(md));
  EXPECT_EQ(md2.world_size, 4);
  EXPECT_EQ(std::get<TensorStorageMetadata>(md2.state_dict_metadata.at("t")).chunks.size(), 2u);
  EXPECT_EQ(std::get<BytesStorageMetadata>(md2.state_dict_metadata.at("v")).encoding, "str");
  EXPECT_EQ(std::get<BytesStorageMetadata>(md2.state_dict_metadata.at("v")).size, 5);
  EXPECT_EQ(md2.containers.at("d"), ContainerKind::List);

  CheckpointIndex index{md, {{"v", "hello"}}};
  const auto index2 = decode_checkpoint_index(encode(index));
  EXPECT_EQ(index2.values.at("v"), "hello");
  EXPECT_EQ(index2.metadata.containers.size(), 1u);
}

TEST(Codec, TruncatedOrTrailingBytesAreRefused) {
  const auto bytes = encode(SavePlan{
      {WriteItem{
          MetadataIndex{"w", std::nullopt, std::nullopt}, WriteItemType::Tensor, DType::Int8, {4}, {{0}, {4}}, {}, {}}},
      {}});
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_THROW(decode_save_plan(bytes.substr(0, cut)), Error) << "cut at " << cut;
  EXPECT_THROW(decode_save_plan(bytes + "x"), Error);
}

TEST(Codec, AListCountBeyondTheBytesLeftIsRefusedBeforeItsElements) {
  const std::vector<std::string> lists = {encode(SavePlan{}), encode(GlobalSavePlan{}), encode(Metadata{}),
                                          encode(std::vector<ChunkChecksums>{})};
  for (std::size_t i = 0; i < lists.size(); ++i) {
    // Each message's last list count is 0; make it claim 2^40 elements.
    auto bytes = lists[i];
    ASSERT_GE(bytes.size(), 8U);
    bytes[bytes.size() - 3] = 1;
    try {
      if (i == 0) decode_save_plan(bytes);
      if (i == 1) decode_global_save_plan(bytes);
      if (i == 2) decode_metadata(bytes);
      if (i == 3) decode_chunk_checksums(bytes);
      ADD_FAILURE() << "message " << i << " decoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("count out of range"), std::string::npos) << i << ": " << e.what();
    }
  }
}

TEST(LinkName, EscapingIsReversibleAndKeepsReadableNames) {
  EXPECT_EQ(escape_link_name("layer1.weight"), "layer1.weight");
  EXPECT_EQ(escape_link_name("a/b"), "a%2Fb");
  EXPECT_EQ(escape_link_name("100%"), "100%25");
  EXPECT_EQ(escape_link_name("."), "%2E");
  EXPECT_EQ(escape_link_name(""), "%");
  for (const std::string key : {"", ".", "..", "a/b/c", "%2F", "%", "sp ace", "ünïcode/κλειδί", "x.y.z", "/lead"}) {
    const auto name = escape_link_name(key);
    EXPECT_EQ(name.find('/'), std::string::npos) << key;
    EXPECT_NE(name, ".");
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(unescape_link_name(name), key);
  }
  EXPECT_THROW(unescape_link_name("bad%2"), FormatError);
  EXPECT_THROW(unescape_link_name("bad%zz"), FormatError);
}

TEST(DType, NamesAndSizes) {
  for (int i = 0; i <= static_cast<int>(kLastDType); ++i) {
    const auto d = static_cast<DType>(i);
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d) << i;
    EXPECT_NE(supported_dtype_names().find(std::string(dtype_name(d))), std::string::npos) << i;
  }
  EXPECT_EQ(dtype_size(DType::BFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  EXPECT_EQ(dtype_name(DType::Float16), "float16");
  // PyTorch 2.x's dtypes, named as torch names them.
  EXPECT_EQ(dtype_name(DType::UInt64), "uint64");
  EXPECT_EQ(dtype_size(DType::UInt32), 4u);
  EXPECT_EQ(dtype_name(DType::Float8_e4m3fn), "float8_e4m3fn");
  EXPECT_EQ(dtype_size(DType::Float8_e5m2fnuz), 1u);
  EXPECT_EQ(dtype_name(DType::Float8_e8m0fnu), "float8_e8m0fnu");
  EXPECT_EQ(dtype_size(DType::Complex32), 4u);
  EXPECT_EQ(dtype_size(DType::Complex64), 8u);
  EXPECT_EQ(dtype_size(DType::Complex128), 16u);
  EXPECT_TRUE(is_complex(DType::Complex32));
  EXPECT_FALSE(is_complex(DType::Float64));
  EXPECT_FALSE(dtype_from_name("float4_e2m1fn_x2").has_value());
  EXPECT_FALSE(dtype_from_name("complex256").has_value());
}

}  // namespace
}  // namespace h5dcp::detail
