// h5dcp's GPU paths end to end on CUDA tensors, at 1-4 ranks sharing the
// node's GPU(s) as assign_device() maps them: save and load of every dtype
// (GPU to GPU, GPU to CPU, CPU to GPU), in place, bit for bit; a nested state
// with values, views and a strided target; resharding onto GPU shards; async
// saves of tensors whose last write is still queued on the GPU, and loads
// into tensors with a write still queued (on the default stream or a side
// stream; staged whole or streamed, in the caller's thread or on a staging
// thread); recursive_to both ways; the module broadcast; and the checkpoint
// manager with a CUDA model and optimizer.
//
// Every test skips where LibTorch sees no GPU (a CPU-only LibTorch, or a CUDA
// one on a machine without a device), and fails there instead when
// H5DCP_REQUIRE_GPU is set. Streams come from c10's device-generic
// interface, so building this needs no CUDA header.

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "h5dcp/h5dcp.hpp"
#include "h5dcp/module.hpp"
#include "h5dcp/optimizer.hpp"
#include "h5dcp/training.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::reference_tensor;

const c10::Device kCpu(c10::kCPU);

// `want` with the lowest bit of every byte flipped: a different pattern in
// every byte (and still valid bools), to fill targets before a load.
at::Tensor flipped(const at::Tensor& want) {
  const auto bytes = want.contiguous().reshape({-1}).view(at::kByte).bitwise_xor(1);
  return bytes.view(want.scalar_type()).reshape(want.sizes());
}

// Two non-tensor leaves hold the same value.
bool same_value(const StateValue& a, const StateValue& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&b](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return true;
        } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                             std::is_same_v<T, std::string> || std::is_same_v<T, ByteString> ||
                             std::is_same_v<T, PickledObject>) {
          return x == std::get<T>(b);
        } else {
          return false;  // tensors and containers are compared by expect_state
        }
      },
      static_cast<const StateVariant&>(a));
}

// `got` is a tensor on `device` with the dtype, shape and bytes of `want`.
void expect_tensor(const at::Tensor& got, const at::Tensor& want, c10::Device device, const std::string& what) {
  EXPECT_EQ(got.device(), device) << what;
  EXPECT_EQ(got.scalar_type(), want.scalar_type()) << what;
  EXPECT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(test::bitwise_equal(got.cpu(), want.cpu())) << what;
}

// `got` has the containers and values of `want`, and each of its tensors and
// shards is on `device` with the bits of `want`'s (wherever those are).
void expect_state(const StateDict& got, const StateDict& want, c10::Device device) {
  const auto a = flatten_state_dict(got);
  const auto b = flatten_state_dict(want);
  EXPECT_EQ(a.containers, b.containers);
  EXPECT_EQ(a.leaves.size(), b.leaves.size());
  for (const auto& [fqn, value] : b.leaves) {
    const auto it = a.leaves.find(fqn);
    ASSERT_NE(it, a.leaves.end()) << fqn;
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      ASSERT_TRUE(it->second.is_tensor()) << fqn;
      expect_tensor(std::get<at::Tensor>(it->second), *t, device, fqn);
    } else if (const auto* s = std::get_if<ShardedTensor>(&value)) {
      ASSERT_TRUE(it->second.is_sharded()) << fqn;
      const auto& o = std::get<ShardedTensor>(it->second);
      EXPECT_EQ(o.global_shape(), s->global_shape()) << fqn;
      ASSERT_EQ(o.local_shards().size(), s->local_shards().size()) << fqn;
      for (std::size_t i = 0; i < s->local_shards().size(); ++i) {
        EXPECT_EQ(o.local_shards()[i].offsets, s->local_shards()[i].offsets) << fqn;
        expect_tensor(o.local_shards()[i].tensor, s->local_shards()[i].tensor, device,
                      fqn + " shard " + std::to_string(i));
      }
    } else {
      EXPECT_TRUE(same_value(it->second, value)) << fqn;
    }
  }
}

// The memory of every tensor and shard, in fqn order: what a load in place
// must leave as it is.
std::vector<const void*> memory_of(const StateDict& state) {
  std::vector<const void*> out;
  apply_to_tensors(state, [&out](const at::Tensor& t) {
    out.push_back(t.data_ptr());
    return t;
  });
  return out;
}

// `state`'s tensors copied onto `device` (views keep their strides).
StateDict copied_to(const StateDict& state, c10::Device device) {
  return apply_to_tensors(state, [device](const at::Tensor& t) { return t.to(device); });
}

