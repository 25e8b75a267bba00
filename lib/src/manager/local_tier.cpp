// The node-local tier's options, groups, directories and placement (see
// local_tier.hpp).

#include "manager/local_tier.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include "comm/node_survey.hpp"
#include "h5dcp/error.hpp"
#include "manager/step_names.hpp"
#include "storage/checkpoint_directory.hpp"
#include "storage/directory_publish.hpp"
#include "storage/durable_file.hpp"

namespace h5dcp::detail {
namespace {

constexpr std::size_t kMaxRunIdLength = 256;
constexpr std::string_view kPlaceholder = "{node}";
constexpr std::string_view kStepPrefix = "local-step-";
constexpr std::string_view kPartialSuffix = ".partial";
constexpr const char* kLocalPointer = "latest-local";
constexpr const char* kRunIdFile = "local-run-id";

// The files a local step directory holds: owner copies (local_copy_name).
bool is_copy_name(const std::string& name) {
  return name.size() == std::string("rank-00000.h5").size() && name.rfind("rank-", 0) == 0 &&
         name.compare(name.size() - 3, 3, ".h5") == 0;
}

bool valid_run_id(std::string_view id) {
  return !id.empty() && id.size() <= kMaxRunIdLength &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 127; });
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

[[noreturn]] void invalid(const std::string& what) {
  throw UsageError("h5dcp: CheckpointManager: LocalTierOptions::" + what);
}

// How a groups variable's value travels in require_same: unset differs from empty.
std::string variable_setting(const std::optional<std::string>& value) { return value ? "=" + *value : "(unset)"; }

}  // namespace

void validate_local_tier(const LocalTierOptions& o) {
  if (o.directory.empty()) invalid("directory is empty: name each node's local directory, e.g. /tmp/ckpt-{node}");
  if (o.replicas < 0) invalid("replicas must be >= 0, not " + std::to_string(o.replicas));
  if (o.every_steps < 1) invalid("every_steps must be >= 1, not " + std::to_string(o.every_steps));
  if (o.drain_every_steps < 0) invalid("drain_every_steps must be >= 0, not " + std::to_string(o.drain_every_steps));
  if (o.drain_every_steps % o.every_steps != 0)
    invalid("drain_every_steps (" + std::to_string(o.drain_every_steps) + ") must be a multiple of every_steps (" +
            std::to_string(o.every_steps) + "): only local steps are drained");
  if (o.keep < 1) invalid("keep must be >= 1, not " + std::to_string(o.keep));
  if (!o.groups.empty() && !o.groups_variable.empty())
    invalid("groups and groups_variable are both set ('" + o.groups_variable + "'): give the groups one way");
  for (const auto& [node, group] : o.groups)
    if (node.empty() || group.empty())
      invalid("groups has an empty " + std::string(node.empty() ? "node name" : "group for node '" + node + "'"));
  if (o.run_id.size() > kMaxRunIdLength)
    invalid("run_id is " + std::to_string(o.run_id.size()) + " characters long, at most " +
            std::to_string(kMaxRunIdLength));
  if (!std::all_of(o.run_id.begin(), o.run_id.end(), [](char c) { return c > ' ' && c < 0x7f; }))
    invalid("run_id '" + o.run_id + "' holds a space, a control character or non-ASCII bytes");
}

std::vector<Setting> local_tier_settings(const std::optional<LocalTierOptions>& local) {
  if (!local) return {{"local", "none"}};
  std::string groups;
  for (const auto& [node, group] : local->groups) groups.append(node).append("=").append(group).append(",");
  return {
      {"local.directory", local->directory},
      {"local.replicas", std::to_string(local->replicas)},
      {"local.every_steps", std::to_string(local->every_steps)},
      {"local.drain_every_steps", std::to_string(local->drain_every_steps)},
      {"local.keep", std::to_string(local->keep)},
      {"local.groups", groups},
      {"local.groups_variable", local->groups_variable},
      {"local.run_id", local->run_id},
  };
}

