// h5dcp-example: save a sharded state dict from N ranks into one parallel
// HDF5 file, load it back with a different sharding, check every value.
//
//   mpiexec -n 4 h5dcp-example [--out FILE]
//
// The values are a formula of each element's global index (below), so a
// reader without h5dcp (h5py, h5dump) can check them too:
//   floats:  ((i % 509) - 254) / 4        (8 significant bits: exact even in bfloat16)
//   ints:    (i * 7919) % 251 - 125
//   bool:    i % 3 == 0

#include <ATen/ATen.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "h5dcp/h5dcp.hpp"
#include "h5dcp/training/device.hpp"

namespace {

at::Tensor reference(at::IntArrayRef shape, at::ScalarType dtype) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  const auto i = at::arange(n, at::kLong);
  at::Tensor t;
  if (dtype == at::kBool)
    t = (i % 3) == 0;
  else if (at::isFloatingType(dtype))
    t = ((i % 509) - 254).to(at::kDouble).div(4.0).to(dtype);
  else
    t = ((i * 7919) % 251 - 125).to(dtype);
  return t.reshape(shape);
}

// Rows [lo, hi) of `full` for `rank` of `size` (the last ranks get fewer).
h5dcp::ShardedTensor rows_of(const at::Tensor& full, int rank, int size) {
  const auto n = full.size(0);
  const auto lo = n * rank / size;
  const auto hi = n * (rank + 1) / size;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(full.dim()), 0);
  offsets[0] = lo;
  return h5dcp::ShardedTensor(full.sizes().vec(), {h5dcp::Shard{full.narrow(0, lo, hi - lo).clone(), offsets}});
}

// Columns, the other way round: loading into it reshards.
h5dcp::ShardedTensor columns_of(const at::Tensor& full, int rank, int size) {
  const auto n = full.size(1);
  const auto lo = n * rank / size;
  const auto hi = n * (rank + 1) / size;
  return h5dcp::ShardedTensor(full.sizes().vec(), {h5dcp::Shard{at::zeros_like(full.narrow(1, lo, hi - lo)), {0, lo}}});
}

