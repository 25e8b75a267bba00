// h5dcp-train: data-parallel training of a small MLP under MPI that
// checkpoints with h5dcp, survives preemption and crashes, and resumes on
// any number of ranks with bit-identical losses.
//
//   mpiexec -n 4 h5dcp-train --steps 200 --checkpoint-every 20 --checkpoint-dir ckpt
//   mpiexec -n 2 h5dcp-train --steps 200 --checkpoint-every 20 --checkpoint-dir ckpt --resume
//
// How the result stays independent of the rank count (so a run resumed on
// 2 ranks prints exactly the losses of an uninterrupted run on 4):
// - Data: a synthetic regression set, a pure function of --seed, the same on
//   every rank. Each epoch visits it in an order drawn from a dedicated
//   generator; that generator's state, the epoch, the position in it and the
//   epoch's order are checkpointed (rng/, data/).
// - Gradients: each step's global batch is cut into --micro-batches fixed
//   micro-batches, numbered globally. A rank computes the gradient (and loss)
//   of each micro-batch it is assigned, alone and single-threaded, so
//   micro-batch m's gradient is the same bits whichever rank computes it.
//   MPI_Allgatherv brings every micro-batch's gradient to every rank, which
//   sums them in micro-batch order 0, 1, ..., M-1 in double precision: the
//   summation order never depends on how many ranks there are.
// - ZeRO-1: every parameter is split along dim 0 across the ranks like
//   torch.chunk (h5dcp::chunk_dim0); a rank's Adam owns its rows as leaf
//   tensors and updates only them, then MPI_Allgatherv (rank order = row
//   order) rebuilds the full parameters on every rank. Adam is elementwise,
//   so a row's update does not depend on which rank holds it.
// - Checkpoints hold the model once (replicated: written by one rank), the
//   optimizer state as dim-0 sharded tensors of the parameters' global
//   shapes, the step, the RNG and data position; resuming on another rank
//   count loads each rank's new rows from the same datasets (h5dcp reshards).

#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "h5dcp/checkpoint_manager.hpp"
#include "h5dcp/h5dcp.hpp"
#include "h5dcp/module.hpp"
#include "h5dcp/optimizer.hpp"
#include "h5dcp/training/device.hpp"

namespace {

// Exit codes (documented in --help and jobs/README.md).
constexpr int kExitDone = 0;        // all --steps done, last checkpoint saved
constexpr int kExitFailure = 1;     // an error (message on stderr)
constexpr int kExitUsage = 2;       // bad command line
constexpr int kExitPreempted = 85;  // SIGUSR1/SIGTERM: checkpoint saved, requeue me and --resume

constexpr const char* kExitHelp =
    "Exit codes:\n"
    "  0   done: --steps reached and the last checkpoint saved\n"
    "  1   error (the message is on stderr)\n"
    "  2   usage error\n"
    "  85  preempted: SIGUSR1 or SIGTERM arrived, the current step was finished and\n"
    "      checkpointed; run again with --resume (jobs/train.sbatch requeues itself)\n";

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal.store(sig); }

struct Config {
  std::int64_t steps = 100;
  std::int64_t checkpoint_every = 10;
  std::string checkpoint_dir = "checkpoints";
  bool resume = false;
  std::int64_t seed = 1234;
  int hidden = 32;
  int global_batch = 24;
  int micro_batches = 12;
  double lr = 1e-2;
  int dataset_size = 1024;
  int keep_last = 3;
  std::int64_t keep_every = 0;
  int throttle_ms = 0;
  std::int64_t crash_after_step = -1;
  std::string staging = "background";  // or "blocking": where async saves copy the state
  std::string device = "auto";         // or "cpu", "cuda": where the model trains
  // The node-local tier (h5dcp::LocalTierOptions); no --local-dir: none.
  std::string local_dir;
  std::int64_t local_every = 1;
  int local_replicas = 1;
  int local_keep = 2;
  std::string local_groups_variable;
  bool local_sync = false;  // local steps written in the call (manager.save), not in the background
};

constexpr int kInputs = 16;
constexpr int kOutputs = 4;

