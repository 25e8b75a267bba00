// checkpoint_to_safetensors(): a checkpoint's tensors as safetensors, written
// in parallel.
//   export:plan     broadcast   the coordinator reads the metadata, selects and
//                               names the tensors, lays out the shards, and
//                               creates them under temporary names with their
//                               headers and their space reserved
//   export:write    all_gather  every rank reads its blocks from the checkpoint
//                               (checksums checked) and pwrites them at their
//                               offsets, then fsyncs what it wrote
//   export:publish  broadcast   the coordinator writes the index (sharded),
//                               fsyncs and renames into place (a sharded
//                               export's directory is exchanged with an
//                               earlier one in one step where the file
//                               system can)
// On failure the coordinator removes the temporary files; an existing
// destination is untouched until the new one is complete.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "api/checkpoint_session.hpp"
#include "base/byte_codec.hpp"
#include "base/key_escape.hpp"
#include "comm/comm.hpp"
#include "formats/safetensors_header.hpp"
#include "formats/torch_save_index.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/safetensors.hpp"
#include "h5dcp/state_dict.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/hdf5_access.hpp"
#include "interop/shared/export_files.hpp"
#include "plan/row_split.hpp"
#include "storage/directory_publish.hpp"
#include "storage/durable_file.hpp"
#include "storage/file_descriptor.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp {
namespace {

using detail::ByteReader;
using detail::Bytes;
using detail::Shape;

constexpr char kMetadataKey[] = "__metadata__";
constexpr char kIndexName[] = "model.safetensors.index.json";

struct Entry {
  std::string fqn;
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  std::uint32_t shard = 0;
  std::uint64_t offset = 0;  ///< of its first byte in its shard file
};

}  // namespace
H5DCP_MESSAGE_FIELDS(Entry, m.fqn, m.name, m.dtype, m.shape, m.shard, m.offset);
namespace {

struct Layout {
  std::vector<Entry> entries;
  std::vector<std::string> temporary_files;  ///< one per shard
  std::vector<std::string> final_names;      ///< the shards' file names (a single file: dst itself)
  std::string temporary_directory;           ///< sharded: the directory renamed into place
  std::vector<std::string> skipped_values;
  std::int64_t bytes = 0;
};

}  // namespace
H5DCP_MESSAGE_FIELDS(Layout, m.entries, m.temporary_files, m.final_names, m.skipped_values, m.temporary_directory,
                     m.bytes);
namespace {

std::int64_t bytes_of(const Entry& e) {
  return detail::volume(e.shape) * static_cast<std::int64_t>(dtype_size(e.dtype));
}

bool under(const std::string& fqn, const std::string& group) {
  return group.empty() || fqn == group ||
         (fqn.size() > group.size() && fqn.compare(0, group.size(), group) == 0 && fqn[group.size()] == '/');
}

std::string trimmed(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  while (!s.empty() && s.front() == '/') s.erase(0, 1);
  return s;
}

// The safetensors name of `fqn` below `prefix`: its keys, unescaped, joined by '/'.
std::string name_of(const std::string& fqn, const std::string& prefix) {
  const auto relative = prefix.empty() ? fqn : fqn.substr(prefix.size() + 1);
  const auto keys = path_of(relative);
  std::string name;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].find('/') != std::string::npos)
      throw UsageError("h5dcp: tensor '" + fqn + "' has the key '" + detail::printable_key(keys[i]) +
                       "', which holds '/': safetensors names join keys with '/', so it would not come back the same");
    if (i > 0) name += '/';
    name += keys[i];
  }
  return name;
}

std::string child(const std::string& dir, const std::string& name) {
  std::string path = dir;
  path += '/';
  path += name;
  return path;
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string shard_name(std::size_t k, std::size_t n) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return buffer;
}

void remove_temporaries(const Layout& layout) noexcept {
  for (const auto& f : layout.temporary_files) detail::remove_quietly(f);
  if (!layout.temporary_directory.empty()) {
    detail::remove_quietly(layout.temporary_directory + "/" + kIndexName);
    ::rmdir(layout.temporary_directory.c_str());
  }
}

