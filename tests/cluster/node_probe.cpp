// node_probe: where did the launcher put the ranks, and can they talk?
// MPI only (no h5dcp, no LibTorch), for tests/cluster/nodes_test.sh.
//
// Rank 0 prints one line per rank, in rank order:
//   probe rank=R size=S host=NAME local_rank=L local_size=LS nodes=N node=I
//     partner=P CUDA_VISIBLE_DEVICES=... SLURM_LOCALID=... (Slurm's variables)
// where host is MPI_Get_processor_name, local_rank/local_size come from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), nodes counts those groups and
// node is this rank's group (numbered by its lowest rank). Then it checks:
//   - an MPI_Allreduce of 1 MiB of doubles (every element's sum);
//   - a point-to-point exchange of BYTES (default 4 MiB) with the rank of the
//     same local rank on the next node (partner), and from the previous one;
//   - the same exchange within the node (local rank L with L+1 mod LS);
//   - ranks sharing a group share a processor name, and different groups
//     have different names (so "node" means one host name).
// and prints "probe: ok nodes=N ranks=S inter_node_bytes=B" (exit 0) or
// "probe: FAILED ..." lines (exit 1). Usage: node_probe [BYTES]
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "-";
}

// The byte a sender puts at index i: differs per sender and per position.
unsigned char pattern(int sender, std::size_t i) {
  return static_cast<unsigned char>((static_cast<std::size_t>(sender) * 131U + i * 7U + (i >> 12)) & 0xFFU);
}

