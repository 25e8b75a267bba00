// Keys that could be written but not read back as themselves (a NUL byte,
// bytes that are not UTF-8) are refused when the save is planned, naming the
// key in a printable form and the rank (issue 15, item 9). Pure: no MPI, no
// HDF5, no torch.

#include <gtest/gtest.h>

#include <string>

#include "base/key_escape.hpp"
#include "base/utf8.hpp"
#include "h5dcp/error.hpp"
#include "plan/save_plan.hpp"

namespace h5dcp::detail {
namespace {

using namespace std::string_literals;

WriteItem plain(const std::string& fqn) {
  return WriteItem{
      MetadataIndex{fqn, std::nullopt, std::nullopt}, WriteItemType::Tensor, DType::Float32, {2}, {{0}, {2}}, {}, {}};
}

template <typename Fn>
std::string usage_error_of(Fn fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(Utf8, SurrogatesAndBrokenSequencesAreNotUtf8) {
  EXPECT_TRUE(is_valid_utf8("plain ünïcode κλειδί 🙂"));
  EXPECT_FALSE(is_valid_utf8("\xed\xb2\x80"));  // U+DC80, Python's "surrogatepass" of a lone surrogate
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));  // U+D800
  EXPECT_TRUE(is_valid_utf8("\xed\x9f\xbf"));   // U+D7FF, the last code point before them
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\xc3"));      // truncated
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));  // overlong '/'
  EXPECT_EQ(utf8_sequence_length("a\xc3\xa9", 1), 2u);
  EXPECT_EQ(utf8_sequence_length("a\xc3\xa9", 2), 0u);  // a continuation byte on its own
}

TEST(KeyNames, PrintableKeysShowControlAndNonUtf8BytesAsHex) {
  EXPECT_EQ(printable_key("layer1.weight"), "layer1.weight");
  EXPECT_EQ(printable_key("a\0b"s), "a\\x00b");
  EXPECT_EQ(printable_key("tab\there\n"), "tab\\x09here\\x0a");
  EXPECT_EQ(printable_key("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(printable_key("x\xffy\xed\xb2\x80"), "x\\xffy\\xed\\xb2\\x80");
  EXPECT_EQ(printable_key("bad%zz\x01"), "bad%zz\\x01");
}

TEST(KeyNames, ANulByteInAKeyIsRefusedAtPlanningNamingTheKey) {
  // flatten_state_dict's fqn of {"model": {"emb\0ed": t}}: the escape keeps
  // the NUL, which HDF5 would take as the end of the name.
  SavePlan plan{{plain("model/emb\0ed"s)}, {{"model", ContainerKind::Dict}}};
  const auto message = usage_error_of([&] { validate_local_plan(plan); });
  EXPECT_EQ(message,
            "h5dcp: the key 'model/emb\\x00ed' holds a NUL byte: keys must be valid UTF-8 without NUL bytes (as the "
            "str keys of torch.save files are), or they could not be read back as the same key");
}

TEST(KeyNames, KeysThatAreNotUtf8AreRefusedAtPlanning) {
  SavePlan in_container{{plain("opt\xff/lr")}, {{"opt\xff", ContainerKind::Dict}}};
  EXPECT_EQ(usage_error_of([&] { validate_local_plan(in_container); }).substr(0, 48),
            "h5dcp: the key 'opt\\xff' is not valid UTF-8: key");
  SavePlan surrogate{{plain("w\xed\xb2\x80")}, {}};
  EXPECT_NE(usage_error_of([&] { validate_local_plan(surrogate); }).find("'w\\xed\\xb2\\x80' is not valid UTF-8"),
            std::string::npos);
  // What stays allowed: UTF-8, escapes, empty keys.
  SavePlan fine{{plain("caf\xc3\xa9/%25/%2F/%")},
                {{"caf\xc3\xa9", ContainerKind::Dict},
                 {"caf\xc3\xa9/%25", ContainerKind::Dict},
                 {"caf\xc3\xa9/%25/%2F", ContainerKind::Dict}}};
  EXPECT_NO_THROW(validate_local_plan(fine));
}

TEST(KeyNames, TheGlobalPlanNamesTheRankWithTheBadKey) {
  // A planner that does not call validate_local_plan still cannot pass one.
  const std::vector<SavePlan> plans{{{plain("w")}, {}}, {{plain("w"), plain("b\0"s)}, {}}};
  EXPECT_EQ(usage_error_of([&] { create_global_save_plan(plans); }).substr(0, 46),
            "h5dcp: the key 'b\\x00' on rank 1 holds a NUL b");
}

// Containers the reader would refuse (kMaxContainerDepth deep) are not
// planned; a leaf counts through its parent, for planners that list no
// containers.
TEST(KeyNames, NestingTheReaderRefusesIsRefusedAtPlanning) {
  std::string fqn = "c";
  for (std::size_t depth = 2; depth < kMaxContainerDepth; ++depth) fqn += "/c";
  EXPECT_EQ(key_depth(fqn), kMaxContainerDepth - 1);
  SavePlan deepest{{plain(fqn + "/w")}, {{fqn, ContainerKind::Dict}}};
  EXPECT_NO_THROW(validate_local_plan(deepest));
  SavePlan too_deep{{plain(fqn + "/c/w")}, {{fqn + "/c", ContainerKind::List}}};
  EXPECT_NE(usage_error_of([&] { validate_local_plan(too_deep); }).find("' is nested 256 dicts or lists deep"),
            std::string::npos);
  const std::vector<SavePlan> leaves_only{{{plain("w")}, {}}, {{plain(fqn + "/c/w")}, {}}};
  const auto message = usage_error_of([&] { create_global_save_plan(leaves_only); });
  EXPECT_EQ(message.substr(0, 22), "h5dcp: the container '");
  EXPECT_NE(message.find("...' on rank 1 is nested 256 dicts or lists deep"), std::string::npos) << message;
}

TEST(KeyNames, RequireStorableKeyAcceptsEveryEscapedKey) {
  for (const std::string key : {"", ".", "a/b", "100%", "ünïcode", "sp ace"})
    EXPECT_NO_THROW(require_storable_key(escape_link_name(key))) << key;
  EXPECT_THROW(require_storable_key(escape_link_name("a\0b"s)), UsageError);
  EXPECT_THROW(unescape_link_name("a%0"), FormatError);
}

}  // namespace
}  // namespace h5dcp::detail