// The coordinator's plan: selection, names, shards, headers; the files are
// created with their headers and their space reserved.
Layout plan_export(const std::string& src, const std::string& dst, const CheckpointToSafetensorsOptions& options) {
  detail::CheckpointIndex index;
  {
    detail::Hdf5Access access;
    index = detail::read_container_index(src);
  }
  const auto prefix = trimmed(options.prefix);
  std::vector<std::string> keys;
  for (const auto& k : options.keys) keys.push_back(trimmed(k));
  std::vector<bool> key_used(keys.size(), false);
  auto selected = [&](const std::string& fqn) {
    if (!under(fqn, prefix) || fqn == prefix) return false;
    if (keys.empty()) return true;
    bool any = false;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (under(fqn, keys[i])) any = key_used[i] = true;
    return any;
  };

  Layout layout;
  std::map<std::string, std::string> metadata;
  const auto metadata_group = prefix.empty() ? std::string(kMetadataKey) : prefix + "/" + kMetadataKey;
  std::vector<Entry> entries;
  for (const auto& [fqn, storage] : index.metadata.state_dict_metadata) {
    if (const auto* value = std::get_if<BytesStorageMetadata>(&storage)) {
      const auto slash = fqn.rfind('/');
      if (value->encoding == "str" && slash != std::string::npos && fqn.substr(0, slash) == metadata_group) {
        metadata[detail::unescape_link_name(fqn.substr(slash + 1))] = index.values.at(fqn);
        continue;
      }
      if (selected(fqn)) layout.skipped_values.push_back(fqn);
      continue;
    }
    if (!selected(fqn)) continue;
    const auto& t = std::get<TensorStorageMetadata>(storage);
    if (!detail::safetensors_dtype_name(t.properties.dtype))
      throw UsageError("h5dcp: tensor '" + fqn + "' is " + std::string(dtype_name(t.properties.dtype)) +
                       ", which safetensors has no dtype for (complex32 and complex128): leave it out with --key "
                       "or --prefix");
    entries.push_back(Entry{fqn, name_of(fqn, prefix), t.properties.dtype, t.size, 0, 0});
  }
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (!key_used[i]) throw UsageError("h5dcp: '" + src + "' has no tensor at or under '" + keys[i] + "'");
  if (entries.empty())
    throw UsageError("h5dcp: '" + src + "' has no tensor" + (prefix.empty() ? "" : " under '" + prefix + "'") +
                     " to export");
  for (const auto& [k, v] : options.metadata) metadata[k] = v;

  // Shards: in fqn order, a new one when the next tensor would overflow it.
  std::vector<std::int64_t> shard_bytes{0};
  for (auto& e : entries) {
    const auto n = bytes_of(e);
    if (options.max_shard_size > 0 && shard_bytes.back() > 0 && shard_bytes.back() + n > options.max_shard_size)
      shard_bytes.push_back(0);
    e.shard = static_cast<std::uint32_t>(shard_bytes.size() - 1);
    e.offset = static_cast<std::uint64_t>(shard_bytes.back());
    shard_bytes.back() += n;
    layout.bytes += n;
  }
  const bool sharded = options.max_shard_size > 0;
  struct stat existing {};
  if (sharded && ::stat(dst.c_str(), &existing) == 0 && !S_ISDIR(existing.st_mode))
    throw UsageError("h5dcp: '" + dst +
                     "' exists and is not a directory: a sharded export (max_shard_size) writes a "
                     "directory");
  if (!sharded && ::stat(dst.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode))
    throw UsageError("h5dcp: '" + dst + "' is a directory: an export without max_shard_size writes one file");
  try {
    if (sharded) {
      layout.temporary_directory = detail::temporary_sibling(dst);
      if (::mkdir(layout.temporary_directory.c_str(), 0777) != 0)
        throw IoError("h5dcp: creating '" + layout.temporary_directory + "' failed: " + std::strerror(errno));
    }
    for (std::size_t k = 0; k < shard_bytes.size(); ++k) {
      std::vector<detail::SafetensorsTensor> tensors;
      for (auto& e : entries) {
        if (e.shard != k) continue;
        tensors.push_back({e.name, e.dtype, e.shape, e.offset, e.offset + static_cast<std::uint64_t>(bytes_of(e))});
      }
      const auto header = detail::compose_safetensors_header(tensors, metadata);
      for (auto& e : entries)
        if (e.shard == k) e.offset += header.size();
      const auto name = sharded ? shard_name(k, shard_bytes.size()) : base_name(dst);
      const auto path = sharded ? layout.temporary_directory + "/" + name : detail::temporary_sibling(dst);
      layout.final_names.push_back(name);
      layout.temporary_files.push_back(path);
      auto fd = detail::FileDescriptor::open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
      detail::reserve_space(path, static_cast<std::int64_t>(header.size()) + shard_bytes[k]);
      if (const int error = detail::pwrite_fully(fd.get(), header.data(), header.size(), 0))
        throw IoError("h5dcp: writing '" + path + "' failed: " + std::strerror(error));
      if (::ftruncate(fd.get(), static_cast<off_t>(header.size() + static_cast<std::size_t>(shard_bytes[k]))) != 0)
        throw IoError("h5dcp: sizing '" + path + "' failed: " + std::strerror(errno));
    }
  } catch (...) {
    remove_temporaries(layout);
    throw;
  }
  layout.entries = std::move(entries);
  return layout;
}

