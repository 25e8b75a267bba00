// Nested state dicts with every kind of value and awkward keys, partial and
// strict loads, dtype conversion, load_all, and custom planners; at 1-4 ranks.

#include <gtest/gtest.h>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::reference_tensor;

using test::expect_checkpoint_error;

// A training-like state with every kind of value, nesting and awkward keys.
struct Fixture {
  at::Tensor weight = reference_tensor({13, 6}, at::kFloat);
  at::Tensor moment = reference_tensor({13, 6}, at::kBFloat16, 5);
  at::Tensor bias = reference_tensor({6}, at::kHalf);

  StateDict state(int rank, int size) const {
    return StateDict{
        {"model", StateDict{{"layer 1.weight", test::grid_shards(weight, size, 1, rank, size)},
                            {"layer 1.bias", bias.clone()},
                            {"κλειδί/with slash", reference_tensor({}, at::kLong, 9)}}},
        {"optim", StateDict{{"state", StateDict{{"layer 1.weight",
                                                 StateDict{{"exp_avg", test::grid_shards(moment, 1, size, rank, size)},
                                                           {"step", 12}}}}},
                            {"param_groups", StateList{StateDict{{"lr", 0.001},
                                                                 {"betas", StateList{0.9, 0.999}},
                                                                 {"name", "adam"},
                                                                 {"amsgrad", false},
                                                                 {"foreach", StateValue()}}}}}},
        {"step", std::int64_t{1} << 40},
        {"blob", ByteString{std::string("\0\1\2\xff", 4)}},
        {"pickled", PickledObject{std::string("\x80\x02K\x2a.", 5)}},
        {"empty dict", StateDict{}},
        {"empty list", StateList{}},
        {"100%", "percent"},
        {".", true},
    };
  }

  // The same structure with every tensor zeroed and every value changed.
  StateDict blank(int rank, int size) const {
    auto sd = state(rank, size);
    auto flat = flatten_state_dict(sd);
    for (auto& [fqn, value] : flat.leaves) {
      if (auto* t = std::get_if<at::Tensor>(&value))
        value = at::zeros_like(*t);
      else if (auto* s = std::get_if<ShardedTensor>(&value))
        value = test::zeros_like(*s);
      else
        value = StateValue("placeholder");
    }
    return unflatten_state_dict(flat);
  }
};

// Two non-tensor leaves hold the same value (same alternative, same value).
bool same_value(const StateValue& a, const StateValue& b) {
  if (a.index() != b.index()) return false;
  if (std::holds_alternative<std::monostate>(a)) return true;
  if (const auto* v = std::get_if<std::int64_t>(&a)) return *v == std::get<std::int64_t>(b);
  if (const auto* v = std::get_if<double>(&a)) return *v == std::get<double>(b);
  if (const auto* v = std::get_if<bool>(&a)) return *v == std::get<bool>(b);
  if (const auto* v = std::get_if<std::string>(&a)) return *v == std::get<std::string>(b);
  if (const auto* v = std::get_if<ByteString>(&a)) return *v == std::get<ByteString>(b);
  if (const auto* v = std::get_if<PickledObject>(&a)) return *v == std::get<PickledObject>(b);
  return false;
}

// Every leaf of `got` equals the one of `want` (tensors bit for bit).
void expect_same_state(const StateDict& got, const StateDict& want) {
  const auto a = flatten_state_dict(got);
  const auto b = flatten_state_dict(want);
  EXPECT_EQ(a.containers, b.containers);
  ASSERT_EQ(a.leaves.size(), b.leaves.size());
  for (const auto& [fqn, value] : b.leaves) {
    ASSERT_EQ(a.leaves.count(fqn), 1u) << fqn;
    const auto& other = a.leaves.at(fqn);
    ASSERT_EQ(other.index(), value.index()) << fqn;
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(other), *t)) << fqn;
    } else if (const auto* s = std::get_if<ShardedTensor>(&value)) {
      const auto& o = std::get<ShardedTensor>(other);
      ASSERT_EQ(o.local_shards().size(), s->local_shards().size()) << fqn;
      for (std::size_t i = 0; i < s->local_shards().size(); ++i)
        EXPECT_TRUE(bitwise_equal(o.local_shards()[i].tensor, s->local_shards()[i].tensor)) << fqn << " shard " << i;
    } else {
      EXPECT_TRUE(same_value(other, value)) << fqn;
    }
  }
}

