// Rank -> device: the pure decision (no MPI, no LibTorch, no I/O) and the
// environment it reads. The rule is documented in h5dcp/training/device.hpp.

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "h5dcp/error.hpp"
#include "h5dcp/training/device.hpp"
#include "training/device_simulation.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere else

namespace h5dcp {
namespace {

// A non-negative decimal int, nothing else (no sign, no blanks, no suffix).
std::optional<int> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(sep, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

const std::string* find(const Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// Slurm's GPU ids: "0,2,3" or with ranges "0-3,6"; nullopt when any entry is
// something else (then it names nothing we can map).
std::optional<std::vector<int>> parse_gpu_ids(const std::string& text) {
  std::vector<int> ids;
  for (const auto& entry : split(text, ',')) {
    const auto dash = entry.find('-');
    if (dash == std::string::npos) {
      const auto id = parse_count(entry);
      if (!id) return std::nullopt;
      ids.push_back(*id);
      continue;
    }
    const auto lo = parse_count(std::string_view(entry).substr(0, dash));
    const auto hi = parse_count(std::string_view(entry).substr(dash + 1));
    if (!lo || !hi || *hi < *lo || *hi - *lo > 4096) return std::nullopt;
    for (int id = *lo; id <= *hi; ++id) ids.push_back(id);
  }
  if (ids.empty()) return std::nullopt;
  return ids;
}

// Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": two tasks on each of three nodes,
// then one) at node `node`.
std::optional<int> slurm_tasks_on_node(const std::string& text, int node) {
  int first = 0;
  for (const auto& group : split(text, ',')) {
    const auto paren = group.find("(x");
    const auto tasks = parse_count(std::string_view(group).substr(0, paren));
    std::optional<int> repeat = 1;
    if (paren != std::string::npos) {
      if (group.back() != ')') return std::nullopt;
      repeat = parse_count(std::string_view(group).substr(paren + 2, group.size() - paren - 3));
    }
    if (!tasks || !repeat) return std::nullopt;
    if (node < first + *repeat) return tasks;
    first += *repeat;
  }
  return std::nullopt;
}

struct LocalRank {
  int rank = 0;
  int size = 1;
  std::string source = "default";
};

// The launcher's idea of the local rank, for processes without MPI's.
LocalRank local_rank_from(const Environment& env) {
  static const std::pair<const char*, const char*> kVariables[] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"SLURM_LOCALID", nullptr},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
  };
  for (const auto& [rank_name, size_name] : kVariables) {
    const auto* rank_text = find(env, rank_name);
    const auto rank = rank_text ? parse_count(*rank_text) : std::nullopt;
    if (!rank) continue;
    std::optional<int> size;
    if (size_name != nullptr) {
      if (const auto* text = find(env, size_name)) size = parse_count(*text);
    } else if (const auto* tasks = find(env, "SLURM_TASKS_PER_NODE")) {
      const auto* node_text = find(env, "SLURM_NODEID");
      const auto node = node_text ? parse_count(*node_text) : std::optional<int>(0);
      if (node) size = slurm_tasks_on_node(*tasks, *node);
    }
    if (!size || *size <= *rank) size = 0;  // unknown, or inconsistent with the rank
    return {*rank, *size, rank_name};
  }
  return {};
}

std::string plural(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

}  // namespace

std::string DeviceChoice::device() const { return is_cuda() ? "cuda:" + std::to_string(cuda_index) : "cpu"; }

std::string DeviceChoice::summary() const {
  std::string text = device() + " (" + reason;
  if (!gpu.empty()) text += ": GPU " + gpu;
  if (is_cuda() && ranks_sharing > 1) text += "; shared by " + std::to_string(ranks_sharing) + " local ranks";
  return text + ")";
}

DeviceChoice choose_device(int local_rank, int local_size, int device_count, const Environment& env) {
  if (device_count < 0)
    throw UsageError("h5dcp: a device count cannot be negative (got " + std::to_string(device_count) + ")");
  DeviceChoice choice;
  if (local_rank >= 0) {
    if (local_size <= local_rank)
      throw UsageError("h5dcp: local rank " + std::to_string(local_rank) + " is not below the local size " +
                       std::to_string(local_size));
    choice.local_rank = local_rank;
    choice.local_size = local_size;
    choice.local_rank_source = "MPI";
  } else {
    auto from_env = local_rank_from(env);
    choice.local_rank = from_env.rank;
    choice.local_size = from_env.size;
    choice.local_rank_source = std::move(from_env.source);
  }

  const auto* visible = find(env, "CUDA_VISIBLE_DEVICES");
  // Slurm's list of this step's GPUs, by preference.
  const char* slurm_name = nullptr;
  std::optional<std::vector<int>> slurm_ids;
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL"}) {
    if (const auto* text = find(env, name); text != nullptr && !text->empty()) {
      slurm_name = name;
      slurm_ids = parse_gpu_ids(*text);
      break;
    }
  }
  const auto slurm_setting = [&] { return std::string(slurm_name) + "=" + env.at(slurm_name); };