// Targets for a load of `state`: tensors of the same shapes on `device`
// holding other bytes, non-tensor values replaced by placeholders.
StateDict blank_on(const StateDict& state, c10::Device device) {
  auto flat =
      flatten_state_dict(apply_to_tensors(state, [device](const at::Tensor& t) { return flipped(t).to(device); }));
  for (auto& [fqn, value] : flat.leaves)
    if (!value.is_tensor() && !value.is_sharded()) value = StateValue("placeholder");
  return unflatten_state_dict(flat);
}

// Each test runs on this rank's device as h5dcp's rank -> GPU mapping
// chooses it, and starts and ends without async staging memory.
class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) {
      // scripts/gpu-check.sh sets it: on the GPU machine a skip would hide a
      // LibTorch that cannot see the GPU.
      if (std::getenv("H5DCP_REQUIRE_GPU") != nullptr) FAIL() << "H5DCP_REQUIRE_GPU is set, but LibTorch sees no GPU";
      GTEST_SKIP() << "no GPU";
    }
    assignment_ = assign_device();
    device_ = c10::Device(assignment_.choice.device());
    finish_async_saves();
  }
  void TearDown() override { finish_async_saves(); }

  DeviceAssignment assignment_;
  c10::Device device_ = kCpu;
  const int rank_ = test::world_rank();
  const int size_ = test::world_size();
};

TEST_F(Gpu, EveryRankIsAssignedTheSharedGpu) {
  if (std::getenv("CUDA_VISIBLE_DEVICES") != nullptr || torch::cuda::device_count() != 1)
    GTEST_SKIP() << "needs exactly one GPU and no CUDA_VISIBLE_DEVICES";
  const auto local = node_local_rank();
  EXPECT_EQ(assignment_.device_count, 1);
  EXPECT_EQ(assignment_.choice.device(), "cuda:0");
  EXPECT_EQ(assignment_.choice.local_rank, local.rank);
  EXPECT_EQ(assignment_.choice.ranks_sharing, local.size);
  const auto shared = local.size > 1 ? "; shared by " + std::to_string(local.size) + " local ranks)" : ")";
  EXPECT_NE(assignment_.description.find("-> cuda:0 ("), std::string::npos) << assignment_.description;
  EXPECT_EQ(assignment_.description.substr(assignment_.description.size() - shared.size()), shared)
      << assignment_.description;
}

// With CUDA_VISIBLE_DEVICES naming one GPU (as Slurm's --gpus-per-task and
// most schedulers set it), LibTorch numbers it 0 and every rank shares it;
// the description names the GPU as the environment did.
TEST_F(Gpu, EveryRankIsAssignedTheGpuCudaVisibleDevicesNames) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr || std::string(visible).find(',') != std::string::npos || torch::cuda::device_count() != 1)
    GTEST_SKIP() << "needs CUDA_VISIBLE_DEVICES naming exactly one GPU";
  const auto local = node_local_rank();
  EXPECT_EQ(assignment_.device_count, 1);
  EXPECT_EQ(assignment_.choice.device(), "cuda:0");
  EXPECT_EQ(assignment_.choice.gpu, visible);
  EXPECT_EQ(assignment_.choice.reason, std::string("CUDA_VISIBLE_DEVICES=") + visible);
  EXPECT_EQ(assignment_.choice.ranks_sharing, local.size);
  EXPECT_NE(
      assignment_.description.find(std::string("-> cuda:0 (CUDA_VISIBLE_DEVICES=") + visible + ": GPU " + visible),
      std::string::npos)
      << assignment_.description;
}

// --- save and load ---------------------------------------------------------------

// Every dtype h5dcp stores on the CPU: a replicated 1-D tensor, a 0-d one
// and a 9 x 5 matrix, split by rows across ranks (uneven) or whole.
StateDict every_dtype(bool rows_split, int rank, int size) {
  StateDict state;
  for (const auto dtype : test::all_dtypes()) {
    const std::string name = c10::toString(dtype);
    const auto matrix = reference_tensor({9, 5}, dtype);
    state["rows." + name] = rows_split ? StateValue(test::grid_shards(matrix, size, 1, rank, size)) : matrix;
    state["plain." + name] = reference_tensor({6}, dtype, 100);
    state["scalar." + name] = reference_tensor({}, dtype, 7);
  }
  return state;
}

