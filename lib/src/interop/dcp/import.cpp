// dcp_to_checkpoint(): a PyTorch DCP checkpoint directory as a source of the
// indexed conversion (interop/shared/indexed_convert.hpp). The coordinator reads
// .metadata and, for every item, the directory of its torch.save archive:
// each chunk becomes a view of a storage at a known offset of a .distcp
// file, each value its decoded content. The ranks then read their blocks
// straight from the .distcp files.

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "base/key_escape.hpp"
#include "formats/dcp_metadata.hpp"
#include "formats/torch_save_index.hpp"
#include "h5dcp/dcp.hpp"
#include "h5dcp/error.hpp"
#include "interop/shared/indexed_convert.hpp"
#include "interop/shared/source_files.hpp"
#include "interop/torch_save/archive.hpp"

namespace h5dcp {
namespace {

using detail::DcpItem;
using detail::DcpMetadata;
using detail::DcpPathStep;
using detail::TorchSaveIndex;

// hostile-input limit: .metadata is read whole; PyTorch writes about 300 bytes per chunk.
constexpr std::uint64_t kMaxMetadataBytes = std::uint64_t{1} << 30;

class DcpIndexer {
 public:
  DcpIndexer(const std::string& src, const DcpMetadata& md) : src_(src), md_(md) {}

  TorchSaveIndex run() {
    for (const auto& [key, t] : md_.tensors) {
      const auto fqn = place(key);
      detail::TorchChunkedTensor chunked{t.dtype, t.size, {}};
      for (const auto& chunk : t.chunks) chunked.chunks.push_back({chunk.box, chunk_view(key, t.dtype, chunk)});
      index_.chunked.emplace(fqn, std::move(chunked));
    }
    for (const auto& [key, item] : md_.values) add_value(key, place(key), item);
    fill_list_holes();
    return std::move(index_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw FormatError("h5dcp: the DCP checkpoint '" + src_ + "' cannot be converted: " + message);
  }

  [[noreturn]] void conflicting_containers(const std::string& key, const std::string& fqn, bool as_list) const {
    std::string message = "'" + key + "' goes through '";
    message += fqn;
    message += as_list ? "' as a list, and other keys as a dict" : "' as a dict, and other keys as a list";
    fail(message);
  }

  // The checkpoint fqn of DCP key `key`, along its planner_data path; the
  // containers on the way are registered (a dict key, or a list index).
  std::string place(const std::string& key) {
    const auto it = md_.paths.find(key);
    const std::vector<DcpPathStep> path =
        it != md_.paths.end() ? it->second : std::vector<DcpPathStep>{{false, key, 0}};
    std::string fqn;
    for (std::size_t i = 0; i < path.size(); ++i) {
      const auto& step = path[i];
      if (i > 0) {
        const auto kind = step.is_index ? ContainerKind::List : ContainerKind::Dict;
        const auto [c, fresh] = index_.containers.emplace(fqn, kind);
        if (!fresh && c->second != kind) conflicting_containers(key, fqn, step.is_index);
        if (step.is_index) list_items_[fqn].insert(step.index);
        fqn += '/';
      }
      fqn += step.is_index ? std::to_string(step.index) : detail::escape_link_name(step.key);
    }
    if (!leaves_.insert(fqn).second) fail("two keys are stored at '" + fqn + "'");
    return fqn;
  }

  // DCP keeps no entry for an empty dict: a list index missing between
  // others was one.
  void fill_list_holes() {
    for (const auto& [list, items] : list_items_) {
      const auto last = *items.rbegin();
      for (std::int64_t i = 0; i < last; ++i) {
        if (items.count(i) != 0) continue;
        const auto fqn = list + "/" + std::to_string(i);
        if (leaves_.count(fqn) == 0) index_.containers.emplace(fqn, ContainerKind::Dict);
      }
    }
    for (const auto& [fqn, kind] : index_.containers)
      if (leaves_.count(fqn) != 0) fail("'" + fqn + "' is both a value and a container of others");
  }

  std::uint32_t file_of(const std::string& relative_path) {
    const auto it = file_numbers_.find(relative_path);
    if (it != file_numbers_.end()) return it->second;
    const auto path = src_ + "/" + relative_path;
    detail::require_inside(src_, path, "a DCP data file");
    const auto fd = detail::open_input_file(path, "a DCP data file");
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0)
      throw IoError("h5dcp: the DCP data file '" + path + "' cannot be read: " + std::strerror(errno));
    const auto number = static_cast<std::uint32_t>(index_.files.size());
    index_.files.push_back(path);
    index_.file_sizes.push_back(static_cast<std::uint64_t>(info.st_size));
    file_numbers_.emplace(relative_path, number);
    return number;
  }