TEST(Nested, EveryKindOfValueRoundTrips) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  Fixture f;
  const auto saved = f.state(rank, size);
  const auto result = save(saved, dir.file("nested.h5"));
  EXPECT_EQ(result.metadata.containers.at("optim/param_groups"), ContainerKind::List);
  EXPECT_EQ(result.metadata.containers.at("empty list"), ContainerKind::List);
  EXPECT_EQ(
      std::get<BytesStorageMetadata>(result.metadata.state_dict_metadata.at("optim/param_groups/0/name")).encoding,
      "str");

  auto target = f.blank(rank, size);
  const auto report = load(target, dir.file("nested.h5"));
  EXPECT_TRUE(report.missing_keys.empty());
  EXPECT_TRUE(report.unexpected_keys.empty());
  expect_same_state(target, saved);

  const auto md = read_metadata(dir.file("nested.h5"));
  EXPECT_EQ(md.containers, result.metadata.containers);
  EXPECT_EQ(std::get<BytesStorageMetadata>(md.state_dict_metadata.at("blob")).size, 4);
  EXPECT_EQ(std::get<BytesStorageMetadata>(md.state_dict_metadata.at("optim/param_groups/0/foreach")).encoding, "none");
  EXPECT_EQ(find_tensor_metadata(md, "model/κλειδί%2Fwith slash").size.size(), 0u);
}

TEST(Nested, LoadAllBuildsTheWholeStateFromTheFile) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  Fixture f;
  save(f.state(rank, size), dir.file("all.h5"));

  const auto whole = load_all(dir.file("all.h5"));
  auto expected = f.state(rank, size);
  value_at(expected, "model/layer 1.weight") = f.weight;  // whole on every rank
  value_at(expected, "optim/state/layer 1.weight/exp_avg") = f.moment;
  expect_same_state(whole, expected);

  const auto sharded = load_all(dir.file("all.h5"), LoadAllOptions{{0}, LoadLayout::ShardedDim0});
  const auto& w = std::get<ShardedTensor>(value_at(sharded, "model/layer 1.weight"));
  ASSERT_EQ(w.local_shards().size(), 1u);
  const std::int64_t per_rank = (13 + size - 1) / size;  // torch.chunk
  const auto start = std::min<std::int64_t>(13, per_rank * rank);
  const auto rows = std::max<std::int64_t>(0, std::min<std::int64_t>(per_rank, 13 - start));
  EXPECT_EQ(w.local_shards()[0].offsets, (std::vector<std::int64_t>{start, 0}));
  EXPECT_TRUE(bitwise_equal(w.local_shards()[0].tensor, f.weight.narrow(0, start, rows)));
  EXPECT_TRUE(std::get<at::Tensor>(value_at(sharded, "model/κλειδί%2Fwith slash")).dim() == 0);  // 0-d stays whole
  EXPECT_EQ(std::get<std::int64_t>(value_at(sharded, "step")), std::int64_t{1} << 40);
}

TEST(Nested, StrictAndNonStrictLoads) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  Fixture f;
  save(f.state(rank, size), dir.file("s.h5"));

  StateDict partial{{"model", StateDict{{"layer 1.bias", at::zeros({6}, at::kHalf)}, {"absent", at::zeros({2})}}},
                    {"not there", 3}};
  const auto e = expect_checkpoint_error([&] { load(partial, dir.file("s.h5")); });
  EXPECT_EQ(e.step(), "load:plan");
  EXPECT_NE(std::string(e.what()).find("missing from the checkpoint: 'model/absent', 'not there'"), std::string::npos)
      << e.what();

  LoadOptions lenient;
  lenient.strict = false;
  const auto report = load(partial, dir.file("s.h5"), lenient);
  EXPECT_EQ(report.missing_keys, (std::vector<std::string>{"model/absent", "not there"}));
  EXPECT_EQ(report.unexpected_keys.size(), flatten_state_dict(f.state(rank, size)).leaves.size() - 1);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(value_at(partial, "model/layer 1.bias")), f.bias));
  EXPECT_EQ(std::get<std::int64_t>(value_at(partial, "not there")), 3);  // untouched
}

