// safetensors_to_checkpoint(): safetensors files as a source of the indexed
// conversion (interop/shared/indexed_convert.hpp). The coordinator reads and checks
// every header, maps names to the nested tree (split at '/') and hands the
// index over; the ranks then read their blocks straight from the files.

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "base/key_escape.hpp"
#include "base/utf8.hpp"
#include "formats/safetensors_header.hpp"
#include "formats/safetensors_index.hpp"
#include "formats/torch_save_index.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/safetensors.hpp"
#include "interop/shared/indexed_convert.hpp"
#include "interop/shared/source_files.hpp"

namespace h5dcp {
namespace {

using detail::SafetensorsHeader;
using detail::TorchSaveIndex;

constexpr std::uint64_t kMaxIndexBytes = 100'000'000;  // hostile-input limit: an index is read whole
constexpr char kMetadataKey[] = "__metadata__";

bool is_directory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// stat, not open: opening a FIFO would block.
bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// The source as a list of safetensors files: the file itself, the shards an
// index names, or what a directory holds (an index, else its one file).
// Every file but the one the user named must lie inside its directory.
std::vector<std::string> source_files(const std::string& src, std::map<std::string, std::string>& weight_map) {
  std::string index_path;
  if (is_directory(src)) {
    const auto named = src + "/model.safetensors.index.json";
    if (exists(named)) {
      index_path = named;
      detail::require_inside(src, index_path, "the safetensors index of the directory");
    } else if (exists(src + "/model.safetensors")) {
      detail::require_inside(src, src + "/model.safetensors", "the safetensors file of the directory");
      return {src + "/model.safetensors"};
    } else {
      throw UsageError("h5dcp: the directory '" + src +
                       "' holds neither model.safetensors.index.json nor model.safetensors");
    }
  } else if (ends_with(src, ".json")) {
    index_path = src;
  } else {
    return {src};
  }
  weight_map = detail::parse_safetensors_index(
      detail::read_small_file(index_path, kMaxIndexBytes, "a safetensors index"), index_path);
  std::set<std::string> names;
  for (const auto& [tensor, file] : weight_map) names.insert(file);
  const auto directory = directory_of(index_path) + "/";
  std::vector<std::string> files;
  files.reserve(names.size());
  for (const auto& name : names) {
    files.push_back(directory + name);
    detail::require_inside(directory, files.back(), "a shard its index names");
  }
  if (files.empty()) throw FormatError("h5dcp: '" + index_path + "' names no tensors");
  return files;
}

// The fqn of a safetensors name: its '/'-separated keys, each escaped.
std::string fqn_of_name(const std::string& name, const std::string& what) {
  if (!detail::is_valid_utf8(name) || name.find('\0') != std::string::npos)
    throw FormatError("h5dcp: '" + what + "': tensor name '" + detail::printable_key(name) +
                      "' is not UTF-8 text without NUL");
  // Refused before any container is made: the reader refuses such nesting
  // (kMaxContainerDepth), and a deep name would index depth x length bytes.
  if (const auto depth = detail::key_depth(name); depth > detail::kMaxContainerDepth)
    throw FormatError("h5dcp: '" + what + "': tensor name '" +
                      detail::printable_key(std::string_view(name).substr(0, 80)) + "...' nests " +
                      std::to_string(depth) + " keys deep; h5dcp reads checkpoints nested less than " +
                      std::to_string(detail::kMaxContainerDepth) + " deep");
  std::string fqn;
  std::size_t start = 0;
  while (true) {
    const auto slash = name.find('/', start);
    const auto key = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!fqn.empty() || start > 0) fqn += '/';
    fqn += detail::escape_link_name(key);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return fqn;
}

// The dicts above `fqn`, longest first: one already there has its own
// parents there too, so the work is linear in the keys added.
void add_containers(TorchSaveIndex& index, const std::string& fqn) {
  for (auto slash = fqn.rfind('/'); slash != std::string::npos && slash > 0; slash = fqn.rfind('/', slash - 1))
    if (!index.containers.emplace(fqn.substr(0, slash), ContainerKind::Dict).second) break;
}

}  // namespace

namespace detail {

TorchSaveIndex safetensors_index(const std::string& src) {
  std::map<std::string, std::string> weight_map;
  const auto files = source_files(src, weight_map);
  TorchSaveIndex index;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> file_of_name;
  for (std::uint32_t f = 0; f < files.size(); ++f) {
    const auto header = detail::read_safetensors_header(files[f]);
    if (files.size() > 1 || !weight_map.empty()) {
      index.files.push_back(files[f]);
      index.file_sizes.push_back(header.file_size);
    } else {
      index.file_size = header.file_size;
    }
    for (const auto& [k, v] : header.metadata) metadata.emplace(k, v);  // the first shard's value wins
    for (const auto& t : header.tensors) {
      const auto fqn = fqn_of_name(t.name, files[f]);
      if (!file_of_name.emplace(t.name, files[f]).second)
        throw FormatError("h5dcp: tensor '" + detail::printable_key(t.name) + "' is in both '" + file_of_name[t.name] +
                          "' and '" + files[f] + "'");
      const auto mapped = weight_map.find(t.name);
      if (!weight_map.empty() &&
          (mapped == weight_map.end() || directory_of(files[f]) + "/" + mapped->second != files[f]))
        throw FormatError("h5dcp: '" + files[f] + "' holds tensor '" + detail::printable_key(t.name) +
                          "', which its index does not map to it");
      detail::TorchStorageInfo storage{t.dtype, detail::volume(t.shape), header.data_start + t.begin, f};
      index.storages.emplace(fqn, storage);
      index.tensors.emplace(fqn,
                            detail::TorchTensorInfo{fqn, t.dtype, 0, t.shape, detail::contiguous_strides(t.shape)});
      add_containers(index, fqn);
    }
  }
  for (const auto& [name, file] : weight_map) {
    if (file_of_name.find(name) != file_of_name.end()) continue;
    std::string message = "h5dcp: the index of '" + src + "' maps tensor '";
    message += detail::printable_key(name);
    message += "' to '" + file + "', which does not hold it";
    throw FormatError(message);
  }
  if (!metadata.empty()) {
    index.containers.emplace(kMetadataKey, ContainerKind::Dict);
    for (const auto& [k, v] : metadata) {
      if (!detail::is_valid_utf8(k) || !detail::is_valid_utf8(v) || v.find('\0') != std::string::npos ||
          k.find('\0') != std::string::npos)
        throw FormatError("h5dcp: '" + src + "': __metadata__ '" + detail::printable_key(k) +
                          "' is not UTF-8 text without NUL");
      index.values.emplace(std::string(kMetadataKey) + "/" + detail::escape_link_name(k),
                           detail::TorchValueInfo{"str", v});
      add_containers(index, std::string(kMetadataKey) + "/" + detail::escape_link_name(k));
    }
  }
  // A name that is both a tensor and a dict of others ("a" and "a/b"), or a
  // __metadata__ value and a tensor or dict ("__metadata__/format").
  auto both = [&](const std::string& fqn, const char* what) {
    std::string message = "h5dcp: '" + src + "': '";
    message += fqn;
    message += "' is both ";
    message += what;
    message += " (one name, one meaning)";
    throw FormatError(message);
  };
  for (const auto& [fqn, kind] : index.containers)
    if (index.tensors.count(fqn) != 0) both(fqn, "a tensor and the dict of other tensors' names");
  for (const auto& [fqn, value] : index.values) {
    if (index.tensors.count(fqn) != 0) both(fqn, "a tensor and a __metadata__ value");
    if (index.containers.count(fqn) != 0) both(fqn, "a __metadata__ value and the dict of other tensors' names");
  }
  return index;
}

}  // namespace detail

SaveResult safetensors_to_checkpoint(const std::string& src, const std::string& dst,
                                     const SafetensorsToCheckpointOptions& options, MPI_Comm comm) {
  return detail::convert_index_to_checkpoint([&] { return detail::encode(detail::safetensors_index(src)); }, src, dst,
                                             options, comm);
}

}  // namespace h5dcp