// Sends BYTES to `to`, receives BYTES from `from` on comm; true when every
// received byte is from's pattern (patterns use world ranks).
bool exchange(MPI_Comm comm, int to, int from, int world_me, int world_from, std::size_t bytes) {
  std::vector<unsigned char> out(bytes);
  std::vector<unsigned char> in(bytes, 0);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = pattern(world_me, i);
  // In pieces of at most 1 GiB (int counts); a few MiB is one piece.
  const std::size_t piece = std::size_t{1} << 30;
  for (std::size_t at = 0; at < bytes; at += piece) {
    const int n = static_cast<int>(std::min(piece, bytes - at));
    MPI_Sendrecv(out.data() + at, n, MPI_BYTE, to, 7, in.data() + at, n, MPI_BYTE, from, 7, comm, MPI_STATUS_IGNORE);
  }
  for (std::size_t i = 0; i < bytes; ++i) {
    if (in[i] != pattern(world_from, i)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{4} << 20;

  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int name_len = 0;
  MPI_Get_processor_name(name, &name_len);

  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0;
  int local_size = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);

  // The node's number: its group's lowest world rank, renumbered 0..N-1.
  int leader = rank;
  MPI_Bcast(&leader, 1, MPI_INT, 0, local);
  std::vector<int> leaders(static_cast<std::size_t>(size));
  MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> distinct = leaders;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int nodes = static_cast<int>(distinct.size());
  auto node_of = [&](int r) {
    return static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), leaders[static_cast<std::size_t>(r)]) -
                            distinct.begin());
  };
  const int node = node_of(rank);
  std::vector<int> local_ranks(static_cast<std::size_t>(size));
  MPI_Allgather(&local_rank, 1, MPI_INT, local_ranks.data(), 1, MPI_INT, MPI_COMM_WORLD);
  auto rank_at = [&](int n, int l) {
    for (int r = 0; r < size; ++r) {
      if (node_of(r) == n && local_ranks[static_cast<std::size_t>(r)] == l) return r;
    }
    return -1;
  };

  std::vector<std::string> failures;
  // Processor names: equal within a group, different across groups.
  std::vector<char> names(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  auto name_of = [&](int r) {
    return std::string(names.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  };
  for (int r = 0; r < size; ++r) {
    const bool same_group = node_of(r) == node;
    const bool same_name = name_of(r) == name;
    if (same_group != same_name) {
      failures.push_back("rank " + std::to_string(rank) + " (" + name + ") and rank " + std::to_string(r) + " (" +
                         name_of(r) + ") are " + (same_group ? "in one" : "in different") +
                         " MPI_COMM_TYPE_SHARED group(s) but have " + (same_name ? "one" : "different") +
                         " processor name(s)");
    }
  }

  // Allreduce: element i of rank r is r + i; the sum is S*i + S*(S-1)/2.
  const std::size_t count = (std::size_t{1} << 20) / sizeof(double);
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = rank + static_cast<double>(i);
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  bool allreduce_ok = true;
  for (std::size_t i = 0; i < count; ++i) {
    const double want = static_cast<double>(size) * static_cast<double>(i) + size * (size - 1) / 2.0;
    if (values[i] != want) allreduce_ok = false;
  }
  if (!allreduce_ok) failures.push_back("rank " + std::to_string(rank) + ": MPI_Allreduce gave wrong sums");

  // Across nodes: to the same local rank on the next node, from the previous one.
  int partner = -1;
  bool inter_ok = true;
  if (nodes > 1) {
    const int to = rank_at((node + 1) % nodes, local_rank);
    const int from = rank_at((node + nodes - 1) % nodes, local_rank);
    int both = (to >= 0 && from >= 0) ? 1 : 0;
    int all = 0;
    MPI_Allreduce(&both, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all == 1) {
      partner = to;
      inter_ok = exchange(MPI_COMM_WORLD, to, from, rank, from, bytes);
      if (!inter_ok) {
        failures.push_back("rank " + std::to_string(rank) + ": wrong bytes from rank " + std::to_string(from) +
                           " (another node)");
      }
    } else {
      failures.push_back("rank " + std::to_string(rank) + ": nodes hold different rank counts, no partner on " +
                         "the next node for local rank " + std::to_string(local_rank));
      inter_ok = false;
    }
  }
  // Within the node.
  bool intra_ok = true;
  if (local_size > 1) {
    const int to = (local_rank + 1) % local_size;
    const int from = (local_rank + local_size - 1) % local_size;
    int world_from = -1;
    std::vector<int> world_of(static_cast<std::size_t>(local_size));
    MPI_Allgather(&rank, 1, MPI_INT, world_of.data(), 1, MPI_INT, local);
    world_from = world_of[static_cast<std::size_t>(from)];
    intra_ok = exchange(local, to, from, rank, world_from, bytes);
    if (!intra_ok) {
      failures.push_back("rank " + std::to_string(rank) + ": wrong bytes from rank " + std::to_string(world_from) +
                         " (same node)");
    }
  }

  std::string line = "probe rank=" + std::to_string(rank) + " size=" + std::to_string(size) + " host=" + name +
                     " local_rank=" + std::to_string(local_rank) + " local_size=" + std::to_string(local_size) +
                     " nodes=" + std::to_string(nodes) + " node=" + std::to_string(node) +
                     " partner=" + std::to_string(partner);
  for (const char* var : {"CUDA_VISIBLE_DEVICES", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_PROCID", "SLURMD_NODENAME",
                          "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    line += std::string(" ") + var + "=" + env(var);
  }
  line += std::string(" allreduce=") + (allreduce_ok ? "ok" : "bad") +
          " inter_node=" + (nodes > 1 ? (inter_ok ? "ok" : "bad") : "none") +
          " intra_node=" + (local_size > 1 ? (intra_ok ? "ok" : "bad") : "none");
  for (const auto& f : failures) line += "\nprobe: FAILED " + f;

  // Rank 0 prints every rank's line, in rank order.
  int len = static_cast<int>(line.size());
  std::vector<int> lens(static_cast<std::size_t>(size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(static_cast<std::size_t>(size), 0);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lens[static_cast<std::size_t>(r)];
  }
  std::vector<char> all(static_cast<std::size_t>(rank == 0 ? total : 0) + 1);
  MPI_Gatherv(line.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  int bad = failures.empty() ? 0 : 1;
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r) {
      std::printf("%.*s\n", lens[static_cast<std::size_t>(r)], all.data() + offsets[static_cast<std::size_t>(r)]);
    }
    if (any_bad != 0) {
      std::printf("probe: FAILED (see above)\n");
    } else {
      std::printf("probe: ok nodes=%d ranks=%d inter_node_bytes=%zu\n", nodes, size, nodes > 1 ? bytes : 0);
    }
    std::fflush(stdout);
  }
  MPI_Comm_free(&local);
  MPI_Finalize();
  return any_bad != 0 ? 1 : 0;
}