TEST(Nested, DtypeConversionOnlyWhenAsked) {
  test::TempDir dir;
  const auto full = reference_tensor({4, 5}, at::kFloat);
  save(StateDict{{"w", full}}, dir.file("d.h5"));
  StateDict as_double{{"w", at::zeros({4, 5}, at::kDouble)}};
  const auto e = expect_checkpoint_error([&] { load(as_double, dir.file("d.h5")); });
  EXPECT_NE(std::string(e.what()).find("'w' is float32 in the checkpoint but float64"), std::string::npos) << e.what();

  LoadOptions convert;
  convert.convert_dtype = true;
  load(as_double, dir.file("d.h5"), convert);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(as_double.at("w")), full.to(at::kDouble)));
  StateDict as_bf16{
      {"w", test::grid_shards(at::zeros({4, 5}, at::kBFloat16), 2, 2, test::world_rank(), test::world_size())}};
  load(as_bf16, dir.file("d.h5"), convert);
  for (const auto& s : std::get<ShardedTensor>(as_bf16.at("w")).local_shards())
    EXPECT_TRUE(bitwise_equal(
        s.tensor,
        full.narrow(0, s.offsets[0], s.tensor.size(0)).narrow(1, s.offsets[1], s.tensor.size(1)).to(at::kBFloat16)));
}

TEST(Nested, KindMismatchesAndValueDisagreementsAreNamed) {
  test::TempDir dir;
  save(StateDict{{"t", at::ones({2})}, {"v", 1}}, dir.file("k.h5"));
  StateDict swapped{{"t", 1}, {"v", at::ones({2})}};
  const auto e = expect_checkpoint_error([&] { load(swapped, dir.file("k.h5")); });
  EXPECT_NE(std::string(e.what()).find("'t' is a tensor in the checkpoint but a non-tensor value"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("'v' is a non-tensor value (int) in the checkpoint but a tensor"),
            std::string::npos);

  if (test::world_size() > 1) {
    StateDict per_rank{{"seed", test::world_rank()}};
    const auto d = expect_checkpoint_error([&] { save(per_rank, dir.file("k.h5")); });
    EXPECT_EQ(d.step(), "save:plan");
    EXPECT_NE(std::string(d.what()).find("ranks disagree on the value of 'seed'"), std::string::npos) << d.what();
  }
  StateDict nul{{"s", std::string("a\0b", 3)}};
  const auto n = expect_checkpoint_error([&] { save(nul, dir.file("k.h5")); });
  EXPECT_NE(std::string(n.what()).find("holds a NUL character"), std::string::npos) << n.what();
}

// The reader refuses nesting kMaxContainerDepth (256) containers deep, so a
// save refuses it too, at planning and before anything is written: a 255-deep
// state dict round-trips, a 256-deep one leaves the previous file as it was.
StateDict nested_dicts(int containers, const StateValue& leaf) {
  StateDict sd{{"leaf", leaf}};
  for (int i = 1; i < containers; ++i) sd = StateDict{{"d", std::move(sd)}};
  return StateDict{{"d", std::move(sd)}};
}

TEST(Nested, NestingIsWrittenOnlyAsDeepAsItIsRead) {
  test::TempDir dir;
  const auto tensor = reference_tensor({3, 2}, at::kFloat);
  save(nested_dicts(255, tensor), dir.file("deep.h5"));
  auto back = nested_dicts(255, at::zeros({3, 2}));
  load(back, dir.file("deep.h5"));
  const StateValue* leaf = &back.at("d");
  for (int i = 1; i < 255; ++i) leaf = &std::get<StateDict>(*leaf).at("d");
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(std::get<StateDict>(*leaf).at("leaf")), tensor));

  const auto e = expect_checkpoint_error([&] { save(nested_dicts(256, at::ones({2})), dir.file("deep.h5")); });
  EXPECT_EQ(e.step(), "save:plan");
  EXPECT_NE(std::string(e.what()).find("is nested 256 dicts or lists deep; h5dcp reads checkpoints nested less than "
                                       "256 deep"),
            std::string::npos)
      << e.what();
  auto again = nested_dicts(255, at::zeros({3, 2}));
  load(again, dir.file("deep.h5"));
  EXPECT_EQ(flatten_state_dict(again).leaves.size(), 1u);
}

