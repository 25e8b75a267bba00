// The node-local tier's options, groups, directories and placement (see
// local_tier.hpp).

#include "manager/local_tier.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "comm/node_survey.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

constexpr std::size_t kMaxRunIdLength = 256;
constexpr std::string_view kPlaceholder = "{node}";

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
                                      const std::optional<std::string>& variable_value) {
  return place_replicas(rank_nodes, local_tier_groups(options, variable_value), options.replicas);
}

ReplicaPlacement survey_local_tier(const Comm& comm, const LocalTierOptions& options) {
  const auto nodes = survey_nodes(comm);
  std::optional<std::string> value;
  if (options.groups.empty() && !options.groups_variable.empty())
    if (const char* v = std::getenv(options.groups_variable.c_str())) value = v;
  comm.require_same("CheckpointManager's local tier: the environment",
                    {{options.groups_variable, variable_setting(value)}});
  // Pure and the same everywhere: a UsageError is thrown by every rank alike.
  return local_tier_placement(nodes, options, value);
}

}  // namespace h5dcp::detail
