#include "plan/local_step_choice.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "base/joined.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::string step_name(std::int64_t step) { return "step " + std::to_string(step); }

// "n2 (ranks 2, 3)" for each node of the saving job some of whose ranks have
// no intact copy, the nodes in name order.
std::string uncovered_text(const std::vector<std::string>& rank_nodes, const std::vector<int>& uncovered) {
  std::map<std::string, std::vector<int>> by_node;
  for (const auto rank : uncovered) by_node[rank_nodes[static_cast<std::size_t>(rank)]].push_back(rank);
  std::vector<std::string> parts;
  for (const auto& [node, ranks] : by_node) {
    std::vector<std::string> numbers;
    for (const auto rank : ranks) numbers.push_back(std::to_string(rank));
    parts.push_back(node + (ranks.size() == 1 ? " (rank " : " (ranks ") + joined(numbers) + ")");
  }
  return (parts.size() == 1 ? "node " : "nodes ") + joined(parts);
}

struct Holder {
  std::string node;
  std::string file;
  bool operator<(const Holder& other) const { return std::tie(node, file) < std::tie(other.node, other.file); }
};

}  // namespace

LocalStepChoice choose_local_step(const std::string& run_id, std::optional<std::int64_t> shared_step,
                                  const std::vector<SurvivingNodeReport>& nodes) {
  LocalStepChoice choice;
  std::vector<const SurvivingNodeReport*> sorted;
  sorted.reserve(nodes.size());
  for (const auto& node : nodes) sorted.push_back(&node);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->node < b->node; });
  std::set<std::string> surviving;
  for (const auto* node : sorted) surviving.insert(node->node);

  std::set<std::int64_t, std::greater<>> candidates;
  for (const auto* node : sorted) {
    for (const auto& step : node->steps) {
      if (step.run_id == run_id) {
        candidates.insert(step.step);
        continue;
      }
      for (const auto& copy : step.copies) {
        choice.skipped.push_back({node->node, step.step, copy.owner_rank, copy.file,
                                  "a copy of another run (" + step.run_id + ", not " + run_id + ")"});
      }
    }
  }

  for (const auto candidate : candidates) {
    const auto name = step_name(candidate);
    if (shared_step && candidate <= *shared_step) {
      choice.rejected.push_back(name + ": not newer than the shared checkpoint (" + step_name(*shared_step) + ")");
      continue;
    }
    // The step's reports, node by node.
    std::vector<std::pair<const SurvivingNodeReport*, const LocalStepReport*>> reports;
    for (const auto* node : sorted) {
      for (const auto& step : node->steps) {
        if (step.run_id == run_id && step.step == candidate) reports.emplace_back(node, &step);
      }
    }
    const auto& rank_nodes = reports.front().second->rank_nodes;
    const auto disagreeing = std::find_if(reports.begin(), reports.end(),
                                          [&](const auto& report) { return report.second->rank_nodes != rank_nodes; });
    if (disagreeing != reports.end()) {
      choice.rejected.push_back(name + ": nodes " + reports.front().first->node + " and " + disagreeing->first->node +
                                " disagree on the job that saved it");
      continue;
    }
    if (rank_nodes.empty()) {
      choice.rejected.push_back(name + ": its files record no rank of the job that saved it");
      continue;
    }

    const auto owners = rank_nodes.size();
    std::vector<std::vector<Holder>> holders(owners);
    std::size_t failed = 0;
    for (const auto& [node, step] : reports) {
      for (const auto& copy : step->copies) {
        if (copy.owner_rank < 0 || static_cast<std::size_t>(copy.owner_rank) >= owners) {
          choice.skipped.push_back({node->node, candidate, copy.owner_rank, copy.file,
                                    "owner rank " + std::to_string(copy.owner_rank) +
                                        " is not a rank of the job that saved it (" + std::to_string(owners) +
                                        " ranks)"});
          ++failed;
        } else if (!copy.intact) {
          choice.skipped.push_back({node->node, candidate, copy.owner_rank, copy.file,
                                    copy.problem.empty() ? "failed its checks" : copy.problem});
          ++failed;
        } else {
          holders[static_cast<std::size_t>(copy.owner_rank)].push_back({node->node, copy.file});
        }
      }
    }
    std::vector<int> uncovered;
    for (std::size_t owner = 0; owner < owners; ++owner) {
      if (holders[owner].empty()) uncovered.push_back(static_cast<int>(owner));
    }
    if (!uncovered.empty()) {
      std::vector<std::string> lost;
      for (const auto& node : std::set<std::string>(rank_nodes.begin(), rank_nodes.end())) {
        if (surviving.count(node) == 0) lost.push_back(node);
      }
      auto line = name + ": the data of " + uncovered_text(rank_nodes, uncovered) +
                  " has no intact copy (lost: " + (lost.empty() ? "none" : joined(lost));
      if (failed != 0) line += "; copies that failed their checks: " + std::to_string(failed);
      choice.rejected.push_back(line + ")");
      continue;
    }

    // Each owner from its own node when that holds an intact copy, the
    // others from the holder that serves the fewest owners so far.
    choice.step = candidate;
    choice.rank_nodes = rank_nodes;
    choice.sources.assign(owners, {});
    std::map<std::string, int> load;
    std::vector<bool> served(owners, false);
    for (std::size_t owner = 0; owner < owners; ++owner) {
      auto& list = holders[owner];
      std::sort(list.begin(), list.end());
      const auto own =
          std::find_if(list.begin(), list.end(), [&](const Holder& h) { return h.node == rank_nodes[owner]; });
      if (own == list.end()) continue;
      choice.sources[owner] = {own->node, own->file};
      ++load[own->node];
      served[owner] = true;
    }
    for (std::size_t owner = 0; owner < owners; ++owner) {
      if (served[owner]) continue;
      const auto& list = holders[owner];
      const auto best = std::min_element(list.begin(), list.end(),
                                         [&](const Holder& a, const Holder& b) { return load[a.node] < load[b.node]; });
      choice.sources[owner] = {best->node, best->file};
      ++load[best->node];
    }
    break;
  }
  return choice;
}

void mark_damaged(std::vector<SurvivingNodeReport>& reports, const LocalStepChoice& choice,
                  const std::map<int, std::string>& damaged) {
  for (const auto& [owner, problem] : damaged) {
    if (!choice.step || owner < 0 || static_cast<std::size_t>(owner) >= choice.sources.size())
      throw UsageError("h5dcp: rank " + std::to_string(owner) + " owns no data of the local step chosen");
    const auto& source = choice.sources[static_cast<std::size_t>(owner)];
    bool marked = false;
    for (auto& node : reports) {
      if (node.node != source.node) continue;
      for (auto& step : node.steps) {
        if (step.step != *choice.step) continue;
        for (auto& copy : step.copies) {
          if (copy.owner_rank != owner || copy.file != source.file || !copy.intact) continue;
          copy.intact = false;
          copy.problem = problem;
          marked = true;
        }
      }
    }
    if (!marked)
      throw UsageError("h5dcp: the copy of rank " + std::to_string(owner) + " on " + source.node + " (" + source.file +
                       ") is not an intact copy of " + step_name(*choice.step) + " in the reports");
  }
}

}  // namespace h5dcp::detail
