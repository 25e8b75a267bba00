// Nested state dicts: values, fqns, flatten/unflatten, lookups by fqn.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "h5dcp/h5dcp.hpp"

namespace h5dcp {
namespace {

TEST(StateValue, LiteralsPickTheNaturalAlternative) {
  StateValue text = "adam";
  StateValue number = 5;
  StateValue big = std::int64_t{1} << 40;
  StateValue real = 0.5;
  StateValue flag = true;
  StateValue none;
  EXPECT_EQ(std::get<std::string>(text), "adam");
  EXPECT_EQ(std::get<std::int64_t>(number), 5);
  EXPECT_EQ(std::get<std::int64_t>(big), std::int64_t{1} << 40);
  EXPECT_EQ(std::get<double>(real), 0.5);
  EXPECT_EQ(std::get<bool>(flag), true);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(none));
  number = "now text";
  EXPECT_EQ(std::get<std::string>(number), "now text");
}

TEST(Fqn, PathsEscapeEachComponent) {
  EXPECT_EQ(fqn_of({"model", "layer1.weight"}), "model/layer1.weight");
  EXPECT_EQ(fqn_of({"a/b", "100%", "."}), "a%2Fb/100%25/%2E");
  const std::vector<std::string> awkward{"", "a/b", "κλειδί", " ", "%", ".", "..", "0"};
  EXPECT_EQ(path_of(fqn_of(awkward)), awkward);
}

TEST(Flatten, RoundTripsNestingListsAndEmptyContainers) {
  const auto w = at::arange(6, at::kFloat);
  StateDict sd{{"model", StateDict{{"w", w}, {"sub", StateDict{{"x", 1}}}}},
               {"groups", StateList{StateDict{{"lr", 0.1}, {"betas", StateList{0.9, 0.999}}}, StateValue()}},
               {"empty_dict", StateDict{}},
               {"empty_list", StateList{}},
               {"a/b", "slash"}};
  const auto flat = flatten_state_dict(sd);
  EXPECT_EQ(flat.leaves.count("model/w"), 1u);
  EXPECT_EQ(flat.leaves.count("model/sub/x"), 1u);
  EXPECT_EQ(flat.leaves.count("groups/0/betas/1"), 1u);
  EXPECT_EQ(flat.leaves.count("groups/1"), 1u);
  EXPECT_EQ(flat.leaves.count("a%2Fb"), 1u);
  EXPECT_EQ(flat.containers.at("groups"), ContainerKind::List);
  EXPECT_EQ(flat.containers.at("empty_list"), ContainerKind::List);
  EXPECT_EQ(flat.containers.at("empty_dict"), ContainerKind::Dict);
  EXPECT_EQ(flat.containers.size(), 7u);  // model, model/sub, groups, groups/0, groups/0/betas and the 2 empty ones

  const auto back = unflatten_state_dict(flat);
  EXPECT_EQ(flatten_state_dict(back).containers, flat.containers);
  EXPECT_TRUE(std::get<at::Tensor>(value_at(back, "model/w")).is_same(w));
  EXPECT_EQ(std::get<double>(value_at(back, "groups/0/betas/1")), 0.999);
  EXPECT_TRUE(std::get<StateList>(value_at(back, "empty_list")).empty());
  EXPECT_EQ(std::get<std::string>(value_at(back, "a%2Fb")), "slash");
}

TEST(Flatten, AListWithAHoleIsRefused) {
  FlatStateDict flat;
  flat.containers["l"] = ContainerKind::List;
  flat.leaves["l/1"] = StateValue(1);
  try {
    unflatten_state_dict(flat);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the list 'l' has no element 0"), std::string::npos) << e.what();
  }
}

TEST(ValueAt, WalksDictsAndListsAndNamesWhatIsMissing) {
  StateDict sd{{"opt", StateDict{{"groups", StateList{StateDict{{"lr", 0.5}}}}}}};
  EXPECT_EQ(std::get<double>(value_at(sd, "opt/groups/0/lr")), 0.5);
  value_at(sd, "opt/groups/0/lr") = 0.25;
  EXPECT_EQ(std::get<double>(value_at(sd, "opt/groups/0/lr")), 0.25);
  EXPECT_THROW(value_at(sd, "opt/groups/1/lr"), UsageError);
  EXPECT_THROW(value_at(sd, "opt/groups/x"), UsageError);
  EXPECT_THROW(value_at(sd, "opt/groups/0/lr/deeper"), UsageError);
}

}  // namespace
}  // namespace h5dcp