// The pieces this rank writes (plan/row_split.hpp).
std::vector<detail::RowPiece> pieces_of(const Layout& layout, std::int64_t split_min_bytes, int rank, int size) {
  std::vector<detail::RowSplitTensor> tensors;
  tensors.reserve(layout.entries.size());
  for (const auto& e : layout.entries) tensors.push_back({e.shape, static_cast<std::int64_t>(dtype_size(e.dtype))});
  auto pieces = detail::split_rows(tensors, split_min_bytes, size);
  pieces.erase(std::remove_if(pieces.begin(), pieces.end(), [&](const detail::RowPiece& p) { return p.rank != rank; }),
               pieces.end());
  return pieces;
}

void write_pieces(const std::string& src, const Layout& layout, const std::vector<detail::RowPiece>& pieces,
                  const ProgressCallback& progress) {
  if (pieces.empty()) return;
  detail::ExportSource source(src);
  std::vector<detail::FileDescriptor> files(layout.temporary_files.size());
  detail::PiecesProgress done(progress, pieces, layout.entries);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto& p = pieces[i];
    const auto& e = layout.entries[p.tensor];
    auto& fd = files[e.shard];
    if (!fd) fd = detail::FileDescriptor::open(layout.temporary_files[e.shard], O_WRONLY);
    const auto element = static_cast<std::int64_t>(dtype_size(e.dtype));
    std::vector<std::int64_t> inner(e.shape.size(), element);  // bytes of one step in each dimension
    for (std::size_t d = e.shape.size(); d-- > 1;) inner[d - 1] = inner[d] * e.shape[d];
    source.read_in_pieces(
        e.fqn, detail::rows_box(e.shape, p), [&](const ChunkStorageMetadata& box, const at::Tensor& block) {
          std::uint64_t at = e.offset;
          for (std::size_t d = 0; d < box.offsets.size(); ++d)
            at += static_cast<std::uint64_t>(box.offsets[d] * inner[d]);
          if (const int error =
                  detail::pwrite_fully(fd.get(), block.data_ptr(), static_cast<std::size_t>(block.nbytes()), at))
            throw IoError("h5dcp: writing '" + layout.temporary_files[e.shard] + "' failed: " + std::strerror(error));
        });
    done.piece_done(i, e.fqn);
  }
  for (std::size_t k = 0; k < files.size(); ++k)
    if (files[k] && ::fsync(files[k].get()) != 0)
      throw IoError("h5dcp: fsync of '" + layout.temporary_files[k] + "' failed: " + std::strerror(errno));
  source.close();
}

std::vector<std::string> publish(const std::string& dst, const Layout& layout) {
  if (layout.temporary_directory.empty()) {
    detail::publish_by_rename(layout.temporary_files.front(), dst);
    return {dst};
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& e : layout.entries) weight_map[e.name] = layout.final_names[e.shard];
  const auto index_text = detail::compose_safetensors_index(weight_map, static_cast<std::uint64_t>(layout.bytes));
  detail::write_new_file_synced(layout.temporary_directory + "/" + kIndexName, index_text);
  for (const auto& f : layout.temporary_files) detail::fsync_file(f);
  detail::fsync_file(layout.temporary_directory);
  detail::publish_directory(layout.temporary_directory, dst, [](const std::string& name) {
    return name == kIndexName || (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0);
  });
  std::vector<std::string> files;
  files.reserve(layout.final_names.size() + 1);
  for (const auto& name : layout.final_names) files.push_back(child(dst, name));
  files.push_back(child(dst, kIndexName));
  return files;
}

}  // namespace

SafetensorsExport checkpoint_to_safetensors(const std::string& src, const std::string& dst,
                                            const CheckpointToSafetensorsOptions& options, MPI_Comm comm) {
  detail::Comm c(comm, options.coordinator);
  c.require_same("safetensors export", {{"source", src},
                                        {"destination", dst},
                                        {"prefix", options.prefix},
                                        {"max_shard_size", std::to_string(options.max_shard_size)}});
  c.set_timeout(detail::resolve_timeout(options.timeout_seconds));
  const auto layout = ByteReader::decode<Layout>(
      c.broadcast("export:plan", [&] { return detail::encode_message(plan_export(src, dst, options)); }));
  SafetensorsExport result;
  try {
    c.all_gather("export:write", [&] {
      write_pieces(src, layout, pieces_of(layout, options.split_min_bytes, c.rank(), c.size()), options.progress);
      return Bytes();
    });
    result.files = ByteReader::decode<std::vector<std::string>>(
        c.broadcast("export:publish", [&] { return detail::encode_message(publish(dst, layout)); }));
  } catch (...) {
    if (c.is_coordinator()) remove_temporaries(layout);
    throw;
  }
  result.tensors = static_cast<std::int64_t>(layout.entries.size());
  result.bytes = layout.bytes;
  result.skipped_values = layout.skipped_values;
  return result;
}

}  // namespace h5dcp
