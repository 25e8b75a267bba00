// Modules and optimizers as Statefuls, and optimizer state sharded like the
// model (ZeRO-1 dim-0 and 2-D TP x DP), saved on N ranks and loaded on fewer.

#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <functional>

#include "h5dcp/h5dcp.hpp"
#include "h5dcp/module.hpp"
#include "h5dcp/optimizer.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 12));
    fc2 = register_module("fc2", torch::nn::Linear(12, 3));
    register_buffer("calls", at::zeros({1}, at::kLong));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(fc1->forward(x).tanh()); }
  torch::nn::Linear fc1{nullptr};
  torch::nn::Linear fc2{nullptr};
};

using MakeOptimizer = std::function<std::shared_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>;

const std::vector<std::pair<std::string, MakeOptimizer>> kOptimizers{
    {"SGD",
     [](auto p) {
       return std::make_shared<torch::optim::SGD>(p, torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
     }},
    {"Adam",
     [](auto p) { return std::make_shared<torch::optim::Adam>(p, torch::optim::AdamOptions(0.01).amsgrad(true)); }},
    {"AdamW",
     [](auto p) {
       return std::make_shared<torch::optim::AdamW>(p, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
     }},
    {"Adagrad",
     [](auto p) {
       return std::make_shared<torch::optim::Adagrad>(p, torch::optim::AdagradOptions(0.1).lr_decay(0.01));
     }},
    {"RMSprop",
     [](auto p) {
       return std::make_shared<torch::optim::RMSprop>(p,
                                                      torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
     }},
};

void train(Net& net, torch::optim::Optimizer& optimizer, int first_step, int steps) {
  for (int s = first_step; s < first_step + steps; ++s) {
    const auto x = at::sin(at::arange(8 * 6, at::kFloat).reshape({8, 6}) * (0.1 * (s + 1)));
    const auto y = at::cos(at::arange(8 * 3, at::kFloat).reshape({8, 3}) * (0.2 * (s + 1)));
    optimizer.zero_grad();
    const auto loss = (net.forward(x) - y).pow(2).mean();
    loss.backward();
    optimizer.step();
    net.named_buffers()["calls"].add_(1);
  }
}

TEST(TrainingState, ResumingEveryOptimizerIsBitIdentical) {
  test::TempDir dir;
  for (const auto& [name, make] : kOptimizers) {
    torch::manual_seed(7);
    auto net = std::make_shared<Net>();
    auto optimizer = make(net->parameters());
    train(*net, *optimizer, 0, 3);
    StateDict state{{"model", std::make_shared<ModuleState>(net)},
                    {"optim", std::make_shared<OptimizerState>(optimizer, named_parameters(*net))},
                    {"step", 3}};
    save(state, dir.file(name + ".h5"));
    train(*net, *optimizer, 3, 3);  // the uninterrupted run

    torch::manual_seed(99);  // a different start, overwritten by the load
    auto resumed = std::make_shared<Net>();
    auto resumed_optimizer = make(resumed->parameters());
    // Hyperparameters differ too: the checkpoint's must win.
    for (auto& group : resumed_optimizer->param_groups()) group.options().set_lr(123.0);
    StateDict target{{"model", std::make_shared<ModuleState>(resumed)},
                     {"optim", std::make_shared<OptimizerState>(resumed_optimizer, named_parameters(*resumed))},
                     {"step", 0}};
    load(target, dir.file(name + ".h5"));
    EXPECT_EQ(std::get<std::int64_t>(target.at("step")), 3) << name;
    EXPECT_EQ(resumed_optimizer->param_groups()[0].options().get_lr(), optimizer->param_groups()[0].options().get_lr())
        << name;
    train(*resumed, *resumed_optimizer, 3, 3);

    for (const auto& p : net->named_parameters())
      EXPECT_TRUE(bitwise_equal(resumed->named_parameters()[p.key()], p.value())) << name << " " << p.key();
    EXPECT_EQ(resumed->named_buffers()["calls"].item<std::int64_t>(), 6) << name;
  }
}

TEST(TrainingState, ModuleStateRefusesAMismatch) {
  test::TempDir dir;
  auto net = std::make_shared<Net>();
  save(StateDict{{"model", std::make_shared<ModuleState>(net)}}, dir.file("m.h5"));
  auto other = std::make_shared<torch::nn::LinearImpl>(6, 12);
  StateDict target{{"model", std::make_shared<ModuleState>(other)}};
  // The file has fc1.weight [12, 6] etc. but the module is one Linear: its
  // "weight" and "bias" are missing from the checkpoint.
  try {
    load(target, dir.file("m.h5"));
    ADD_FAILURE() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("missing from the checkpoint: 'model/bias', 'model/weight'"),
              std::string::npos)
        << e.what();
  }
}

// --- sharded optimizer state ------------------------------------------------

// Reference: Adam over the whole parameter, gradients a function of the
// global position; Adam is element-wise, so any shard of its state is the
// same slice of this.
const Shape kShape{10, 6};

at::Tensor gradient(const at::Tensor& full_like, int step) {
  return at::cos(at::arange(full_like.numel(), at::kFloat).reshape(full_like.sizes()) * (0.3 + step));
}

std::pair<at::Tensor, at::Tensor> reference_state(int steps) {
  auto p = at::ones(kShape, at::kFloat).set_requires_grad(true);
  torch::optim::Adam adam({p}, torch::optim::AdamOptions(0.1));
  for (int s = 0; s < steps; ++s) {
    p.mutable_grad() = gradient(p, s);
    adam.step();
  }
  const auto& st = static_cast<const torch::optim::AdamParamState&>(*adam.state().begin()->second);
  return {st.exp_avg().clone(), p.detach().clone()};
}

// A parameter block (at `layout`) trained with the block of every gradient.
struct ShardedRun {
  at::Tensor param;
  std::shared_ptr<torch::optim::Adam> adam;
  ShardedRun(const BlockLayout& layout, const Shape& sizes, int steps) {
    auto block = [&](const at::Tensor& full) {
      auto t = full;
      for (std::size_t d = 0; d < sizes.size(); ++d)
        t = t.narrow(static_cast<std::int64_t>(d), layout.offsets[d], sizes[d]);
      return t.contiguous();
    };
    param = block(at::ones(kShape, at::kFloat)).set_requires_grad(true);
    adam = std::make_shared<torch::optim::Adam>(std::vector<at::Tensor>{param}, torch::optim::AdamOptions(0.1));
    for (int s = 0; s < steps; ++s) {
      param.mutable_grad() = block(gradient(at::ones(kShape), s));
      adam->step();
    }
  }
  at::Tensor exp_avg() const {
    return static_cast<const torch::optim::AdamParamState&>(*adam->state().begin()->second).exp_avg();
  }
};

at::Tensor block_of(const at::Tensor& full, const Shape& offsets, const Shape& sizes) {
  auto t = full;
  for (std::size_t d = 0; d < sizes.size(); ++d) t = t.narrow(static_cast<std::int64_t>(d), offsets[d], sizes[d]);
  return t;
}

// A communicator of the first `m` ranks (MPI_COMM_NULL on the others).
MPI_Comm first_ranks(int m) {
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, test::world_rank() < m ? 0 : MPI_UNDEFINED, test::world_rank(), &sub);
  return sub;
}

TEST(ShardedOptimizer, Zero1StateSavedOnNLoadsOnFewerRanks) {
  test::TempDir dir;
  const int size = test::world_size();
  const auto [reference, reference_param] = reference_state(3);
  {
    const auto layout = chunk_dim0(kShape, test::world_rank(), size);
    ShardedRun run(layout, chunk_dim0_sizes(kShape, test::world_rank(), size), 3);
    auto state =
        std::make_shared<OptimizerState>(run.adam, std::vector<std::pair<std::string, at::Tensor>>{{"w", run.param}},
                                         std::map<std::string, BlockLayout>{{"w", layout}});
    save(StateDict{{"optim", state}}, dir.file("zero1.h5"));
  }
  for (int m = 1; m <= size; ++m) {
    MPI_Comm sub = first_ranks(m);
    if (sub != MPI_COMM_NULL) {
      int r = 0;
      MPI_Comm_rank(sub, &r);
      const auto layout = chunk_dim0(kShape, r, m);
      const auto sizes = chunk_dim0_sizes(kShape, r, m);
      // Through OptimizerState: a fresh optimizer over this rank's rows.
      ShardedRun fresh(layout, sizes, 0);
      StateDict target{{"optim", std::make_shared<OptimizerState>(
                                     fresh.adam, std::vector<std::pair<std::string, at::Tensor>>{{"w", fresh.param}},
                                     std::map<std::string, BlockLayout>{{"w", layout}})}};
      load(target, dir.file("zero1.h5"), LoadOptions{}, sub);
      EXPECT_TRUE(bitwise_equal(fresh.exp_avg(), block_of(reference, layout.offsets, sizes))) << "m=" << m;

      // Through load_sharded_optimizer_state_dict with a replicated model.
      const auto loaded = load_sharded_optimizer_state_dict(StateDict{{"w", at::ones(kShape)}}, "optim",
                                                            dir.file("zero1.h5"), MPI_COMM_NULL, LoadOptions{}, sub);
      const auto& exp_avg = std::get<ShardedTensor>(value_at(loaded, "state/w/exp_avg"));
      EXPECT_EQ(exp_avg.global_shape(), kShape);
      ASSERT_EQ(exp_avg.local_shards().size(), 1u);
      EXPECT_EQ(exp_avg.local_shards()[0].offsets, layout.offsets);
      EXPECT_TRUE(bitwise_equal(exp_avg.local_shards()[0].tensor, block_of(reference, layout.offsets, sizes)));
      EXPECT_EQ(std::get<std::int64_t>(value_at(loaded, "state/w/step")), 3);
      EXPECT_EQ(std::get<double>(value_at(loaded, "param_groups/0/lr")), 0.1);
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// TP x DP: the parameter's columns are split over TP ranks; each TP block's
// optimizer state is split by rows over the DP ranks of that block.
struct Grid2D {
  int tp, dp, tp_rank, dp_rank;
  Grid2D(int rank, int size) : tp(size % 2 == 0 ? 2 : 1), dp(size / tp), tp_rank(rank % tp), dp_rank(rank / tp) {}
  Shape block_offsets() const { return {0, kShape[1] / tp * tp_rank}; }
  Shape block_sizes() const { return {kShape[0], kShape[1] / tp}; }
};

TEST(ShardedOptimizer, TwoDimensionalLayoutReshardsWithOffsetTranslation) {
  test::TempDir dir;
  const int size = test::world_size();
  const auto [reference, reference_param] = reference_state(2);
  {
    const Grid2D g(test::world_rank(), size);
    const auto rows = chunk_dim0(g.block_sizes(), g.dp_rank, g.dp);
    const auto sizes = chunk_dim0_sizes(g.block_sizes(), g.dp_rank, g.dp);
    const BlockLayout layout{kShape, {rows.offsets[0], g.block_offsets()[1]}};
    ShardedRun run(layout, sizes, 2);
    save(StateDict{{"optim", std::make_shared<OptimizerState>(
                                 run.adam, std::vector<std::pair<std::string, at::Tensor>>{{"w", run.param}},
                                 std::map<std::string, BlockLayout>{{"w", layout}})}},
         dir.file("2d.h5"));
  }
  for (int m = 1; m <= size; ++m) {
    MPI_Comm sub = first_ranks(m);
    if (sub != MPI_COMM_NULL) {
      int r = 0;
      MPI_Comm_rank(sub, &r);
      const Grid2D g(r, m);
      MPI_Comm dp_comm = MPI_COMM_NULL;
      MPI_Comm_split(sub, g.tp_rank, g.dp_rank, &dp_comm);  // ranks sharing a TP block
      // The model as this rank holds it: one TP block of "w".
      StateDict model{{"w", ShardedTensor(kShape, {Shard{at::ones(g.block_sizes()), g.block_offsets()}})}};
      const auto loaded =
          load_sharded_optimizer_state_dict(model, "optim", dir.file("2d.h5"), dp_comm, LoadOptions{}, sub);
      const auto& exp_avg = std::get<ShardedTensor>(value_at(loaded, "state/w/exp_avg"));
      // In the block's own coordinates: global shape = the block's.
      EXPECT_EQ(exp_avg.global_shape(), g.block_sizes()) << "m=" << m;
      ASSERT_EQ(exp_avg.local_shards().size(), 1u);
      const auto& shard = exp_avg.local_shards()[0];
      EXPECT_EQ(shard.offsets, chunk_dim0(g.block_sizes(), g.dp_rank, g.dp).offsets);
      const Shape global_offsets{shard.offsets[0] + g.block_offsets()[0], shard.offsets[1] + g.block_offsets()[1]};
      const Shape sizes(shard.tensor.sizes().begin(), shard.tensor.sizes().end());
      EXPECT_TRUE(bitwise_equal(shard.tensor, block_of(reference, global_offsets, sizes))) << "m=" << m << " r=" << r;
      MPI_Comm_free(&dp_comm);
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

}  // namespace
}  // namespace h5dcp
