#include "bench_transformer.hpp"

#include <ATen/ATen.h>

#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace h5dcp_bench {
namespace {

using Shape = std::vector<std::int64_t>;

// Every parameter's name and global shape, in a fixed order.
std::vector<std::pair<std::string, Shape>> parameters(const TransformerShape& s) {
  const auto h = s.hidden;
  std::vector<std::pair<std::string, Shape>> p{{"embed.weight", {s.vocab, h}}, {"pos.weight", {s.positions, h}}};
  for (int l = 0; l < s.layers; ++l) {
    const auto at = "layers." + std::to_string(l) + ".";
    for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{{"ln1.weight", {h}},
                                                                                {"ln1.bias", {h}},
                                                                                {"attn.qkv.weight", {3 * h, h}},
                                                                                {"attn.qkv.bias", {3 * h}},
                                                                                {"attn.proj.weight", {h, h}},
                                                                                {"attn.proj.bias", {h}},
                                                                                {"ln2.weight", {h}},
                                                                                {"ln2.bias", {h}},
                                                                                {"mlp.fc1.weight", {4 * h, h}},
                                                                                {"mlp.fc1.bias", {4 * h}},
                                                                                {"mlp.fc2.weight", {h, 4 * h}},
                                                                                {"mlp.fc2.bias", {h}}})
      p.emplace_back(at + name, shape);
  }
  p.emplace_back("ln_f.weight", Shape{h});
  p.emplace_back("ln_f.bias", Shape{h});
  return p;
}

// This rank's dim-0 block of tensor number `k`, filled or zeros.
at::Tensor local_block(const Shape& global, int k, int rank, int world, bool fill) {
  if (global[0] % world != 0) throw std::invalid_argument("transformer_state: dim 0 must divide by the rank count");
  const auto rows = global[0] / world;
  Shape local = global;
  local[0] = rows;
  if (!fill) return at::zeros(local, at::kFloat);
  auto values = at::arange(rows, at::kFloat) + static_cast<double>(rank * rows + std::int64_t{k} * 16384);
  if (local.size() == 1) return values;
  return values.unsqueeze(1).expand(local).contiguous();
}

// Calls fn(tensor number, global shape, place in the state dict) for every tensor.
void for_each_tensor(const TransformerShape& s,
                     const std::function<void(int, const Shape&, const std::vector<std::string>&)>& fn) {
  int k = 0;
  for (const auto& [name, shape] : parameters(s)) {
    fn(k++, shape, {"model", name});
    fn(k++, shape, {"optim", "state", name, "exp_avg"});
    fn(k++, shape, {"optim", "state", name, "exp_avg_sq"});
  }
}

h5dcp::StateDict& dict_at(h5dcp::StateDict& root, const std::vector<std::string>& path) {
  auto* d = &root;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    auto [it, added] = d->try_emplace(path[i], h5dcp::StateDict{});
    (void)added;
    d = &std::get<h5dcp::StateDict>(it->second);
  }
  return *d;
}

// The sharded tensor at `path` of a state dict transformer_state made.
const h5dcp::ShardedTensor& sharded_at(const h5dcp::StateDict& root, const std::vector<std::string>& path) {
  const auto* d = &root;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) d = &std::get<h5dcp::StateDict>(d->at(path[i]));
  return std::get<h5dcp::ShardedTensor>(d->at(path.back()));
}

}  // namespace

h5dcp::StateDict transformer_state(const TransformerShape& shape, int rank, int world, bool fill) {
  h5dcp::StateDict sd;
  for_each_tensor(shape, [&](int k, const Shape& global, const std::vector<std::string>& path) {
    const auto per_rank = global[0] / world;
    Shape offsets(global.size(), 0);
    offsets[0] = rank * per_rank;
    dict_at(sd, path)[path.back()] =
        h5dcp::ShardedTensor(global, {h5dcp::Shard{local_block(global, k, rank, world, fill), offsets}});
  });
  for (const auto& [name, unused] : parameters(shape)) {
    (void)unused;
    dict_at(sd, {"optim", "state", name, "step"})["step"] = at::full({}, fill ? 100.0 : 0.0, at::kFloat);
  }
  return sd;
}

bool transformer_holds_values(const h5dcp::StateDict& sd, const TransformerShape& shape, int rank, int world) {
  bool ok = true;
  for_each_tensor(shape, [&](int k, const Shape& global, const std::vector<std::string>& path) {
    const auto& shards = sharded_at(sd, path).local_shards();
    ok = ok && shards.size() == 1 && at::equal(shards[0].tensor, local_block(global, k, rank, world, true));
  });
  for (const auto& [name, unused] : parameters(shape)) {
    (void)unused;
    const auto& state = std::get<h5dcp::StateDict>(
        std::get<h5dcp::StateDict>(std::get<h5dcp::StateDict>(sd.at("optim")).at("state")).at(name));
    ok = ok && std::get<at::Tensor>(state.at("step")).item<float>() == 100.0F;
  }
  return ok;
}

std::vector<FileRange> transformer_ranges(const h5dcp::StateDict& sd, const TransformerShape& shape, int rank,
                                          int world, FileLayout layout) {
  std::vector<FileRange> ranges;
  std::int64_t end = 0;  // of the file (kInterleaved) or of this rank's bytes so far
  for_each_tensor(shape, [&](int, const Shape& global, const std::vector<std::string>& path) {
    const auto& shard = sharded_at(sd, path).local_shards().at(0);
    const std::int64_t bytes = shard.tensor.numel() * 4;
    if (layout == FileLayout::kInterleaved) {
      ranges.push_back({end + rank * bytes, shard.tensor.data_ptr(), bytes});
      end += world * bytes;  // every rank's rows of this tensor
    } else {
      ranges.push_back({end, shard.tensor.data_ptr(), bytes});
      end += bytes;
    }
  });
  // Each rank's region starts where the ranks before it end (they hold as many bytes).
  if (layout == FileLayout::kRankRegions)
    for (auto& r : ranges) r.offset += rank * end;
  return ranges;
}

std::int64_t transformer_bytes(const TransformerShape& shape) {
  std::int64_t bytes = 0;
  for (const auto& [name, global] : parameters(shape)) {
    (void)name;
    std::int64_t n = 1;
    for (const auto d : global) n *= d;
    bytes += 3 * 4 * n + 4;  // parameter, two moments, the step
  }
  return bytes;
}

int transformer_tensor_count(const TransformerShape& shape) { return 4 * static_cast<int>(parameters(shape).size()); }

std::string describe(const TransformerShape& shape) {
  return std::to_string(shape.layers) + " layers, hidden " + std::to_string(shape.hidden) + ", vocab " +
         std::to_string(shape.vocab);
}

}  // namespace h5dcp_bench
