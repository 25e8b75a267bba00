// Plan reuse's pure parts (plan/plan_reuse): the layout digest, the values
// checked on reuse, the reuse decision, and the messages of the plan step.

#include <gtest/gtest.h>

#include "h5dcp/error.hpp"
#include "plan/codec.hpp"
#include "plan/plan_reuse.hpp"
#include "plan/save_plan.hpp"

namespace h5dcp::detail {
namespace {

WriteItem rows(const std::string& fqn, std::int64_t offset, std::int64_t count, std::int64_t total) {
  return WriteItem{MetadataIndex{fqn, Shape{offset, 0}, 0},
                   WriteItemType::Shard,
                   DType::Float32,
                   {total, 4},
                   {{offset, 0}, {count, 4}},
                   {},
                   {}};
}

WriteItem value(const std::string& fqn, std::string payload) {
  return WriteItem{MetadataIndex{fqn, std::nullopt, std::nullopt},
                   WriteItemType::Value,
                   DType::UInt8,
                   {},
                   {},
                   "str",
                   std::move(payload)};
}

SavePlan rank_plan(int rank, const std::string& note, std::int64_t total = 8) {
  SavePlan plan;
  plan.items = {rows("w", rank * total / 2, total / 2, total), value("note", note), value("step", "7")};
  return plan;
}

TEST(PlanReuse, TheDigestIgnoresValueBytesButNotTheirSizeOrTheLayout) {
  const auto base = layout_digest(rank_plan(0, "ab"), 2, 0);
  EXPECT_EQ(base, layout_digest(rank_plan(0, "xy"), 2, 0));
  EXPECT_NE(base, layout_digest(rank_plan(0, "abc"), 2, 0));     // another size
  EXPECT_NE(base, layout_digest(rank_plan(1, "ab"), 2, 0));      // another block
  EXPECT_NE(base, layout_digest(rank_plan(0, "ab", 10), 2, 0));  // another shape
  EXPECT_NE(base, layout_digest(rank_plan(0, "ab"), 3, 0));      // another group
  EXPECT_NE(base, layout_digest(rank_plan(0, "ab"), 2, 1));      // another coordinator
  auto with_container = rank_plan(0, "ab");
  with_container.containers.emplace_back("opt", ContainerKind::Dict);
  EXPECT_NE(base, layout_digest(with_container, 2, 0));
  auto other_dtype = rank_plan(0, "ab");
  other_dtype.items[0].dtype = DType::BFloat16;
  EXPECT_NE(base, layout_digest(other_dtype, 2, 0));
}

TEST(PlanReuse, CurrentValuesAreTheNewBytesInThePlansOrder) {
  const auto cached = create_global_save_plan({rank_plan(0, "ab"), rank_plan(1, "ab")});
  ASSERT_EQ(cached.values.size(), 2U);
  const auto now = current_values(cached, {values_of(rank_plan(0, "xy")), values_of(rank_plan(1, "xy"))});
  EXPECT_EQ(now, (std::vector<std::string>{"xy", "7"}));
  EXPECT_EQ(values_of(rank_plan(0, "xy")).items.size(), 2U);
}

TEST(PlanReuse, RanksHoldingAValueMustAgreeOnIt) {
  const auto cached = create_global_save_plan({rank_plan(0, "ab"), rank_plan(1, "ab")});
  try {
    current_values(cached, {values_of(rank_plan(0, "xy")), values_of(rank_plan(1, "zz"))});
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks disagree on the value of 'note' (ranks 0 and 1)"), std::string::npos)
        << e.what();
  }
  // A value nobody offers, or one the plan lacks: the digests lied.
  EXPECT_THROW(current_values(cached, {SavePlan{}, SavePlan{}}), Error);
  SavePlan stranger;
  stranger.items = {value("other", "x")};
  EXPECT_THROW(current_values(cached, {values_of(rank_plan(0, "xy")), stranger}), Error);
}

TEST(PlanReuse, OffersAndRepliesRoundTrip) {
  const PlanOffer offer{42, rank_plan(1, "ab")};
  const auto back = decode_plan_offer(encode(offer));
  EXPECT_EQ(back.generation, 42U);
  EXPECT_EQ(encode(back.plan), encode(offer.plan));

  PlanReply reply;
  reply.kind = PlanReply::Kind::Reused;
  reply.generation = 7;
  reply.plan = "bytes";
  reply.temp_path = "/tmp/x.h5.tmp";
  reply.created = "2026-11-24T00:00:00Z";
  reply.values = {"a", "", "bc"};
  const auto r = decode_plan_reply(encode(reply));
  EXPECT_EQ(r.kind, PlanReply::Kind::Reused);
  EXPECT_EQ(r.generation, 7U);
  EXPECT_EQ(r.plan, "bytes");
  EXPECT_EQ(r.temp_path, reply.temp_path);
  EXPECT_EQ(r.created, reply.created);
  EXPECT_EQ(r.values, reply.values);
  // A corrupt kind, and trailing bytes, are refused.
  auto bad = encode(reply);
  bad[0] = 9;
  EXPECT_THROW(decode_plan_reply(bad), Error);
  EXPECT_THROW(decode_plan_reply(encode(reply) + "x"), Error);
  EXPECT_THROW(decode_plan_offer(encode(offer) + "x"), Error);
}

TEST(PlanReuse, TheDecisionReusesOnlyWhenEveryRankOffersTheCachedPlan) {
  // A rank offers its cached generation only when the layout is unchanged.
  EXPECT_EQ(offered_generation(5, 11, 11), 5U);
  EXPECT_EQ(offered_generation(5, 11, 12), 0U);
  EXPECT_EQ(offered_generation(0, 11, 11), 0U);
  const auto offers = [](std::vector<std::uint64_t> generations) {
    std::vector<PlanOffer> out;
    for (const auto g : generations) out.push_back(PlanOffer{g, {}});
    return out;
  };
  EXPECT_EQ(plan_decision(5, offers({5, 5, 5})), PlanReply::Kind::Reused);
  EXPECT_EQ(plan_decision(0, offers({0, 0})), PlanReply::Kind::Planned);
  EXPECT_EQ(plan_decision(5, offers({0, 0})), PlanReply::Kind::Planned);
  // A mix, or another cache's generation, needs every rank's whole plan.
  EXPECT_EQ(plan_decision(5, offers({5, 0, 5})), PlanReply::Kind::SendWholePlans);
  EXPECT_EQ(plan_decision(5, offers({6, 6})), PlanReply::Kind::SendWholePlans);
  EXPECT_EQ(plan_decision(0, offers({6, 6})), PlanReply::Kind::SendWholePlans);
}

}  // namespace
}  // namespace h5dcp::detail
