#include "plan/load_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

#include "h5dcp/error.hpp"
#include "plan/chunk_index.hpp"

namespace h5dcp::detail {

LoadPlan create_local_load_plan(const std::vector<LoadRequest>& wanted, const Metadata& metadata, bool strict,
                                bool convert_dtype) {
  LoadPlan plan;
  std::set<std::string> missing;
  std::unordered_set<std::string> requested;  // hashed: every saved key is looked up in it below
  requested.reserve(wanted.size());
  std::vector<std::string> problems;
  std::set<std::string> reported;
  // One overlap index per tensor, built when a rank first asks for it.
  std::map<std::string, ChunkIndex> indexes;
  auto problem = [&](const std::string& fqn, std::string text) {
    if (reported.insert(fqn).second) problems.push_back(std::move(text));
  };

  for (const auto& want : wanted) {
    const auto& fqn = want.dest_index.fqn;
    requested.insert(fqn);
    const auto it = metadata.state_dict_metadata.find(fqn);
    if (it == metadata.state_dict_metadata.end()) {
      missing.insert(fqn);
      continue;
    }
    const auto* saved = std::get_if<TensorStorageMetadata>(&it->second);
    if (want.value) {
      if (saved != nullptr)
        problem(fqn, "'" + fqn + "' is a tensor in the checkpoint but a non-tensor value in the state dict");
      else
        plan.items.push_back(ReadItem{ReadItemType::Value, want.dest_index, {}, fqn, {}, {}, DType::UInt8});
      continue;
    }
    if (saved == nullptr) {
      problem(fqn, "'" + fqn + "' is a non-tensor value (" + std::get<BytesStorageMetadata>(it->second).encoding +
                       ") in the checkpoint but a tensor in the state dict");
      continue;
    }
    if (saved->properties.dtype != want.dtype && !convert_dtype) {
      problem(fqn, "'" + fqn + "' is " + std::string(dtype_name(saved->properties.dtype)) + " in the checkpoint but " +
                       std::string(dtype_name(want.dtype)) +
                       " in the state dict (LoadOptions::convert_dtype converts)");
      continue;
    }
    ChunkStorageMetadata storage_box = want.box;
    if (want.storage_offset.empty()) {
      if (saved->size != want.global_shape) {
        problem(fqn, "'" + fqn + "' has global shape " + describe_shape(saved->size) + " in the checkpoint but " +
                         describe_shape(want.global_shape) + " in the state dict");
        continue;
      }
    } else {
      bool fits = want.storage_offset.size() == saved->size.size() && want.global_shape.size() == saved->size.size();
      for (std::size_t d = 0; fits && d < saved->size.size(); ++d)
        fits = want.storage_offset[d] >= 0 && want.storage_offset[d] + want.global_shape[d] <= saved->size[d];
      if (!fits) {
        problem(fqn, "'" + fqn + "' of shape " + describe_shape(want.global_shape) + " at offset " +
                         describe_shape(want.storage_offset) + " does not fit its global shape " +
                         describe_shape(saved->size) + " in the checkpoint");
        continue;
      }
      for (std::size_t d = 0; d < storage_box.offsets.size() && d < want.storage_offset.size(); ++d)
        storage_box.offsets[d] += want.storage_offset[d];
    }
    bool inside = storage_box.offsets.size() == saved->size.size() && storage_box.sizes.size() == saved->size.size();
    for (std::size_t d = 0; inside && d < saved->size.size(); ++d)
      inside = storage_box.offsets[d] >= 0 && storage_box.sizes[d] >= 0 &&
               storage_box.offsets[d] + storage_box.sizes[d] <= saved->size[d];
    if (!inside) {
      problems.push_back("the block " + describe_box(storage_box) + " of '" + fqn + "' lies outside its global shape " +
                         describe_shape(saved->size));
      continue;
    }
    std::vector<std::size_t> sources;
    std::int64_t covered = 0;
    const auto& chunks = saved->chunks;
    if (chunks.size() == 1 && chunks[0].sizes == saved->size && !saved->size.empty() &&
        std::all_of(chunks[0].offsets.begin(), chunks[0].offsets.end(), [](std::int64_t o) { return o == 0; })) {
      // Saved whole (most tensors): the block, inside it, is all that chunk's.
      covered = volume(storage_box.sizes);
      if (covered > 0) sources.push_back(0);
    } else {
      auto index = indexes.find(fqn);
      if (index == indexes.end()) {
        // Checked once per tensor, on every load: the reads copy each saved
        // chunk's part of a block, so chunks that overlap (their volumes may
        // still add up) leave the elements no chunk covers unread. With no
        // overlap, the sum below is exact: every element of the block is
        // covered once. (Not a tiling of `saved->size`: a custom planner may
        // plan against a view of the metadata with a smaller shape.)
        if (const auto overlap = find_overlap(fqn, saved->chunks))
          throw FormatError("h5dcp: " + *overlap + ": the checkpoint's chunk attributes are damaged");
        index = indexes.emplace(fqn, ChunkIndex(saved->chunks)).first;
      }
      covered = index->second.overlapping_chunks(storage_box, sources);
    }
    if (covered != volume(storage_box.sizes))
      throw FormatError("h5dcp: the saved chunks of '" + fqn + "' do not cover the block " + describe_box(storage_box) +
                        ": the checkpoint's chunk attributes are damaged");
    plan.items.push_back(ReadItem{ReadItemType::Tensor, want.dest_index, Shape(want.box.offsets.size(), 0), fqn,
                                  storage_box.offsets, storage_box.sizes, saved->properties.dtype, std::move(sources)});
  }
  if (!missing.empty() && strict) {
    std::string keys;
    for (const auto& k : missing) keys += (keys.empty() ? "'" : ", '") + k + "'";
    problems.insert(problems.begin(), "missing from the checkpoint: " + keys +
                                          " (LoadOptions::strict = false loads the rest and reports them)");
  }
  if (!problems.empty()) {
    std::string message = "h5dcp: cannot load:";
    for (const auto& p : problems) message += "\n    " + p;
    throw UsageError(message);
  }
  plan.missing.assign(missing.begin(), missing.end());
  for (const auto& [fqn, storage] : metadata.state_dict_metadata)
    if (requested.count(fqn) == 0) plan.unexpected.push_back(fqn);
  return plan;
}

}  // namespace h5dcp::detail
