// The safetensors header: what h5dcp writes parses back, and every way a
// header can lie is refused with a message naming the tensor.

#include <gtest/gtest.h>

#include <string>

#include "formats/safetensors_header.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::string message_of(std::string_view json, std::uint64_t data_bytes) {
  try {
    parse_safetensors_header(json, data_bytes, "x.safetensors");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(SafetensorsHeader, WhatIsComposedParsesBackWithItsOffsetsAndMetadata) {
  std::vector<SafetensorsTensor> tensors{{"model/a.weight", DType::BFloat16, {2, 3}, 0, 12},
                                         {"b", DType::Float8_e4m3fn, {5}, 12, 17},
                                         {"empty", DType::Float32, {0, 4}, 17, 17},
                                         {"scalar", DType::Int64, {}, 17, 25}};
  const auto bytes = compose_safetensors_header(tensors, {{"format", "pt"}, {"note", "h\u00e9llo \"quoted\""}});
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.size() % 8, 0u);  // the data starts 8-aligned
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  EXPECT_EQ(n, bytes.size() - 8);
  const auto header = parse_safetensors_header(std::string_view(bytes).substr(8), 25, "x");
  ASSERT_EQ(header.tensors.size(), 4u);
  EXPECT_EQ(header.tensors[0].name, "model/a.weight");
  EXPECT_EQ(header.tensors[0].dtype, DType::BFloat16);
  EXPECT_EQ(header.tensors[0].shape, (Shape{2, 3}));
  EXPECT_EQ(header.tensors[3].name, "scalar");
  EXPECT_EQ(header.tensors[3].begin, 17u);
  EXPECT_EQ(header.metadata.at("note"), "h\u00e9llo \"quoted\"");
}

TEST(SafetensorsHeader, EveryDtypeNameRoundTripsAndComplex32And128HaveNone) {
  int named = 0;
  for (int d = 0; d <= static_cast<int>(kLastDType); ++d) {
    const auto dtype = static_cast<DType>(d);
    const auto name = safetensors_dtype_name(dtype);
    if (dtype == DType::Complex32 || dtype == DType::Complex128) {
      EXPECT_FALSE(name.has_value());
      continue;
    }
    ASSERT_TRUE(name.has_value()) << dtype_name(dtype);
    EXPECT_EQ(dtype_from_safetensors(*name), dtype);
    ++named;
  }
  EXPECT_EQ(named, 19);
  EXPECT_EQ(*safetensors_dtype_name(DType::Float8_e4m3fn), "F8_E4M3");
  EXPECT_FALSE(dtype_from_safetensors("F4").has_value());
}

TEST(SafetensorsHeader, HeadersThatLieAreRefusedNamingTheTensor) {
  // Offsets beyond the data.
  EXPECT_NE(message_of(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8)
                .find("tensor 'w' lies about its offsets: [0, 16) is not inside the 8 bytes of data"),
            std::string::npos);
  // Overlapping ranges.
  EXPECT_NE(message_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       12)
                .find("overlapping ranges"),
            std::string::npos);
  // A gap between tensors.
  EXPECT_NE(message_of(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                       R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
                       6)
                .find("tensor 'b' lies about its offsets: it starts at 4, leaving a gap after byte 2"),
            std::string::npos);
  // Data after the last tensor (a header that lies about the length).
  EXPECT_NE(message_of(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 10).find("end at byte 2 of 10"),
            std::string::npos);
  // A shape whose bytes are not the range.
  EXPECT_NE(message_of(R"({"a":{"dtype":"F64","shape":[3],"data_offsets":[0,16]}})", 16)
                .find("tensor 'a' of shape [3] and dtype F64 does not have 16 bytes"),
            std::string::npos);
  // A shape that overflows.
  EXPECT_NE(message_of(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0)
                .find("does not have 0 bytes"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"a":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}})", 1)
                .find("tensor 'a' has unknown dtype 'F4'"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1)
                .find("shape is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"a":{"dtype":"U8","shape":[1]}})", 1).find("lacks dtype, shape or data_offsets"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"__metadata__":{"k":1}})", 0).find("__metadata__ 'k' is not a string"), std::string::npos);
  EXPECT_NE(message_of("not json", 0).find("its header is not JSON"), std::string::npos);
  EXPECT_NE(message_of("[1,2]", 0).find("not a JSON object"), std::string::npos);
}

TEST(SafetensorsHeader, DeepNestingIsRefusedWithoutExhaustingTheStack) {
  std::string deep(200000, '[');
  deep = "{\"a\":" + deep + std::string(200000, ']') + "}";
  EXPECT_NE(message_of(deep, 0).find("tensor 'a' is not an object"), std::string::npos);
}

TEST(SafetensorsIndex, WeightMapsNamePlainFilesInTheIndexDirectoryOnly) {
  const auto map = parse_safetensors_index(
      R"({"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"m2.safetensors"}})",
      "i.json");
  EXPECT_EQ(map.at("a"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(map.at("b"), "m2.safetensors");
  for (const auto* hostile : {R"({"weight_map":{"a":"../etc/passwd"}})", R"({"weight_map":{"a":"/abs.safetensors"}})",
                              R"({"weight_map":{"a":".."}})"}) {
    try {
      parse_safetensors_index(hostile, "i.json");
      ADD_FAILURE() << hostile << " was accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("not a plain file name in the index's directory"), std::string::npos);
    }
  }
  EXPECT_THROW(parse_safetensors_index(R"({"metadata":{}})", "i.json"), FormatError);
  const auto text = compose_safetensors_index({{"a", "f1"}, {"b", "f2"}}, 24);
  EXPECT_EQ(parse_safetensors_index(text, "i.json").size(), 2u);
  EXPECT_NE(text.find("\"total_size\": 24"), std::string::npos);
}

}  // namespace
}  // namespace h5dcp::detail