// A reader whose state dict holds one column block of a saved tensor as if it
// were the whole tensor (the seeds' _ReaderWithOffset for 2-D TP x DP
// layouts): it translates storage offsets by the block's position.
class OffsetReader : public DefaultLoadPlanner {
 public:
  explicit OffsetReader(std::int64_t column) : column_(column) {}
  void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) override {
    // Plan against a metadata view in which "w" has the block's shape.
    view_ = metadata;
    auto& w = std::get<TensorStorageMetadata>(view_.state_dict_metadata.at("w"));
    full_columns_ = w.size[1];
    w.size[1] = 2;
    DefaultLoadPlanner::set_up(state_dict, view_, is_coordinator);
  }
  LoadPlan create_local_plan() override {
    auto plan = DefaultLoadPlanner::create_local_plan();
    for (auto& item : plan.items)
      if (item.storage_fqn == "w") item.storage_offsets[1] += column_;
    return plan;
  }
  std::int64_t full_columns_ = 0;

 private:
  std::int64_t column_;
  Metadata view_;
};

// A writer that leaves out everything under "scratch".
class SkipScratch : public DefaultSavePlanner {
 public:
  SavePlan create_local_plan() override {
    auto plan = DefaultSavePlanner::create_local_plan();
    std::vector<WriteItem> kept;
    for (auto& item : plan.items)
      if (item.index.fqn.rfind("scratch/", 0) != 0) kept.push_back(std::move(item));
    plan.items = std::move(kept);
    plan.containers.erase(std::remove_if(plan.containers.begin(), plan.containers.end(),
                                         [](const auto& c) { return c.first == "scratch"; }),
                          plan.containers.end());
    return plan;
  }
};

TEST(Planners, CustomPlannersTranslateOffsetsAndFilterItems) {
  test::TempDir dir;
  const auto full = reference_tensor({6, 8}, at::kFloat);
  SkipScratch skip;
  SaveOptions save_options;
  save_options.planner = &skip;
  save(StateDict{{"w", full}, {"scratch", StateDict{{"tmp", at::ones({3})}}}}, dir.file("p.h5"), save_options);
  const auto md = read_metadata(dir.file("p.h5"));
  EXPECT_EQ(md.state_dict_metadata.count("scratch/tmp"), 0u);
  EXPECT_EQ(md.containers.count("scratch"), 0u);

  // Each rank loads columns [2c, 2c+2) of "w" into a tensor it calls "w" of shape [6, 2].
  const std::int64_t column = 2 * (test::world_rank() % 4);
  OffsetReader reader(column);
  LoadOptions load_options;
  load_options.planner = &reader;
  StateDict block{{"w", test::grid_shards(at::zeros({6, 2}), 2, 1, 0, 1)}};
  load(block, dir.file("p.h5"), load_options);
  EXPECT_EQ(reader.full_columns_, 8);
  for (const auto& s : std::get<ShardedTensor>(block.at("w")).local_shards())
    EXPECT_TRUE(bitwise_equal(s.tensor, full.narrow(0, s.offsets[0], s.tensor.size(0)).narrow(1, column, 2)));
}

TEST(Dedup, AReplicatedTensorIsWrittenOnceAndBytesAreBalanced) {
  test::TempDir dir;
  const int size = test::world_size();
  // 64 MiB of float32, the same on every rank.
  const auto big = at::arange(16 * 1024 * 1024, at::kFloat);
  // Four replicated 1 MiB tensors.
  StateDict sd{{"big", big}};
  for (int i = 0; i < 4; ++i) sd["small" + std::to_string(i)] = at::full({256 * 1024}, static_cast<float>(i));
  const auto result = save(sd, dir.file("dedup.h5"));
  const auto& bytes = result.bytes_per_rank;
  ASSERT_EQ(bytes.size(), static_cast<std::size_t>(size));
  std::int64_t total = 0;
  for (auto b : bytes) total += b;
  EXPECT_EQ(total, (64 + 4) * 1024 * 1024) << "every replicated byte is written exactly once";
  const std::int64_t max = *std::max_element(bytes.begin(), bytes.end());
  const std::int64_t min = *std::min_element(bytes.begin(), bytes.end());
  if (size == 1) {
    EXPECT_EQ(max, (64 + 4) * 1024 * 1024);
  } else {
    // Largest first to the least loaded: rank 0 writes the 64 MiB tensor and
    // nothing else; the small ones are spread over the other ranks.
    EXPECT_EQ(bytes[0], 64 * 1024 * 1024);
    EXPECT_EQ(max, 64 * 1024 * 1024);
    EXPECT_EQ(min, (4 / (size - 1)) * 1024 * 1024);
  }
  StateDict back{{"big", at::zeros_like(big)}};
  LoadOptions lenient;
  lenient.strict = false;
  load(back, dir.file("dedup.h5"), lenient);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(back.at("big")), big));
}

}  // namespace
}  // namespace h5dcp