struct Mlp : torch::nn::Module {
  explicit Mlp(int hidden) {
    fc1 = register_module("fc1", torch::nn::Linear(kInputs, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
    fc3 = register_module("fc3", torch::nn::Linear(hidden, kOutputs));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3->forward(torch::tanh(fc2->forward(torch::tanh(fc1->forward(x)))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

void check_mpi(int code, const char* what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string("MPI call failed: ") + what);
}

// One parameter, ZeRO-1 style: the full tensor (the model's) and this rank's
// rows of it as the optimizer's own leaf tensor.
struct ShardedParam {
  std::string name;
  torch::Tensor full;
  torch::Tensor shard;
  h5dcp::BlockLayout layout;
  std::int64_t offset_in_flat = 0;  // where its gradient starts in the flat vector
  std::vector<int> counts, displs;  // elements per rank, for MPI_Allgatherv
};

class Trainer {
 public:
  Trainer(const Config& config, int rank, int size, torch::Device device)
      : cfg_(config), rank_(rank), size_(size), device_(device) {
    // The data: a pure function of the seed, the same on every rank.
    auto data_gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(cfg_.seed));
    x_ = at::randn({cfg_.dataset_size, kInputs}, data_gen);
    const auto w1 = at::randn({kInputs, 8}, data_gen);
    const auto w2 = at::randn({8, kOutputs}, data_gen);
    y_ = at::tanh(x_.matmul(w1)).matmul(w2) * 0.5 + 0.05 * at::randn({cfg_.dataset_size, kOutputs}, data_gen);
    x_ = x_.to(device_);
    y_ = y_.to(device_);
    // The order generator: its state is checkpointed.
    order_gen_ = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(cfg_.seed) + 1);
    permutation_ = draw_permutation();

    // The model: the same initial weights on every rank.
    torch::manual_seed(static_cast<std::uint64_t>(cfg_.seed));
    model_ = std::make_shared<Mlp>(cfg_.hidden);
    model_->to(device_);
    std::vector<torch::Tensor> shards;
    std::int64_t flat = 0;
    for (auto& [name, full] : h5dcp::named_parameters(*model_)) {
      ShardedParam p;
      p.name = name;
      p.full = full;
      p.layout = h5dcp::chunk_dim0(full.sizes().vec(), rank_, size_);
      const auto rows = h5dcp::chunk_dim0_sizes(full.sizes().vec(), rank_, size_)[0];
      {
        torch::NoGradGuard no_grad;
        p.shard = full.narrow(0, p.layout.offsets[0], rows).clone().set_requires_grad(true);
      }
      const auto row_elems = full.numel() / std::max<std::int64_t>(full.size(0), 1);
      for (int r = 0; r < size_; ++r) {
        const auto lr = h5dcp::chunk_dim0(full.sizes().vec(), r, size_);
        p.counts.push_back(static_cast<int>(h5dcp::chunk_dim0_sizes(full.sizes().vec(), r, size_)[0] * row_elems));
        p.displs.push_back(static_cast<int>(lr.offsets[0] * row_elems));
      }
      p.offset_in_flat = flat;
      flat += full.numel();
      shards.push_back(p.shard);
      params_.push_back(std::move(p));
    }
    flat_size_ = flat;
    optimizer_ = std::make_shared<torch::optim::Adam>(shards, torch::optim::AdamOptions(cfg_.lr));
  }

  std::int64_t parameter_count() const { return flat_size_; }
  std::int64_t step() const { return step_; }

  // The checkpointed state. Tensors share storage with the live ones (the
  // model's parameters, the optimizer's shards): saves read them, loads fill
  // them in place.
  h5dcp::StateDict state_dict() {
    std::vector<std::pair<std::string, at::Tensor>> names;
    std::map<std::string, h5dcp::BlockLayout> layouts;
    for (const auto& p : params_) {
      names.emplace_back(p.name, p.shard);
      layouts.emplace(p.name, p.layout);
    }
    std::lock_guard<std::mutex> lock(order_gen_.mutex());
    return h5dcp::StateDict{
        {"model", std::make_shared<h5dcp::ModuleState>(model_)},
        {"optim", std::make_shared<h5dcp::OptimizerState>(optimizer_, names, layouts)},
        {"step", step_},
        {"data", h5dcp::StateDict{{"epoch", epoch_},
                                  {"offset", offset_},
                                  {"samples_seen", step_ * cfg_.global_batch},
                                  {"permutation", permutation_}}},
        {"rng", h5dcp::StateDict{{"order_generator", order_gen_.get_state()},
                                 {"torch_default_generator", at::detail::getDefaultCPUGenerator().get_state()}}},
        {"config", config_dict()},
    };
  }

  // After a load into state_dict(): take the values back.
  void restore(const h5dcp::StateDict& loaded) {
    step_ = std::get<std::int64_t>(h5dcp::value_at(loaded, "step"));
    epoch_ = std::get<std::int64_t>(h5dcp::value_at(loaded, "data/epoch"));
    offset_ = std::get<std::int64_t>(h5dcp::value_at(loaded, "data/offset"));
    // Tensors were filled in place except where the load replaced them.
    permutation_ = std::get<at::Tensor>(h5dcp::value_at(loaded, "data/permutation"));
    {
      std::lock_guard<std::mutex> lock(order_gen_.mutex());
      order_gen_.set_state(std::get<at::Tensor>(h5dcp::value_at(loaded, "rng/order_generator")));
    }
    auto default_gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(default_gen.mutex());
    default_gen.set_state(std::get<at::Tensor>(h5dcp::value_at(loaded, "rng/torch_default_generator")));
    // The model's parameters were loaded in place: take this rank's rows.
    torch::NoGradGuard no_grad;
    for (auto& p : params_) p.shard.copy_(p.full.narrow(0, p.layout.offsets[0], p.shard.size(0)));
  }

  h5dcp::StateDict config_dict() const {
    return h5dcp::StateDict{{"seed", cfg_.seed},
                            {"hidden", cfg_.hidden},
                            {"global_batch", cfg_.global_batch},
                            {"micro_batches", cfg_.micro_batches},
                            {"dataset_size", cfg_.dataset_size},
                            {"lr", cfg_.lr},
                            {"model", "mlp-16-" + std::to_string(cfg_.hidden) + "-" + std::to_string(cfg_.hidden) +
                                          "-4 tanh, Adam, ZeRO-1"}};
  }

  // One training step; returns the loss of the global batch (on every rank).
  // `before_update` runs just before the first change to the checkpointed
  // state (the optimizer step): the gradients are computed by then.
  double train_step(const std::function<void()>& before_update) {
    const auto batch = next_batch();
    const auto xb = x_.index_select(0, batch);
    const auto yb = y_.index_select(0, batch);
    const int m_count = cfg_.micro_batches;
    const int per_micro = cfg_.global_batch / m_count;
    const int first = static_cast<int>(static_cast<std::int64_t>(m_count) * rank_ / size_);
    const int last = static_cast<int>(static_cast<std::int64_t>(m_count) * (rank_ + 1) / size_);
    const std::int64_t row = flat_size_ + 1;  // the gradient, then the loss

    // This rank's micro-batches, each on its own: gradient and loss.
    std::vector<float> mine(static_cast<std::size_t>((last - first) * row));
    for (int m = first; m < last; ++m) {
      const auto xs = xb.narrow(0, static_cast<std::int64_t>(m) * per_micro, per_micro).clone();
      const auto ys = yb.narrow(0, static_cast<std::int64_t>(m) * per_micro, per_micro).clone();
      for (auto& p : params_) p.full.mutable_grad() = torch::Tensor();
      const auto loss = (model_->forward(xs) - ys).pow(2).sum() / static_cast<double>(cfg_.global_batch);
      loss.backward();
      std::vector<torch::Tensor> grads;
      for (auto& p : params_) grads.push_back(p.full.grad().reshape(-1));
      const auto flat = torch::cat(grads).to(torch::kCPU).contiguous();
      float* out = mine.data() + static_cast<std::size_t>((m - first) * row);
      std::memcpy(out, flat.data_ptr<float>(), static_cast<std::size_t>(flat_size_) * sizeof(float));
      out[flat_size_] = loss.item<float>();
    }

    // Every micro-batch's row on every rank, in micro-batch order.
    std::vector<float> all(static_cast<std::size_t>(m_count * row));
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      const auto lo = static_cast<std::int64_t>(m_count) * r / size_;
      const auto hi = static_cast<std::int64_t>(m_count) * (r + 1) / size_;
      counts[static_cast<std::size_t>(r)] = static_cast<int>((hi - lo) * row);
      displs[static_cast<std::size_t>(r)] = static_cast<int>(lo * row);
    }
    check_mpi(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(), counts.data(),
                             displs.data(), MPI_FLOAT, MPI_COMM_WORLD),
              "MPI_Allgatherv (gradients)");

    // The fixed summation order: micro-batch 0, 1, ..., M-1, in double.
    std::vector<double> sum(static_cast<std::size_t>(row), 0.0);
    for (int m = 0; m < m_count; ++m) {
      const float* r = all.data() + static_cast<std::size_t>(m) * static_cast<std::size_t>(row);
      for (std::int64_t j = 0; j < row; ++j) sum[static_cast<std::size_t>(j)] += static_cast<double>(r[j]);
    }
    auto gradient = torch::empty({flat_size_}, torch::kFloat);
    auto* g = gradient.data_ptr<float>();
    for (std::int64_t j = 0; j < flat_size_; ++j) g[j] = static_cast<float>(sum[static_cast<std::size_t>(j)]);

    // ZeRO-1: update this rank's rows, then all-gather the parameters.
    for (auto& p : params_) {
      const auto full_grad = gradient.narrow(0, p.offset_in_flat, p.full.numel()).view(p.full.sizes());
      p.shard.mutable_grad() = full_grad.narrow(0, p.layout.offsets[0], p.shard.size(0)).clone().to(device_);
      p.full.mutable_grad() = torch::Tensor();
    }
    before_update();
    optimizer_->step();
    torch::NoGradGuard no_grad;
    for (auto& p : params_) {
      const auto send = p.shard.detach().to(torch::kCPU).contiguous();
      auto receive = p.full.is_cpu() ? p.full.detach() : torch::empty(p.full.sizes(), torch::kFloat);
      check_mpi(MPI_Allgatherv(send.data_ptr<float>(), static_cast<int>(send.numel()), MPI_FLOAT,
                               receive.data_ptr<float>(), p.counts.data(), p.displs.data(), MPI_FLOAT, MPI_COMM_WORLD),
                "MPI_Allgatherv (parameters)");
      if (!p.full.is_cpu()) p.full.copy_(receive);
    }
    ++step_;
    return sum[static_cast<std::size_t>(flat_size_)];
  }

 private:
  torch::Tensor draw_permutation() {
    return at::randperm(cfg_.dataset_size, order_gen_, at::kLong);  // locks the generator itself
  }

  // The next global batch's sample indices (the same on every rank).
  torch::Tensor next_batch() {
    auto batch = torch::empty({cfg_.global_batch}, torch::kLong);
    auto* b = batch.data_ptr<std::int64_t>();
    for (int i = 0; i < cfg_.global_batch; ++i) {
      if (offset_ == cfg_.dataset_size) {
        permutation_ = draw_permutation();
        ++epoch_;
        offset_ = 0;
      }
      b[i] = permutation_.data_ptr<std::int64_t>()[offset_++];
    }
    return batch.to(device_);
  }

  Config cfg_;
  int rank_;
  int size_;
  torch::Device device_;
  torch::Tensor x_, y_;
  at::Generator order_gen_;
  torch::Tensor permutation_;
  std::int64_t epoch_ = 0;
  std::int64_t offset_ = 0;
  std::int64_t step_ = 0;
  std::shared_ptr<Mlp> model_;
  std::vector<ShardedParam> params_;
  std::int64_t flat_size_ = 0;
  std::shared_ptr<torch::optim::Adam> optimizer_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Step times, split by whether a checkpoint touched the step (its save call
// or its staging ran during it).
struct StepTimes {
  std::vector<double> all, saving, other;
  void add(double seconds, bool touched_by_save) {
    all.push_back(seconds);
    (touched_by_save ? saving : other).push_back(seconds);
  }
  static double mean(const std::vector<double>& v) {
    double sum = 0;
    for (const double x : v) sum += x;
    return v.empty() ? 0.0 : 1e3 * sum / static_cast<double>(v.size());
  }
};

// Equal non-tensor values (the configuration: ints, doubles, strings).
bool same_value(const h5dcp::StateValue& a, const h5dcp::StateValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* i = std::get_if<std::int64_t>(&a)) return *i == std::get<std::int64_t>(b);
  if (const auto* d = std::get_if<double>(&a)) return *d == std::get<double>(b);
  if (const auto* s = std::get_if<std::string>(&a)) return *s == std::get<std::string>(b);
  return false;
}

// The first configuration key whose saved value differs from this run's.
std::optional<std::string> differing_config_key(const h5dcp::StateDict& saved, const h5dcp::StateDict& mine) {
  for (const auto& [key, value] : saved)
    if (!same_value(value, mine.at(key))) return key;
  return std::nullopt;
}

bool any_rank(bool mine) {
  int local = mine ? 1 : 0;
  int any = 0;
  check_mpi(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return any != 0;
}

// The run itself; returns the exit code.
int run(const Config& cfg, int rank, int size) {
  const auto assignment = h5dcp::assign_device();
  for (const auto& line : h5dcp::gather_device_descriptions(assignment)) std::printf("h5dcp-train: %s\n", line.c_str());
  // --device cuda refuses to train anywhere else (on every rank alike: each
  // checks its own assignment, and any rank's refusal stops all).
  if (any_rank(cfg.device == "cuda" && !assignment.choice.is_cuda())) {
    if (!assignment.choice.is_cuda())
      std::fprintf(stderr, "h5dcp-train: rank %d: --device cuda, but %s\n", rank, assignment.choice.summary().c_str());
    return 2;
  }
  const torch::Device device(cfg.device == "cpu" ? std::string("cpu") : assignment.choice.device());
  Trainer trainer(cfg, rank, size, device);
  if (rank == 0) {
    std::printf(
        "h5dcp-train: %d ranks; MLP 16-%d-%d-4 (%lld parameters); global batch %d in %d micro-batches "
        "summed in a fixed order; Adam lr %g, optimizer state sharded by rows (ZeRO-1)\n",
        size, cfg.hidden, cfg.hidden, static_cast<long long>(trainer.parameter_count()), cfg.global_batch,
        cfg.micro_batches, cfg.lr);
    std::fflush(stdout);
  }

  // Staging memory for the async saves: twice this rank's share of the
  // state (parameters, Adam's two moments, the data order), at least 1 MiB.
  h5dcp::AsyncSaveOptions async_options;
  async_options.staging_bytes = std::max<std::int64_t>(
      std::int64_t{1} << 20, 2 * (trainer.parameter_count() * 3 * 4 + std::int64_t{cfg.dataset_size} * 8 + 65536));
  h5dcp::ManagerOptions manager_options;
  if (!cfg.local_dir.empty()) {
    h5dcp::LocalTierOptions tier;
    tier.directory = cfg.local_dir;
    tier.every_steps = cfg.local_every;
    tier.replicas = cfg.local_replicas;
    tier.keep = cfg.local_keep;
    tier.groups_variable = cfg.local_groups_variable;
    // The shared directory gets every --checkpoint-every step: the drain.
    tier.drain_every_steps = cfg.checkpoint_every;
    manager_options.local = tier;
  }
  h5dcp::CheckpointManager manager(cfg.checkpoint_dir, h5dcp::Retention{cfg.keep_last, cfg.keep_every}, MPI_COMM_WORLD,
                                   manager_options);
  if (rank == 0)
    for (const auto& orphan : manager.removed_orphans())
      std::printf("h5dcp-train: removed %s, left by a save that never finished\n", orphan.c_str());

  // --resume: how long finding and loading the checkpoint took, from a
  // barrier to the slowest rank's end (bench/local_tier_bench.py reads it).
  if (cfg.resume) check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const auto resume_started = std::chrono::steady_clock::now();
  if (cfg.resume && manager_options.local) {
    // The manager recovers from the local tier when it can (any rank count,
    // the lost nodes' blocks from their copies), else from the shared
    // directory; the configuration is checked after, from what it loaded.
    auto state = trainer.state_dict();
    state["config"] = trainer.config_dict();
    const auto found = manager.load(state);
    const auto& scan = manager.last_scan();
    if (!found) {
      if (rank == 0)
        std::printf("h5dcp-train: --resume: no checkpoint in %s or the local tier yet, starting at step 0\n",
                    cfg.checkpoint_dir.c_str());
    } else {
      if (const auto key = differing_config_key(std::get<h5dcp::StateDict>(state["config"]), trainer.config_dict())) {
        if (rank == 0)
          std::fprintf(stderr,
                       "h5dcp-train: step %lld was trained with another '%s' than this run's; resume with the "
                       "same --seed, --hidden, --global-batch, --micro-batches, --dataset-size and --lr\n",
                       static_cast<long long>(found->step), key->c_str());
        return kExitUsage;
      }
      state.erase("config");
      trainer.restore(state);
      if (rank == 0) {
        if (found->local)
          std::printf(
              "h5dcp-train: resumed from local step %lld (the node-local tier) on %d ranks: %lld bytes read from "
              "local copies and sent over MPI, none from %s\n",
              static_cast<long long>(trainer.step()), size, static_cast<long long>(scan.local.bytes_read),
              cfg.checkpoint_dir.c_str());
        else
          std::printf("h5dcp-train: resumed from %s (step %lld, shared directory) on %d ranks\n", found->path.c_str(),
                      static_cast<long long>(trainer.step()), size);
        for (const auto& line : scan.local.rejected) std::printf("h5dcp-train: local tier: %s\n", line.c_str());
        for (const auto& line : scan.local.skipped) std::printf("h5dcp-train: local copy skipped: %s\n", line.c_str());
      }
    }
  } else if (cfg.resume) {
    const auto found = manager.latest();
    const auto& scan = manager.last_scan();
    if (!found) {
      if (rank == 0)
        std::printf("h5dcp-train: --resume: no checkpoint in %s yet, starting at step 0\n", cfg.checkpoint_dir.c_str());
    } else {
      // The configuration first, so a mismatch is named rather than failing
      // on a tensor shape.
      h5dcp::StateDict saved_config{{"config", trainer.config_dict()}};
      h5dcp::load(saved_config, found->path);
      if (const auto key =
              differing_config_key(std::get<h5dcp::StateDict>(saved_config["config"]), trainer.config_dict())) {
        if (rank == 0)
          std::fprintf(stderr,
                       "h5dcp-train: %s was trained with another '%s' than this run's; resume with the "
                       "same --seed, --hidden, --global-batch, --micro-batches, --dataset-size and --lr\n",
                       found->path.c_str(), key->c_str());
        return kExitUsage;
      }
      auto state = trainer.state_dict();
      h5dcp::load(state, found->path);
      trainer.restore(state);
      if (rank == 0) {
        const auto saved_by = h5dcp::read_metadata(found->path).world_size;
        std::printf("h5dcp-train: resumed from %s (step %lld, saved by %d ranks) on %d ranks\n", found->path.c_str(),
                    static_cast<long long>(trainer.step()), saved_by, size);
        if (scan.pointer && !scan.pointer_current)
          std::printf("h5dcp-train: note: %s/latest named %s; the newest complete checkpoint is step %lld\n",
                      cfg.checkpoint_dir.c_str(), scan.pointer->c_str(), static_cast<long long>(found->step));
      } else {
        h5dcp::read_metadata(found->path);
      }
    }
  }
  if (cfg.resume) {
    double took = seconds_since(resume_started);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &took, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (rank == 0) std::printf("h5dcp-train: --resume took %.4f s (the slowest rank)\n", took);
  }
  if (trainer.step() >= cfg.steps) {
    if (rank == 0)
      std::printf("h5dcp-train: step %lld already reached (--steps %lld): nothing to do\n",
                  static_cast<long long>(trainer.step()), static_cast<long long>(cfg.steps));
    return kExitDone;
  }

  int saves = 0;
  double blocking = 0;  // seconds the async save calls blocked
  double waited = 0;    // seconds the optimizer step waited for staging
  StepTimes times;
  bool preempted = false;
  std::optional<h5dcp::StagedSave> staging;  // a save whose copy may still run
  const auto wait_for_staging = [&] {
    if (!staging) return;
    const auto t0 = std::chrono::steady_clock::now();
    staging->staged.wait();
    waited += seconds_since(t0);
    staging.reset();
  };
  while (trainer.step() < cfg.steps) {
    const auto step_started = std::chrono::steady_clock::now();
    bool touched_by_save = staging.has_value();
    const double loss = trainer.train_step(wait_for_staging);
    const auto step = trainer.step();
    if (rank == 0) {
      std::printf("step %lld loss %a\n", static_cast<long long>(step), loss);
      std::fflush(stdout);
    }
    // Testing: the crash below comes once earlier checkpoints are complete,
    // so the run leaves a known newest checkpoint (and this step's save, if
    // any, half written).
    if (step == cfg.crash_after_step) manager.wait();
    const bool local_step = manager_options.local && step % cfg.local_every == 0;
    // This step's save, if any, reaches the shared directory (a local step
    // alone does not).
    const bool shared_step = step % cfg.checkpoint_every == 0 || step == cfg.steps;
    if (local_step || shared_step) {
      // The last step reaches the shared directory whatever --checkpoint-every.
      const auto target = step == cfg.steps ? h5dcp::SaveTarget::Shared : h5dcp::SaveTarget::Auto;
      const auto t0 = std::chrono::steady_clock::now();
      if (cfg.local_sync && local_step && !shared_step)
        manager.save(step, trainer.state_dict());
      else if (cfg.staging == "background")
        staging = manager.async_stage_and_save(step, trainer.state_dict(), async_options, target);
      else
        manager.async_save(step, trainer.state_dict(), async_options, target);
      blocking += seconds_since(t0);
      touched_by_save = true;
      ++saves;
    }
    if (step == cfg.crash_after_step) {
      // Testing: a node loss while the save just started, if any, is being written.
      if (rank == 0) {
        std::printf("h5dcp-train: --crash-after-step %lld: SIGKILL to every rank\n", static_cast<long long>(step));
        std::fflush(stdout);
      }
      std::raise(SIGKILL);
    }
    manager.poll();
    if (cfg.throttle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(cfg.throttle_ms));
    times.add(seconds_since(step_started), touched_by_save);
    // Every rank stops after the same step when any rank was signalled.
    if (any_rank(g_signal.load() != 0) && step < cfg.steps) {
      if (manager.in_flight() != step || !shared_step) {
        // The shared directory too: the requeued job may run on other nodes.
        manager.save(step, trainer.state_dict(), {}, h5dcp::SaveTarget::Shared);
        ++saves;
      }
      preempted = true;
      break;
    }
  }
  manager.wait();
  if (rank == 0) {
    const auto last = manager.path_for(trainer.step());
    if (preempted)
      std::printf(
          "h5dcp-train: preempted (signal %d): stopped after step %lld, checkpoint %s saved; exit %d: "
          "requeue and --resume\n",
          g_signal.load(), static_cast<long long>(trainer.step()), last.c_str(), kExitPreempted);
    else
      std::printf("h5dcp-train: done: %lld steps, last checkpoint %s\n", static_cast<long long>(trainer.step()),
                  last.c_str());
    const double per_save = saves > 0 ? 1e3 / saves : 0.0;
    if (cfg.staging == "background")
      std::printf(
          "h5dcp-train: %d checkpoints saved, staged in the background; per save, the save call blocked training "
          "%.2f ms and the next optimizer step waited %.2f ms for staging, on average\n",
          saves, per_save * blocking, per_save * waited);
    else
      std::printf(
          "h5dcp-train: %d checkpoints saved, staged by the save call; it blocked training %.2f ms on average\n", saves,
          per_save * blocking);
    std::printf(
        "h5dcp-train: steps took %.2f ms on average: %.2f ms where a save was called or staging, %.2f ms "
        "otherwise\n",
        StepTimes::mean(times.all), StepTimes::mean(times.saving), StepTimes::mean(times.other));
    std::fflush(stdout);
  }
  return preempted ? kExitPreempted : kExitDone;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{
      "Data-parallel training of a small MLP that checkpoints with h5dcp and resumes bit for bit on any "
      "number of ranks. Prints 'step <n> loss <hex float>' per step.",
      "h5dcp-train"};
  app.footer(kExitHelp);
  app.add_option("--steps", cfg.steps, "total steps; a resumed run continues up to this step")
      ->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-every", cfg.checkpoint_every, "async checkpoint every K steps (and after the last)")
      ->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-dir", cfg.checkpoint_dir, "directory of step checkpoints (created if missing)");
  app.add_flag("--resume", cfg.resume, "start from the newest complete checkpoint in --checkpoint-dir, if any");
  app.add_option("--seed", cfg.seed, "seed of the data, the initial weights and the data order");
  app.add_option("--hidden", cfg.hidden, "hidden width of the MLP")->check(CLI::PositiveNumber);
  app.add_option("--global-batch", cfg.global_batch, "samples per step, over all ranks")->check(CLI::PositiveNumber);
  app.add_option("--micro-batches", cfg.micro_batches, "fixed micro-batches per step (divides --global-batch)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dataset-size", cfg.dataset_size, "synthetic samples")->check(CLI::PositiveNumber);
  app.add_option("--lr", cfg.lr, "Adam learning rate");
  app.add_option("--keep-last", cfg.keep_last, "keep the newest N checkpoints (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--keep-every", cfg.keep_every, "also keep every step that is a multiple of K (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--throttle-ms", cfg.throttle_ms, "sleep after each step (demos and tests: slower steps)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--staging", cfg.staging,
                 "where an async save copies the state: 'background' (a staging thread; the next optimizer step "
                 "waits for it) or 'blocking' (before the save call returns)")
      ->check(CLI::IsMember({"background", "blocking"}));
  app.add_option("--device", cfg.device,
                 "where the model trains: 'auto' (the rank's GPU from assign_device(), else the CPU), 'cpu', or "
                 "'cuda' (the rank's GPU; an error without one)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--crash-after-step", cfg.crash_after_step,
                 "testing: SIGKILL every rank right after step N, once earlier checkpoints are complete and "
                 "while step N's, if any, is being written");
  app.add_option("--local-dir", cfg.local_dir,
                 "the node-local tier: each node's own directory ('{node}' is replaced by the node's name), e.g. "
                 "/dev/shm/h5dcp-$SLURM_JOB_ID/{node}; a checkpoint every --local-every steps with copies on other "
                 "nodes, drained to --checkpoint-dir every --checkpoint-every steps; --resume recovers from it");
  app.add_option("--local-every", cfg.local_every, "local checkpoint every N steps (default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--local-replicas", cfg.local_replicas, "copies of each node's data on other nodes (default 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--local-keep", cfg.local_keep, "local steps each node keeps (default 2)")->check(CLI::PositiveNumber);
  app.add_option("--local-groups-variable", cfg.local_groups_variable,
                 "environment variable holding the nodes' failure domains, 'node=group,...'");
  app.add_flag("--local-sync", cfg.local_sync,
               "write each local step (not a drain) before the save call returns, instead of in the background "
               "(where the training keeps every core busy, as on a CPU, the background write only competes with it)");
  // A later option wins: job scripts append the user's options to their defaults.
  for (auto* option : app.get_options()) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    app.parse(argc, argv);
    if (cfg.global_batch % cfg.micro_batches != 0)
      throw CLI::ValidationError("--micro-batches must divide --global-batch");
    if (!cfg.local_dir.empty() && cfg.checkpoint_every % cfg.local_every != 0)
      throw CLI::ValidationError("with --local-dir, --local-every must divide --checkpoint-every (the drain)");
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitDone : kExitUsage;
  }

  // Determinism: one thread in LibTorch, so every micro-batch is computed
  // the same way on every rank.
  at::set_num_threads(1);
  h5dcp::prefer_romio_io_component();
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // async saves write from a thread
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  int status = kExitFailure;
  try {
    if (provided < MPI_THREAD_MULTIPLE)
      throw std::runtime_error("MPI does not provide MPI_THREAD_MULTIPLE (async saves need it)");
    status = run(cfg, rank, size);
  } catch (const h5dcp::Error& e) {
    // h5dcp's errors are collective: the same on every rank.
    if (rank == 0) std::fprintf(stderr, "h5dcp-train: %s\n", e.what());
    status = kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h5dcp-train: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitFailure);
  }
  MPI_Finalize();
  return status;
}