std::map<std::string, std::string> parse_node_groups(std::string_view text, std::string_view source) {
  std::map<std::string, std::string> groups;
  const auto fail = [&](const std::string& why) {
    throw UsageError("h5dcp: the node groups of " + std::string(source) + " ('" + std::string(text) +
                     "', expected 'node=group,node=group,...'): " + why);
  };
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto entry = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (entry.empty()) continue;
    const auto equals = entry.find('=');
    if (equals == std::string_view::npos) fail("'" + std::string(entry) + "' has no '='");
    const auto node = std::string(trim(entry.substr(0, equals)));
    const auto group = std::string(trim(entry.substr(equals + 1)));
    if (node.empty() || group.empty())
      fail("'" + std::string(entry) + "' has an empty " + (node.empty() ? "node" : "group"));
    const auto [it, added] = groups.emplace(node, group);
    if (!added && it->second != group)
      fail(std::string("node '")
               .append(node)
               .append("' is in two groups, '")
               .append(it->second)
               .append("' and '")
               .append(group)
               .append("'"));
  }
  return groups;
}

std::map<std::string, std::string> local_tier_groups(const LocalTierOptions& options,
                                                     const std::optional<std::string>& variable_value) {
  if (!options.groups.empty() || options.groups_variable.empty()) return options.groups;
  if (!variable_value)
    throw UsageError("h5dcp: CheckpointManager: LocalTierOptions::groups_variable names " + options.groups_variable +
                     ", which is not set: set it to 'node=group,...' or leave groups_variable empty");
  return parse_node_groups(*variable_value, "the environment variable " + options.groups_variable);
}

namespace {

// A node's mark: its name, every byte outside [A-Za-z0-9._-] as '_'.
std::string node_mark_name(std::string_view node) {
  std::string name = ".h5dcp-node-";
  for (const char ch : node) {
    const bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                       ch == '-' || ch == '_';
    name += plain ? ch : '_';
  }
  return name;
}

}  // namespace

void mark_node_directory(const std::string& node_directory, const std::string& node) {
  write_pointer(node_directory, node_mark_name(node), node);
}

std::vector<std::string> nodes_sharing_directory(const std::string& node_directory, const std::string& node,
                                                 const std::vector<std::string>& job_nodes) {
  const auto names = list_names(node_directory);
  const std::set<std::string> present(names.begin(), names.end());
  const auto own = node_mark_name(node);
  std::vector<std::string> others;
  for (const auto& other : job_nodes) {
    const auto mark = node_mark_name(other);
    if (mark != own && present.count(mark) > 0) others.push_back(other);
  }
  return others;
}

std::string local_directory_for(std::string_view pattern, std::string_view node) {
  std::string out;
  for (auto at = pattern.find(kPlaceholder); at != std::string_view::npos; at = pattern.find(kPlaceholder)) {
    out.append(pattern.substr(0, at));
    out.append(node);
    pattern.remove_prefix(at + kPlaceholder.size());
  }
  out.append(pattern);
  return out;
}

ReplicaPlacement local_tier_placement(const std::vector<std::string>& rank_nodes, const LocalTierOptions& options,
                                      const std::optional<std::string>& variable_value, bool fit) {
  const auto groups = local_tier_groups(options, variable_value);
  int replicas = options.replicas;
  if (fit) {
    // Each copy goes to another group: a node has at most (groups - 1).
    std::set<std::string> used;
    for (const auto& node : rank_nodes) {
      const auto g = groups.find(node);
      used.insert(g != groups.end() ? g->second : groups.empty() ? node : std::string());
    }
    replicas = std::min(replicas, std::max(static_cast<int>(used.size()) - 1, 0));
  }
  return place_replicas(rank_nodes, groups, replicas);
}

ReplicaPlacement survey_local_tier(const Comm& comm, const LocalTierOptions& options, bool fit) {
  const auto nodes = survey_nodes(comm);
  std::optional<std::string> value;
  if (options.groups.empty() && !options.groups_variable.empty())
    if (const char* v = std::getenv(options.groups_variable.c_str())) value = v;
  comm.require_same("CheckpointManager's local tier: the environment",
                    {{options.groups_variable, variable_setting(value)}});
  // Pure and the same everywhere: a UsageError is thrown by every rank alike.
  return local_tier_placement(nodes, options, value, fit);
}