TEST_F(Gpu, EveryDtypeRoundTripsThroughGpuTensors) {
  test::TempDir dir;
  const auto want = every_dtype(true, rank_, size_);
  save(copied_to(want, device_), dir.file("gpu.h5"));

  // Into GPU tensors, in place.
  auto target = blank_on(want, device_);
  const auto memory = memory_of(target);
  load(target, dir.file("gpu.h5"));
  expect_state(target, want, device_);
  EXPECT_EQ(memory_of(target), memory);

  // The GPU's save into CPU tensors, and whole into new ones.
  auto host = blank_on(want, kCpu);
  load(host, dir.file("gpu.h5"));
  expect_state(host, want, kCpu);
  expect_state(load_all(dir.file("gpu.h5")), every_dtype(false, rank_, size_), kCpu);

  // A CPU save into GPU tensors.
  save(want, dir.file("cpu.h5"));
  auto from_cpu = blank_on(want, device_);
  load(from_cpu, dir.file("cpu.h5"));
  expect_state(from_cpu, want, device_);
}

// A training-like nested state on the CPU: dicts and lists, a 2-D grid of
// blocks, a transposed view, an empty and a 0-d tensor, and values.
StateDict nested_state(int rank, int size) {
  return StateDict{
      {"model", StateDict{{"layer.weight", test::grid_shards(reference_tensor({13, 6}, at::kFloat), 3, 2, rank, size)},
                          {"layer.bias", reference_tensor({6}, at::kHalf)},
                          {"transposed", reference_tensor({4, 7}, at::kDouble, 3).t()},
                          {"empty", reference_tensor({0, 3}, at::kFloat)}}},
      {"optim", StateDict{{"state", StateList{StateDict{{"exp_avg", reference_tensor({13, 6}, at::kBFloat16, 5)},
                                                        {"step", 12}}}},
                          {"param_groups", StateList{StateDict{{"lr", 0.001},
                                                               {"betas", StateList{0.9, 0.999}},
                                                               {"name", "adam"},
                                                               {"amsgrad", false},
                                                               {"foreach", StateValue()}}}}}},
      {"rng", reference_tensor({16}, at::kByte, 9)},
      {"step", reference_tensor({}, at::kLong, 11)},
      {"blob", ByteString{std::string("\0\1\xff", 3)}},
      {"epoch", 3},
  };
}

TEST_F(Gpu, ANestedStateRoundTripsThroughGpuTensors) {
  test::TempDir dir;
  const auto want = nested_state(rank_, size_);
  const auto saved = copied_to(want, device_);
  ASSERT_FALSE(std::get<at::Tensor>(value_at(saved, "model/transposed")).is_contiguous());
  save(saved, dir.file("nested.h5"));

  auto target = blank_on(want, device_);
  // The transposed tensor loads into a strided window of a larger GPU tensor:
  // nothing outside the window may change.
  const auto storage = at::zeros({7, 10}, at::TensorOptions().dtype(at::kDouble).device(device_));
  value_at(target, "model/transposed") = storage.narrow(1, 3, 4);
  load(target, dir.file("nested.h5"));
  expect_state(target, want, device_);
  EXPECT_EQ(storage.narrow(1, 0, 3).count_nonzero().item<std::int64_t>(), 0);
  EXPECT_EQ(storage.narrow(1, 7, 3).count_nonzero().item<std::int64_t>(), 0);
}

// --- resharding onto GPU tensors ------------------------------------------------

struct Layout {
  const char* name;
  ShardedTensor (*make)(const at::Tensor&, int, int);
};

ShardedTensor rows(const at::Tensor& full, int rank, int size) { return test::grid_shards(full, size, 1, rank, size); }
ShardedTensor columns(const at::Tensor& full, int rank, int size) {
  return test::grid_shards(full, 1, size, rank, size);
}
ShardedTensor blocks(const at::Tensor& full, int rank, int size) { return test::grid_shards(full, 3, 2, rank, size); }

const std::vector<Layout> kLayouts{{"rows", rows}, {"columns", columns}, {"blocks", blocks}};

// A 23 x 17 matrix per dtype on the CPU, laid out by `make`, or whole
// without one.
StateDict matrices(ShardedTensor (*make)(const at::Tensor&, int, int), int rank, int size) {
  StateDict state;
  for (const auto dtype : {at::kFloat, at::kBFloat16, at::kLong, at::kBool, at::kComplexDouble}) {
    const auto full = reference_tensor({23, 17}, dtype);
    state[c10::toString(dtype)] = make ? StateValue(make(full, rank, size)) : full;
  }
  return state;
}