  static std::string describe(const std::string& key, const DcpItem& item) {
    return "'" + key + "' (" + std::to_string(item.length) + " bytes at " + std::to_string(item.offset) + " of " +
           item.relative_path + ")";
  }

  detail::TorchSaveReader open(const std::string& key, const DcpItem& item) {
    file_of(item.relative_path);
    if (item.length == 0) fail(describe(key, item) + " is empty");
    return detail::TorchSaveReader(src_ + "/" + item.relative_path, {item.offset, item.length});
  }

  // A chunk's item is a torch.save archive of one tensor, of the chunk's dtype and size.
  detail::TorchTensorInfo chunk_view(const std::string& key, DType dtype, const detail::DcpChunk& chunk) {
    const auto what = describe(key, chunk.item);
    auto item = open(key, chunk.item).read_object_index("t", what);
    const auto t = item.tensors.find("t");
    if (t == item.tensors.end()) fail("the item of a chunk of " + what + " is not a tensor");
    auto view = t->second;
    if (view.dtype != dtype || view.sizes != chunk.box.sizes)
      fail("the item of the chunk " + detail::describe_box(chunk.box) + " of " + what + " is a " +
           std::string(dtype_name(view.dtype)) + " tensor of size " + detail::describe_shape(view.sizes) +
           ", and .metadata says " + std::string(dtype_name(dtype)) + " of size " +
           detail::describe_shape(chunk.box.sizes));
    // Storage keys are per archive: named apart by the item's place.
    auto storage = item.storages.at(view.storage);
    storage.file = file_of(chunk.item.relative_path);
    view.storage = chunk.item.relative_path + "@" + std::to_string(chunk.item.offset) + "/" + view.storage;
    index_.storages.emplace(view.storage, storage);
    return view;
  }

  // A value's item is a torch.save archive of the value, which may be a list
  // or dict of values (DCP saves a list without tensors as one value).
  void add_value(const std::string& key, const std::string& fqn, const DcpItem& where) {
    const auto what = describe(key, where);
    auto item = open(key, where).read_object_index(fqn, what);
    if (!item.tensors.empty()) fail("the value " + what + " holds a tensor; DCP stores tensors as chunks");
    if (item.containers.count(fqn) != 0) leaves_.erase(fqn);  // a list or dict of values
    for (auto& [name, kind] : item.containers) index_.containers.emplace(name, kind);
    for (auto& [name, value] : item.values) index_.values.emplace(name, std::move(value));
  }

  const std::string& src_;
  const DcpMetadata& md_;
  TorchSaveIndex index_;
  std::map<std::string, std::uint32_t> file_numbers_;
  std::map<std::string, std::set<std::int64_t>> list_items_;  // list fqn -> indices DCP names
  std::set<std::string> leaves_;                              // fqns of tensors and values
};

}  // namespace

SaveResult dcp_to_checkpoint(const std::string& src, const std::string& dst, const DcpToCheckpointOptions& options,
                             MPI_Comm comm) {
  return detail::convert_index_to_checkpoint(
      [&] {
        const auto path = src + "/.metadata";
        detail::require_inside(src, path, "a DCP .metadata");
        const auto pickle = detail::read_small_file(path, kMaxMetadataBytes, "a DCP .metadata");
        const auto md = detail::read_dcp_metadata(pickle, "'" + path + "'");
        return detail::encode(DcpIndexer(src, md).run());
      },
      src, dst, options, comm);
}

}  // namespace h5dcp
