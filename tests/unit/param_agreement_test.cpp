// Do all ranks hold the same parameters? Made-up lists of several ranks; the
// message names each parameter and the ranks on each side.

#include <gtest/gtest.h>

#include "h5dcp/error.hpp"
#include "training/param_agreement.hpp"

namespace h5dcp::detail {
namespace {

using Ranks = std::vector<std::vector<ParamSignature>>;

const std::string kHeader =
    "h5dcp: the parameters differ across ranks (every rank must hold the same names, shapes and dtypes, in the same "
    "order):";

std::vector<ParamSignature> model() {
  return {{"fc.weight", "float32", {4, 3}}, {"fc.bias", "float32", {4}}, {"step", "int64", {}}};
}

TEST(FormatRanks, CompactsRuns) {
  EXPECT_EQ(format_ranks({3}), "rank 3");
  EXPECT_EQ(format_ranks({0, 1}), "ranks 0, 1");
  EXPECT_EQ(format_ranks({0, 2, 3, 4, 5, 7}), "ranks 0, 2-5, 7");
  EXPECT_EQ(format_ranks({5, 1, 2, 3, 3}), "ranks 1-3, 5");
  EXPECT_EQ(format_ranks({0, 1, 2, 4, 5}), "ranks 0-2, 4, 5");
}

TEST(ParamAgreement, AgreeingRanksGiveNoMessage) {
  EXPECT_EQ(describe_param_disagreement(Ranks(5, model())), "");
  EXPECT_EQ(describe_param_disagreement(Ranks{model()}), "");
  EXPECT_EQ(describe_param_disagreement(Ranks{}), "");
}

TEST(ParamAgreement, NamesTheParameterAndTheRanksOnEachSide) {
  Ranks ranks(5, model());
  ranks[1][0].shape = {4, 2};
  ranks[3][0].shape = {4, 2};
  ranks[4][2].dtype = "int32";
  EXPECT_EQ(describe_param_disagreement(ranks),
            kHeader +
                "\n  'fc.weight': shape [4, 3] float32 on ranks 0, 2, 4; shape [4, 2] float32 on ranks 1, 3"
                "\n  'step': shape [] int64 on ranks 0-3; shape [] int32 on rank 4");
}

TEST(ParamAgreement, MissingAndExtraParameters) {
  Ranks ranks(4, model());
  ranks[2].erase(ranks[2].begin() + 1);
  ranks[3].push_back({"extra", "float32", {2}});
  EXPECT_EQ(describe_param_disagreement(ranks, "module states"),
            "h5dcp: the module states differ across ranks (every rank must hold the same names, shapes and dtypes, in "
            "the same order):"
            "\n  'fc.bias': shape [4] float32 on ranks 0, 1, 3; missing on rank 2"
            "\n  'extra': missing on ranks 0-2; shape [2] float32 on rank 3");
}

TEST(ParamAgreement, SameParametersInAnotherOrder) {
  Ranks ranks(3, model());
  std::swap(ranks[2][0], ranks[2][1]);
  EXPECT_EQ(describe_param_disagreement(ranks),
            kHeader + "\n  position 0 holds 'fc.weight' on rank 0 but 'fc.bias' on rank 2");
}

TEST(ParamAgreement, LongListsAreCut) {
  std::vector<ParamSignature> many;
  for (int i = 0; i < 30; ++i) many.push_back({"p" + std::to_string(i), "float32", {i}});
  Ranks ranks{many, many};
  for (auto& p : ranks[1]) p.dtype = "float16";
  const auto message = describe_param_disagreement(ranks, "parameters", 4);
  EXPECT_NE(message.find("\n  'p3': shape [3] float32 on rank 0; shape [3] float16 on rank 1\n  ... and 26 more"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("'p4'"), std::string::npos);
}

TEST(ParamAgreement, SignaturesRoundTrip) {
  const auto bytes = encode_signatures(model());
  EXPECT_EQ(decode_signatures(bytes), model());
  EXPECT_TRUE(decode_signatures(encode_signatures({})).empty());
  EXPECT_THROW(decode_signatures(bytes.substr(0, bytes.size() - 3)), Error);
  EXPECT_THROW(decode_signatures(bytes + "x"), Error);
}

}  // namespace
}  // namespace h5dcp::detail