TEST_F(Gpu, ShardsSavedOneWayLoadOntoGpuShardsOfAnother) {
  test::TempDir dir;
  // Rows saved and loaded as columns cut each read into pieces of rows of the
  // target; columns saved and loaded as rows, into strided pieces of it.
  for (const auto& saved_as : {kLayouts[0], kLayouts[1]}) {
    const auto path = dir.file(std::string(saved_as.name) + ".h5");
    save(copied_to(matrices(saved_as.make, rank_, size_), device_), path);
    for (const auto& loaded_as : kLayouts) {
      SCOPED_TRACE(std::string(saved_as.name) + " -> " + loaded_as.name);
      const auto want = matrices(loaded_as.make, rank_, size_);
      auto target = blank_on(want, device_);
      load(target, path);
      expect_state(target, want, device_);
    }
    SCOPED_TRACE(std::string(saved_as.name) + " -> whole");
    const auto whole = matrices(nullptr, rank_, size_);
    auto target = blank_on(whole, device_);
    load(target, path);
    expect_state(target, whole, device_);
  }
}

// --- GPU writes still queued when h5dcp is called --------------------------

// 32 MiB of float32 per rank: more than the 4 MiB staging memory below (the
// pieces stream through it), and a copy long enough to race with.
constexpr std::int64_t kRows = 2048;
constexpr std::int64_t kCols = 4096;
constexpr std::int64_t kRowBytes = kRows * kCols * 4;

// This rank's rows: integers below 2^24, distinct per rank, so that adding 1
// and 1000 in float32 is exact on the CPU and the GPU alike.
at::Tensor race_rows(int rank) {
  return ((at::arange(kRows * kCols, at::kInt) % 65521) + rank * 100000).to(at::kFloat).reshape({kRows, kCols});
}

// Queues matrix products on the current stream (tens of milliseconds on an
// H100; the results are not used): work queued after them runs that late.
void queue_busy_work(c10::Device device) {
  const auto a = at::full({4096, 4096}, 1.0 / 4096, at::TensorOptions().dtype(at::kFloat).device(device));
  auto product = a;
  for (int i = 0; i < 32; ++i) product = at::mm(product, a);
}

// A stream of `device` from LibTorch's pool, not its default stream.
c10::Stream side_stream(c10::Device device) {
  return c10::impl::getDeviceGuardImpl(device.type())->getStreamFromGlobalPool(device);
}

bool on_default_stream(c10::Device device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  return impl->getStream(device) == impl->getDefaultStream(device);
}

// Starts an async save staged in the caller's thread (async_save) or on a
// staging thread (async_stage_and_save); returns once the tensors may change.
SaveFuture start_save(bool staging_thread, const StateDict& state, const std::string& path,
                      const AsyncSaveOptions& options) {
  if (!staging_thread) return async_save(state, path, options);
  auto save = async_stage_and_save(state, path, options);
  save.staged.wait();
  return save.saved;
}

TEST_F(Gpu, AsyncSavesHoldTheValuesAsOfTheCall) {
  test::TempDir dir;
  const auto path = dir.file("race.h5");
  const std::vector<std::int64_t> global{size_ * kRows, kCols};
  const std::vector<std::int64_t> offsets{rank_ * kRows, 0};
  for (const std::int64_t staging : {std::int64_t{4} << 20, std::int64_t{64} << 20}) {  // streamed, staged whole
    for (const bool staging_thread : {false, true}) {
      for (const bool side : {false, true}) {
        SCOPED_TRACE(std::string(staging_thread ? "async_stage_and_save" : "async_save") + ", " +
                     std::to_string(staging >> 20) + " MiB of staging, " +
                     (side ? "a side stream" : "the default stream"));
        // Everything of this case runs on that stream, the checks included.
        std::optional<c10::StreamGuard> guard;
        if (side) guard.emplace(side_stream(device_));
        ASSERT_EQ(on_default_stream(device_), !side);
        auto w = race_rows(rank_).to(device_);
        const StateDict state{{"w", ShardedTensor(global, {Shard{w, offsets}})}};
        // The change the save must hold is still queued when it starts ...
        queue_busy_work(device_);
        w.add_(1);
        const auto saved = start_save(staging_thread, state, path, test::staging_of(staging));
        // ... and this one, made once the tensors are free again, it must not.
        w.add_(1000);
        const auto stats = last_async_save_stats();
        EXPECT_EQ(stats.background_staging, staging_thread);
        EXPECT_EQ(stats.staging_bytes, staging);
        EXPECT_EQ(stats.staged_bytes, kRowBytes);
        saved.get();

        StateDict into{{"w", ShardedTensor(global, {Shard{flipped(race_rows(rank_)).to(device_), offsets}})}};
        load(into, path);
        expect_tensor(std::get<ShardedTensor>(into.at("w")).local_shards()[0].tensor, race_rows(rank_) + 1, device_,
                      "the checkpoint");
        expect_tensor(w, race_rows(rank_) + 1001, device_, "the tensor");
      }
    }
  }
}

