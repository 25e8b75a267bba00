#include "training/param_agreement.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace h5dcp {
H5DCP_MESSAGE_FIELDS(detail::ParamSignature, m.name, m.dtype, m.shape);

namespace detail {
namespace {

std::string describe(const ParamSignature& p) {
  std::string text = "shape [";
  for (std::size_t i = 0; i < p.shape.size(); ++i) text += (i ? ", " : "") + std::to_string(p.shape[i]);
  return text + "] " + p.dtype;
}

}  // namespace

Bytes encode_signatures(const std::vector<ParamSignature>& signatures) { return encode_message(signatures); }

std::vector<ParamSignature> decode_signatures(std::string_view bytes) {
  return ByteReader::decode<std::vector<ParamSignature>>(bytes);
}

std::string format_ranks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i != 0) text += ", ";
    if (j - i >= 2) {
      text += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
    } else {
      for (std::size_t k = i; k <= j; ++k) text += (k != i ? ", " : "") + std::to_string(ranks[k]);
    }
    i = j + 1;
  }
  return text;
}

std::string describe_param_disagreement(const std::vector<std::vector<ParamSignature>>& per_rank, std::string_view what,
                                        std::size_t max_lines) {
  // Every name, in the order rank 0 holds them, then the others' extras.
  std::vector<std::string> names;
  std::vector<std::unordered_map<std::string, const ParamSignature*>> by_name(per_rank.size());
  {
    std::unordered_map<std::string, bool> seen;
    for (std::size_t r = 0; r < per_rank.size(); ++r)
      for (const auto& p : per_rank[r]) {
        by_name[r].emplace(p.name, &p);
        if (seen.emplace(p.name, true).second) names.push_back(p.name);
      }
  }

  std::vector<std::string> lines;
  for (const auto& name : names) {
    // Variant -> ranks, variants ordered by their lowest rank.
    std::vector<std::pair<std::string, std::vector<int>>> variants;
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      const auto it = by_name[r].find(name);
      const auto variant = it == by_name[r].end() ? std::string("missing") : describe(*it->second);
      auto v = std::find_if(variants.begin(), variants.end(), [&](const auto& e) { return e.first == variant; });
      if (v == variants.end()) v = variants.insert(variants.end(), {variant, {}});
      v->second.push_back(static_cast<int>(r));
    }
    if (variants.size() < 2) continue;
    std::string line = "'" + name + "': ";
    for (std::size_t i = 0; i < variants.size(); ++i)
      line += (i ? "; " : "") + variants[i].first + " on " + format_ranks(variants[i].second);
    lines.push_back(std::move(line));
  }
  if (lines.empty()) {
    // Same names everywhere, same shapes: only the order can differ.
    for (std::size_t r = 1; r < per_rank.size(); ++r) {
      const auto& mine = per_rank[r];
      const auto& first = per_rank[0];
      bool reported = false;
      for (std::size_t i = 0; i < std::min(mine.size(), first.size()) && !reported; ++i) {
        if (mine[i].name == first[i].name) continue;
        lines.push_back("position " + std::to_string(i) + " holds '" + first[i].name + "' on rank 0 but '" +
                        mine[i].name + "' on rank " + std::to_string(r));
        reported = true;
      }
      if (!reported && mine.size() != first.size())  // a name held twice
        lines.push_back(std::to_string(first.size()) + " tensors on rank 0 but " + std::to_string(mine.size()) +
                        " on rank " + std::to_string(r));
    }
  }
  if (lines.empty()) return {};
  std::string message = "h5dcp: the " + std::string(what) +
                        " differ across ranks (every rank must hold the same names, shapes and dtypes, in the "
                        "same order):";
  for (std::size_t i = 0; i < lines.size() && i < max_lines; ++i) message += "\n  " + lines[i];
  if (lines.size() > max_lines) message += "\n  ... and " + std::to_string(lines.size() - max_lines) + " more";
  return message;
}

}  // namespace detail
}  // namespace h5dcp