bool same(const at::Tensor& a, const at::Tensor& b) {
  const auto ca = a.contiguous();
  const auto cb = b.contiguous();
  return ca.sizes() == cb.sizes() && ca.scalar_type() == cb.scalar_type() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = "h5dcp-example.h5";
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--out" && a + 1 < argc) {
      out = argv[++a];
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: mpiexec -n N h5dcp-example [--out FILE]\n"
          "Saves a sharded state dict into FILE (default h5dcp-example.h5), loads it back\n"
          "with a different sharding and checks every value. Exit 0 when all match.\n");
      return 0;
    } else {
      std::fprintf(stderr, "h5dcp-example: unknown argument '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }

  h5dcp::prefer_romio_io_component();
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // Tensors by fqn (the path in the nested state dict and in the file).
  const std::map<std::string, at::Tensor> full{
      {"model/embedding.weight", reference({64, 16}, at::kFloat)},
      {"model/proj.weight", reference({24, 20}, at::kBFloat16)},
      {"model/proj.bias", reference({24}, at::kHalf)},
      {"model/norm.scale", reference({16}, at::kDouble)},
      {"model/mask", reference({5, 7}, at::kBool)},
      {"data/tokens", reference({9, 3}, at::kInt)},
      {"optim/step", reference({}, at::kLong)},
  };
  const auto is_sharded = [](const std::string& fqn) {
    return fqn == "model/embedding.weight" || fqn == "model/proj.weight";
  };
  // The nesting around the tensors, with non-tensor values: what an
  // optimizer's param_groups look like.
  const auto skeleton = [] {
    return h5dcp::StateDict{
        {"model", h5dcp::StateDict{}},
        {"data", h5dcp::StateDict{}},
        {"optim", h5dcp::StateDict{{"param_groups",
                                    h5dcp::StateList{h5dcp::StateDict{
                                        {"lr", 0.001}, {"name", "adam"}, {"betas", h5dcp::StateList{0.9, 0.999}}}}}}},
        {"epoch", 3},
        {"note", "saved by h5dcp-example"},
    };
  };

  int status = 0;
  try {
    // Which device each rank would train on: rank 0 prints every rank's line.
    for (const auto& line : h5dcp::gather_device_descriptions(h5dcp::assign_device()))
      std::printf("h5dcp-example: %s\n", line.c_str());
    // Two tensors row-sharded, the rest replicated on every rank.
    auto state = skeleton();
    for (const auto& [fqn, tensor] : full) {
      auto& parent = std::get<h5dcp::StateDict>(h5dcp::value_at(state, fqn.substr(0, fqn.find('/'))));
      parent[fqn.substr(fqn.find('/') + 1)] =
          is_sharded(fqn) ? h5dcp::StateValue(rows_of(tensor, rank, size)) : h5dcp::StateValue(tensor.clone());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    const auto metadata = h5dcp::save(state, out).metadata;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Load back: the sharded tensors by columns (another sharding), the
    // replicated ones whole, into zeroed tensors.
    auto back = skeleton();
    h5dcp::value_at(back, "epoch") = 0;
    h5dcp::value_at(back, "note") = "";
    h5dcp::value_at(back, "optim/param_groups/0/lr") = 0.0;
    for (const auto& [fqn, tensor] : full) {
      auto& parent = std::get<h5dcp::StateDict>(h5dcp::value_at(back, fqn.substr(0, fqn.find('/'))));
      parent[fqn.substr(fqn.find('/') + 1)] = is_sharded(fqn) ? h5dcp::StateValue(columns_of(tensor, rank, size))
                                                              : h5dcp::StateValue(at::zeros_like(tensor));
    }
    h5dcp::load(back, out);

    long mismatches = 0;
    long checked = 0;
    for (const auto& [key, expected] : full) {
      const auto& value = h5dcp::value_at(back, key);
      if (const auto* t = std::get_if<at::Tensor>(&value)) {
        checked += t->numel();
        if (!same(*t, expected)) ++mismatches, std::fprintf(stderr, "rank %d: '%s' differs\n", rank, key.c_str());
        continue;
      }
      for (const auto& shard : std::get<h5dcp::ShardedTensor>(value).local_shards()) {
        checked += shard.tensor.numel();
        if (!same(shard.tensor, expected.narrow(1, shard.offsets[1], shard.tensor.size(1))))
          ++mismatches, std::fprintf(stderr, "rank %d: a shard of '%s' differs\n", rank, key.c_str());
      }
    }
    // The non-tensor values came back too.
    checked += 3;
    if (std::get<std::int64_t>(h5dcp::value_at(back, "epoch")) != 3) ++mismatches;
    if (std::get<std::string>(h5dcp::value_at(back, "note")) != "saved by h5dcp-example") ++mismatches;
    if (std::get<double>(h5dcp::value_at(back, "optim/param_groups/0/lr")) != 0.001) ++mismatches;
    long all_checked = 0;
    long all_mismatches = 0;
    MPI_Reduce(&checked, &all_checked, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mismatches, &all_mismatches, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::int64_t bytes = 0;
      for (const auto& [key, tensor] : full) bytes += tensor.numel() * tensor.element_size();
      std::printf(
          "h5dcp-example: %d ranks saved a nested state dict of %zu tensors (%lld bytes; 2 row-sharded, 5 "
          "replicated and written once) and %zu other values into %s in %.3f s\n",
          size, full.size(), static_cast<long long>(bytes), metadata.state_dict_metadata.size() - full.size(),
          out.c_str(), seconds);
      std::printf("h5dcp-example: loaded it back column-sharded and whole on %d ranks: %ld values checked, %s\n", size,
                  all_checked, all_mismatches == 0 ? "all equal bit for bit" : "MISMATCHES FOUND");
      std::printf("h5dcp-example: inspect it with: h5ls -r %s   or   h5dump -H %s\n", out.c_str(), out.c_str());
    }
    status = all_mismatches == 0 ? 0 : 1;
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  } catch (const h5dcp::Error& e) {
    // The same error on every rank: report it once.
    if (rank == 0) std::fprintf(stderr, "h5dcp-example: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