TEST_F(Gpu, LoadsLandAfterTheWritesQueuedOnTheirTargets) {
  test::TempDir dir;
  const auto path = dir.file("rows.h5");
  const std::vector<std::int64_t> global{size_ * kRows, kCols};
  const std::vector<std::int64_t> offsets{rank_ * kRows, 0};
  save(StateDict{{"w", ShardedTensor(global, {Shard{race_rows(rank_), offsets}})}}, path);
  for (const bool side : {false, true}) {
    SCOPED_TRACE(side ? "on a side stream" : "on the default stream");
    std::optional<c10::StreamGuard> guard;
    if (side) guard.emplace(side_stream(device_));
    ASSERT_EQ(on_default_stream(device_), !side);
    const auto w = at::empty({kRows, kCols}, at::TensorOptions().dtype(at::kFloat).device(device_));
    // A write to the target still queued when the load starts: the load must
    // land after it, and what is queued after the load must see the load.
    queue_busy_work(device_);
    w.fill_(-1);
    StateDict into{{"w", ShardedTensor(global, {Shard{w, offsets}})}};
    load(into, path);
    expect_tensor(w, race_rows(rank_), device_, "the loaded tensor");
  }
}

// --- recursive_to and the module broadcast ------------------------------------

TEST_F(Gpu, RecursiveToMovesNestedStateToTheGpuAndBack) {
  // With a side stream the pinned tensor is copied asynchronously on it:
  // 32 MiB, so that reading it on the current stream before that stream
  // waits for the copy would be seen.
  const auto pinned = race_rows(rank_).pin_memory();
  ASSERT_TRUE(pinned.is_pinned());
  const StateDict host{{"model", StateDict{{"w", reference_tensor({5, 3}, at::kFloat)},
                                           {"rows", rows(reference_tensor({9, 4}, at::kBFloat16), rank_, size_)}}},
                       {"groups", StateList{StateDict{{"ids", reference_tensor({7}, at::kLong)}, {"lr", 0.1}}}},
                       {"pinned", pinned},
                       {"step", 3},
                       {"name", "gpu"}};
  for (const bool side : {false, true}) {
    SCOPED_TRACE(side ? "with a side stream" : "without a side stream");
    const auto gpu = recursive_to(host, device_, side);
    expect_state(gpu, host, device_);
    // Tensors already on the device are shared, not copied.
    const auto again = recursive_to(gpu, device_, side);
    EXPECT_TRUE(
        std::get<at::Tensor>(value_at(again, "model/w")).is_same(std::get<at::Tensor>(value_at(gpu, "model/w"))));
    expect_state(recursive_to(gpu, kCpu, side), host, kCpu);
  }

  // LibTorch's forward inputs: a tensor, and a tuple of a tensor and an int.
  const auto input = reference_tensor({4}, at::kHalf);
  const auto element = reference_tensor({2, 2}, at::kInt);
  const std::vector<c10::IValue> inputs{input, c10::ivalue::Tuple::create(c10::IValue(element), c10::IValue(7))};
  const auto moved = recursive_to(inputs, device_);
  ASSERT_EQ(moved.size(), 2u);
  expect_tensor(moved[0].toTensor(), input, device_, "input 0");
  const auto& tuple = moved[1].toTupleRef().elements();
  ASSERT_EQ(tuple.size(), 2u);
  expect_tensor(tuple[0].toTensor(), element, device_, "input 1, element 0");
  EXPECT_EQ(tuple[1].toInt(), 7);
}