  if (device_count == 0) {
    choice.ranks_sharing = choice.local_size;
    if (visible != nullptr)
      choice.reason = "no GPU visible with CUDA_VISIBLE_DEVICES='" + *visible + "'";
    else if (slurm_name != nullptr)
      choice.reason =
          "no GPU visible to LibTorch although " + slurm_setting() + " assigns GPUs: is LibTorch built without CUDA?";
    else
      choice.reason = "no GPU";
    return choice;
  }

  // Candidates: LibTorch's indices, and how the environment names each.
  std::vector<int> candidates;
  std::vector<std::string> names;
  if (visible != nullptr) {
    choice.reason = "CUDA_VISIBLE_DEVICES=" + *visible;
    const auto listed = split(*visible, ',');
    for (int i = 0; i < device_count; ++i) {
      candidates.push_back(i);
      names.push_back(static_cast<std::size_t>(i) < listed.size() ? listed[static_cast<std::size_t>(i)] : "");
    }
  } else if (slurm_ids && slurm_ids->size() < static_cast<std::size_t>(device_count) &&
             std::all_of(slurm_ids->begin(), slurm_ids->end(), [&](int id) { return id < device_count; })) {
    // The process sees the whole node (no cgroup confinement): keep to the
    // GPUs Slurm gave this step.
    choice.reason = slurm_setting() + " of " + plural(device_count, "visible GPU", "visible GPUs");
    for (int id : *slurm_ids) {
      candidates.push_back(id);
      names.push_back(std::to_string(id));
    }
  } else if (slurm_ids && slurm_ids->size() == static_cast<std::size_t>(device_count)) {
    // Confined to Slurm's GPUs: LibTorch's i-th device is Slurm's i-th id.
    choice.reason = slurm_setting();
    for (int i = 0; i < device_count; ++i) {
      candidates.push_back(i);
      names.push_back(std::to_string((*slurm_ids)[static_cast<std::size_t>(i)]));
    }
  } else {
    choice.reason = plural(device_count, "GPU visible", "GPUs visible");
    for (int i = 0; i < device_count; ++i) {
      candidates.push_back(i);
      names.emplace_back();
    }
  }

  const int count = static_cast<int>(candidates.size());
  const int slot = choice.local_rank % count;
  choice.cuda_index = candidates[static_cast<std::size_t>(slot)];
  choice.gpu = names[static_cast<std::size_t>(slot)];
  choice.ranks_sharing =
      choice.local_size > 0 ? choice.local_size / count + (slot < choice.local_size % count ? 1 : 0) : 0;
  return choice;
}

Environment current_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

namespace detail {

std::optional<int> simulated_device_count(int device_count, const Environment& env) noexcept {
  if (device_count != 0) return std::nullopt;  // a real GPU: never pretend
  const auto* text = find(env, kTestDeviceCountVariable);
  const auto count = text ? parse_count(*text) : std::nullopt;
  if (!count || *count < 1 || *count > 64) return std::nullopt;
  return count;
}

}  // namespace detail
}  // namespace h5dcp
