// Writes the checkpoints the CLI tests inspect, verify and compare, on 2
// ranks (run as mpi.cli_fixtures.np2):
//   known.h5    a bit of everything: a row-sharded and a grid-sharded tensor,
//               replicated ones, a 0-d and an empty tensor, every value kind,
//               nested dicts and lists, an empty dict, a key that needs escaping
//               (tests/golden/inspect_known.json is its inspect --json)
//   same.h5     the same values, every tensor saved whole: diff says equal
//   changed.h5  one element, a dtype, a shape, values and keys changed
//   close.h5    every finite weight element moved by about 0.001
// usage: h5dcp_cli_fixtures DIR

#include <mpi.h>

#include <cstdio>
#include <exception>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace {

using namespace h5dcp;

StateValue row_sharded(const at::Tensor& full, int rank, int size, bool sharded) {
  if (!sharded) return full;
  const auto cuts = test::uneven_cuts(full.size(0), size);
  return ShardedTensor({full.size(0), full.size(1)},
                       {Shard{full.narrow(0, cuts[rank], cuts[rank + 1] - cuts[rank]).clone(), {cuts[rank], 0}}});
}

StateValue grid_sharded(const at::Tensor& full, int rank, int size, bool sharded) {
  if (!sharded) return full;
  return test::grid_shards(full, 2, 2, rank, size);
}

StateDict known(int rank, int size, bool sharded) {
  const auto weight = test::reference_tensor({6, 4}, at::kFloat);
  return StateDict{
      {"model", StateDict{{"weight", row_sharded(weight, rank, size, sharded)},
                          {"bias", test::reference_tensor({4}, at::kBFloat16)},
                          {"mask", test::reference_tensor({2, 3}, at::kBool)},
                          {"grid", grid_sharded(test::reference_tensor({4, 4}, at::kHalf), rank, size, sharded)}}},
      {"step", at::full({}, 100, at::kLong)},
      {"ids", at::zeros({0, 3}, at::kInt)},
      {"epoch", 7},
      {"lr", 0.5},
      {"name", "adam"},
      {"flag", true},
      {"nothing", StateValue(std::monostate{})},
      {"raw", ByteString{std::string("\x00\x01\xff", 3)}},
      {"blob", PickledObject{std::string("\x80\x02N.", 4)}},
      {"optim", StateDict{{"param_groups", StateList{StateDict{{"lr", 0.001}, {"betas", StateList{0.9, 0.999}}}}},
                          {"state", StateDict{}}}},
      {"a/b%c", 1},
  };
}

}  // namespace

int main(int argc, char** argv) {
  prefer_romio_io_component();
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int code = 0;
  try {
    if (argc != 2) throw std::runtime_error("usage: h5dcp_cli_fixtures DIR");
    const std::string dir = argv[1];
    save(known(rank, size, true), dir + "/known.h5");
    save(known(rank, size, false), dir + "/same.h5");

    auto changed = known(rank, size, false);
    auto& model = std::get<StateDict>(changed["model"]);
    auto weight = test::reference_tensor({6, 4}, at::kFloat);
    weight[1][2] += 0.25;
    model["weight"] = weight;
    model["bias"] = test::reference_tensor({4}, at::kFloat);
    model["mask"] = test::reference_tensor({3, 2}, at::kBool);
    changed["epoch"] = 8;
    changed["name"] = "sgd";
    changed.erase("flag");
    changed["extra"] = at::zeros({2});
    std::get<StateList>(std::get<StateDict>(
        std::get<StateList>(std::get<StateDict>(changed["optim"])["param_groups"])[0])["betas"])[1] = 0.99;
    save(changed, dir + "/changed.h5");

    auto close = known(rank, size, false);
    std::get<StateDict>(close["model"])["weight"] = test::reference_tensor({6, 4}, at::kFloat) + 0.001;
    save(close, dir + "/close.h5");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] %s\n", rank, e.what());
    code = 1;
  }
  MPI_Finalize();
  return code;
}