// A module's parameters, then its buffers: the order sync_module_states
// broadcasts them in.
NamedTensors named_states(const torch::nn::Module& module) {
  NamedTensors states;
  for (const auto& p : module.named_parameters()) states.emplace_back(p.key(), p.value());
  for (const auto& b : module.named_buffers()) states.emplace_back(b.key(), b.value());
  return states;
}

// The values rank `rank` gives its `index`-th state, on the CPU: exact in
// every dtype used (float32, int64).
at::Tensor rank_values(int rank, std::size_t index, const at::Tensor& like) {
  const auto n = at::arange(like.numel(), at::kLong) + rank * 100 + static_cast<std::int64_t>(index) * 10;
  return n.to(like.scalar_type()).reshape(like.sizes());
}

TEST_F(Gpu, SyncModuleStatesGivesEveryRankTheCoordinatorsCudaTensors) {
  torch::nn::Sequential net(torch::nn::Linear(6, 5), torch::nn::BatchNorm1d(5));
  net->to(device_);
  const auto states = named_states(*net);
  {
    const at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < states.size(); ++i) states[i].second.copy_(rank_values(rank_, i, states[i].second));
  }
  SyncModuleOptions options;
  options.bucket_bytes = 64;  // several buckets
  const auto result = sync_module_states(*net, options);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : states) names.push_back(name);
  EXPECT_EQ(result.names, names);
  EXPECT_GT(result.buckets.size(), 2u);
  for (std::size_t i = 0; i < states.size(); ++i) {
    const auto& [name, tensor] = states[i];
    expect_tensor(tensor, rank_values(0, i, tensor), device_, name);
  }
  for (const auto& p : net->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
}

// --- the checkpoint manager ---------------------------------------------------

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 12));
    fc2 = register_module("fc2", torch::nn::Linear(12, 3));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(fc1->forward(x).tanh()); }
  torch::nn::Linear fc1{nullptr};
  torch::nn::Linear fc2{nullptr};
};

// One optimizer step on a batch of `step`, computed on `device`.
void train_step(Net& net, torch::optim::Optimizer& optimizer, int step, c10::Device device) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  const auto x = at::sin(at::arange(8 * 6, options).reshape({8, 6}) * (0.1 * (step + 1)));
  const auto y = at::cos(at::arange(8 * 3, options).reshape({8, 3}) * (0.2 * (step + 1)));
  optimizer.zero_grad();
  (net.forward(x) - y).pow(2).mean().backward();
  optimizer.step();
}

// A copy of `state`'s tensors on the CPU (a copy even of CPU tensors): what
// they hold now.
StateDict snapshot(const StateDict& state) {
  return apply_to_tensors(state, [](const at::Tensor& t) { return t.cpu().clone(); });
}

TEST_F(Gpu, TheManagerResumesACudaModelAndOptimizer) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  torch::manual_seed(7);
  auto net = std::make_shared<Net>();
  net->to(device_);
  auto adam = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(0.01));
  for (int step = 0; step < 2; ++step) train_step(*net, *adam, step, device_);
  const auto model = std::make_shared<ModuleState>(net);
  const auto optim = std::make_shared<OptimizerState>(adam, named_parameters(*net));
  // What the checkpoint must hold: the state as of the save.
  const StateDict want{{"model", snapshot(model->state_dict())}, {"optim", snapshot(optim->state_dict())}, {"step", 2}};
  auto save = manager.async_stage_and_save(2, StateDict{{"model", model}, {"optim", optim}, {"step", 2}});
  save.staged.wait();
  train_step(*net, *adam, 2, device_);  // in place, once staged: not in the checkpoint
  ASSERT_TRUE(manager.wait().has_value());

  torch::manual_seed(99);  // other parameters and a fresh optimizer, replaced by the load
  auto resumed = std::make_shared<Net>();
  resumed->to(device_);
  auto resumed_adam = std::make_shared<torch::optim::Adam>(resumed->parameters(), torch::optim::AdamOptions(123.0));
  const auto resumed_model = std::make_shared<ModuleState>(resumed);
  const auto resumed_optim = std::make_shared<OptimizerState>(resumed_adam, named_parameters(*resumed));
  StateDict target{{"model", resumed_model}, {"optim", resumed_optim}, {"step", 0}};
  const auto info = manager.load(target);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->step, 2);
  const StateDict got{
      {"model", resumed_model->state_dict()}, {"optim", resumed_optim->state_dict()}, {"step", target.at("step")}};
  expect_state(got, want, device_);
}

}  // namespace
}  // namespace h5dcp