std::string local_step_name(std::int64_t step) { return step_name(kStepPrefix, step, ""); }

std::optional<std::int64_t> local_step_of(const std::string& name) { return step_of_name(name, kStepPrefix, ""); }

std::vector<std::int64_t> list_local_steps(const std::string& node_directory) {
  return list_step_names(node_directory, kStepPrefix, "");
}

std::string partial_local_step_name(std::int64_t step) {
  return "." + local_step_name(step) + std::string(kPartialSuffix);
}

std::string adopt_run_id(const std::string& shared_directory) {
  if (auto recorded = read_pointer(shared_directory, kRunIdFile)) {
    if (!valid_run_id(*recorded))
      throw FormatError("h5dcp: checkpoint manager: '" + shared_directory + "/" + kRunIdFile +
                        "' does not hold a run identity (printable, no spaces, at most 256 characters)");
    return *recorded;
  }
  const char* job = std::getenv("SLURM_JOB_ID");
  std::random_device device;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(device()));
  std::string id = (job != nullptr && valid_run_id(job) ? std::string(job) : std::string("nojob")) + "-" +
                   utc_now_iso8601() + "-" + suffix;
  write_pointer(shared_directory, kRunIdFile, id);
  return id;
}

void prepare_local_step(const std::string& node_directory, std::int64_t step, const std::optional<std::string>& spare) {
  const auto partial = node_directory + "/" + partial_local_step_name(step);
  retire_directory(partial, is_copy_name);
  if (spare && ::rename(spare->c_str(), partial.c_str()) == 0) return;
  if (spare) retire_directory(*spare, is_copy_name);
  create_directories_durably(partial);
}

void remove_local_step_directory(const std::string& path) noexcept { retire_directory(path, is_copy_name); }

std::optional<std::string> publish_local_step(const std::string& node_directory, const std::string& partial,
                                              std::int64_t step, int keep,
                                              const std::function<bool(std::int64_t)>& recyclable) {
  fsync_file(partial);
  const auto name = local_step_name(step);
  publish_directory(partial, node_directory + "/" + name, is_copy_name);
  write_pointer(node_directory, kLocalPointer, name);
  auto steps = list_local_steps(node_directory);
  steps.erase(std::remove(steps.begin(), steps.end(), step), steps.end());
  const auto beyond = std::max<std::ptrdiff_t>(0, static_cast<std::ptrdiff_t>(steps.size()) - (keep - 1));
  std::optional<std::string> spare;
  for (auto i = beyond - 1; i >= 0; --i) {  // the newest first
    const auto old = steps[static_cast<std::size_t>(i)];
    const auto path = node_directory + "/" + local_step_name(old);
    if (!spare && recyclable(old)) {
      auto hidden = node_directory + "/" + partial_local_step_name(old);
      retire_directory(hidden, is_copy_name);
      if (::rename(path.c_str(), hidden.c_str()) == 0) {
        spare = std::move(hidden);
        continue;
      }
    }
    retire_directory(path, is_copy_name);
  }
  return spare;
}

std::vector<std::string> remove_local_orphans(const std::string& node_directory) noexcept {
  std::vector<std::string> removed;
  try {
    for (const auto& name : list_names(node_directory)) {
      if (name.size() <= kPartialSuffix.size() || name[0] != '.' ||
          name.compare(name.size() - kPartialSuffix.size(), kPartialSuffix.size(), kPartialSuffix) != 0 ||
          !local_step_of(name.substr(1, name.size() - 1 - kPartialSuffix.size())))
        continue;
      auto path = node_directory;
      path.append("/").append(name);
      retire_directory(path, is_copy_name);
      removed.push_back(std::move(path));
    }
  } catch (...) {
  }
  return removed;
}

}  // namespace h5dcp::detail
