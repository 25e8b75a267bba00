// checkpoint_to_dcp(): a checkpoint as a PyTorch DCP checkpoint directory,
// written in parallel.
//   dcp:plan     broadcast   the coordinator reads the metadata, walks the
//                            state dict as DCP's flatten_state_dict does (keys
//                            joined by '.', lists without tensors or dicts as
//                            one value), pickles the values, and creates the
//                            directory under a temporary name
//   dcp:write    all_gather  every rank reads its blocks from the checkpoint
//                            (checksums checked) and appends each as a
//                            torch.save archive to its own __<rank>_0.distcp
//                            (the coordinator also the values), then fsyncs
//   dcp:publish  broadcast   the coordinator writes .metadata from every
//                            rank's items, fsyncs and renames into place
//                            (exchanged with an earlier export in one step
//                            where the file system can)
// On failure the coordinator removes the temporary directory; an existing
// destination is untouched until the new one is complete.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "api/checkpoint_session.hpp"
#include "base/byte_codec.hpp"
#include "base/key_escape.hpp"
#include "comm/comm.hpp"
#include "formats/dcp_metadata.hpp"
#include "formats/pickle_writer.hpp"
#include "formats/torch_save_index.hpp"
#include "h5dcp/dcp.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/state_dict.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/hdf5_access.hpp"
#include "interop/shared/export_files.hpp"
#include "interop/torch_save/archive.hpp"
#include "interop/torch_save/tree.hpp"
#include "plan/codec.hpp"
#include "plan/row_split.hpp"
#include "storage/directory_publish.hpp"
#include "storage/durable_file.hpp"
#include "storage/file_descriptor.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {
namespace {

using detail::ByteReader;
using detail::Bytes;
using detail::DcpPathStep;
using detail::Shape;

constexpr char kMetadataName[] = ".metadata";

struct ExportTensor {
  std::string key;  ///< DCP's key ("model.layer.weight")
  std::string fqn;  ///< the checkpoint's
  DType dtype = DType::Float32;
  Shape shape;
};

struct ExportValue {
  std::string key;
  std::string pickle;  ///< the value's data.pkl
};

struct ExportPlan {
  std::vector<ExportTensor> tensors;
  std::vector<ExportValue> values;
  std::map<std::string, std::vector<DcpPathStep>> paths;
  std::string temporary_directory;
};

}  // namespace
H5DCP_MESSAGE_FIELDS(DcpPathStep, m.is_index, m.key, m.index);
H5DCP_MESSAGE_FIELDS(ExportTensor, m.key, m.fqn, m.dtype, m.shape);
H5DCP_MESSAGE_FIELDS(ExportValue, m.key, m.pickle);
H5DCP_MESSAGE_FIELDS(ExportPlan, m.tensors, m.values, m.paths, m.temporary_directory);
namespace {

// One item a rank wrote: a tensor's chunk (box) or a value (no box).
struct WrittenItem {
  std::string key;
  bool tensor = false;
  ChunkStorageMetadata box;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

}  // namespace
H5DCP_MESSAGE_FIELDS(WrittenItem, m.key, m.tensor, m.box, m.offset, m.length);
namespace {

std::string data_file_name(int rank) { return "__" + std::to_string(rank) + "_0.distcp"; }

bool is_ours(const std::string& name) {
  return name == kMetadataName || (name.size() > 7 && name.compare(name.size() - 7, 7, ".distcp") == 0);
}

void remove_directory(const std::string& dir) noexcept {
  if (dir.empty()) return;
  detail::retire_directory(dir, is_ours);
}

// --- dcp:plan -------------------------------------------------------------------

// The state dict walked as DCP's traverse_state_dict walks it.
class PlanWalker {
 public:
  PlanWalker(ExportPlan& plan, const Metadata& metadata) : plan_(plan), metadata_(metadata) {}

  void walk(const StateValue& value, std::vector<DcpPathStep>& path, const std::string& fqn) {
    if (const auto* dict = std::get_if<StateDict>(&value)) {
      for (const auto& [key, child] : *dict) {
        path.push_back({false, key, 0});
        walk(child, path, join(fqn, detail::escape_link_name(key)));
        path.pop_back();
      }
      return;
    }
    if (const auto* list = std::get_if<StateList>(&value); list != nullptr && !is_terminal(*list)) {
      for (std::size_t i = 0; i < list->size(); ++i) {
        path.push_back({true, {}, static_cast<std::int64_t>(i)});
        walk((*list)[i], path, join(fqn, std::to_string(i)));
        path.pop_back();
      }
      return;
    }
    const auto key = key_of(path);
    if (!keys_.insert(key).second)
      throw UsageError("h5dcp: two entries of the checkpoint have the DCP key '" + key +
                       "' (DCP joins keys with '.'): '" + fqn + "' is one");
    plan_.paths.emplace(key, path);
    if (value.is_tensor()) {
      const auto& t = find_tensor_metadata(metadata_, fqn);
      plan_.tensors.push_back({key, fqn, t.properties.dtype, t.size});
      return;
    }
    const auto object =
        detail::pickle_value(value, fqn, [](const std::string& at, const at::Tensor&) -> detail::pickle::ObjectPtr {
          throw UsageError("h5dcp: a DCP value holds the tensor '" + at + "'");
        });
    plan_.values.push_back({key, detail::pickle::pickle(*object)});
  }

 private:
  static std::string join(const std::string& parent, const std::string& name) {
    return parent.empty() ? name : parent + "/" + name;
  }
  static std::string key_of(const std::vector<DcpPathStep>& path) {
    std::string key;
    for (std::size_t i = 0; i < path.size(); ++i) {
      if (i > 0) key += '.';
      key += path[i].is_index ? std::to_string(path[i].index) : path[i].key;
    }
    return key;
  }
  // DCP keeps a list whole when it holds no tensor and no dict, at any depth.
  static bool is_terminal(const StateList& list) {
    return std::all_of(list.begin(), list.end(), [](const StateValue& v) {
      if (v.is_tensor() || v.is_sharded() || v.is_dict()) return false;
      const auto* inner = std::get_if<StateList>(&v);
      return inner == nullptr || is_terminal(*inner);
    });
  }

  ExportPlan& plan_;
  const Metadata& metadata_;
  std::set<std::string> keys_;
};

ExportPlan plan_export(const std::string& src, const std::string& dst) {
  detail::CheckpointIndex index;
  {
    detail::Hdf5Access access;
    index = detail::read_container_index(src);
  }
  FlatStateDict flat;
  flat.containers = index.metadata.containers;
  for (const auto& [fqn, storage] : index.metadata.state_dict_metadata) {
    if (const auto* t = std::get_if<TensorStorageMetadata>(&storage)) {
      // A placeholder of the tensor's shape: the walk needs only where it is.
      flat.leaves.emplace(fqn, at::empty({}, at::TensorOptions().dtype(at::kByte)).expand(t->size));
    } else {
      flat.leaves.emplace(
          fqn, detail::decode_value(std::get<BytesStorageMetadata>(storage).encoding, index.values.at(fqn), fqn));
    }
  }
  ExportPlan plan;
  std::vector<DcpPathStep> path;
  PlanWalker(plan, index.metadata).walk(unflatten_state_dict(flat), path, "");
  if (plan.tensors.empty() && plan.values.empty()) throw UsageError("h5dcp: '" + src + "' holds nothing to export");

  struct stat existing {};
  if (::stat(dst.c_str(), &existing) == 0 && !S_ISDIR(existing.st_mode))
    throw UsageError("h5dcp: '" + dst + "' exists and is not a directory: a DCP checkpoint is a directory");
  plan.temporary_directory = detail::temporary_sibling(dst);
  if (::mkdir(plan.temporary_directory.c_str(), 0777) != 0)
    throw IoError("h5dcp: creating '" + plan.temporary_directory + "' failed: " + std::strerror(errno));
  return plan;
}

// --- dcp:write ------------------------------------------------------------------

class DataFile {
 public:
  explicit DataFile(std::string path) : path_(std::move(path)) {}

  // Appends one torch.save archive of these records; returns where it lies.
  std::pair<std::uint64_t, std::uint64_t> append(const std::vector<detail::ArchiveRecord>& records) {
    if (!fd_) fd_ = detail::FileDescriptor::open(path_, O_WRONLY | O_CREAT | O_EXCL, 0644);
    const auto offset = end_;
    end_ += detail::append_torch_save_archive(fd_.get(), path_, records);
    return {offset, end_ - offset};
  }

  // A torch.save archive of one contiguous tensor, as torch.save(tensor) writes it.
  std::pair<std::uint64_t, std::uint64_t> append_tensor(const at::Tensor& block, DType dtype) {
    auto storage = std::make_shared<detail::pickle::Storage>();
    storage->key = "0";
    storage->dtype = dtype;
    storage->numel = block.numel();
    const auto sizes = Shape(block.sizes().begin(), block.sizes().end());
    const auto pickle = detail::pickle::pickle(
        *detail::pickle::Object::tensor_of({storage, 0, sizes, detail::contiguous_strides(sizes)}));
    return append({{"data.pkl", pickle.data(), pickle.size()},
                   {"data/0", block.data_ptr(), static_cast<std::size_t>(block.nbytes())}});
  }

  void sync() {
    if (fd_ && ::fsync(fd_.get()) != 0)
      throw IoError("h5dcp: fsync of '" + path_ + "' failed: " + std::strerror(errno));
  }

 private:
  std::string path_;
  detail::FileDescriptor fd_;
  std::uint64_t end_ = 0;
};

std::vector<WrittenItem> write_items(const std::string& src, const ExportPlan& plan, const detail::Comm& c,
                                     std::int64_t split_min_bytes, const ProgressCallback& progress) {
  std::vector<detail::RowSplitTensor> split;
  split.reserve(plan.tensors.size());
  for (const auto& t : plan.tensors) split.push_back({t.shape, static_cast<std::int64_t>(dtype_size(t.dtype))});
  auto pieces = detail::split_rows(split, split_min_bytes, c.size());
  pieces.erase(
      std::remove_if(pieces.begin(), pieces.end(), [&](const detail::RowPiece& p) { return p.rank != c.rank(); }),
      pieces.end());
  std::vector<std::size_t> empty_tensors;  // one chunk each, as DCP saves them; the coordinator's
  if (c.is_coordinator())
    for (std::size_t i = 0; i < plan.tensors.size(); ++i)
      if (detail::volume(plan.tensors[i].shape) == 0) empty_tensors.push_back(i);
  const bool has_values = c.is_coordinator() && !plan.values.empty();
  std::vector<WrittenItem> items;
  if (pieces.empty() && empty_tensors.empty() && !has_values) return items;

  DataFile file(plan.temporary_directory + "/" + data_file_name(c.rank()));
  for (const auto i : empty_tensors) {
    const auto& t = plan.tensors[i];
    const auto empty = at::empty(t.shape, at::TensorOptions().dtype(detail::to_scalar_type(t.dtype)));
    const auto [offset, length] = file.append_tensor(empty, t.dtype);
    items.push_back({t.key, true, {Shape(t.shape.size(), 0), t.shape}, offset, length});
  }
  if (!pieces.empty()) {
    // Larger blocks are written as several DCP chunks of whole rows, each
    // read, written and dropped in turn (ExportSource::read_in_pieces).
    detail::ExportSource source(src);
    detail::PiecesProgress done(progress, pieces, plan.tensors);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto& p = pieces[i];
      const auto& t = plan.tensors[p.tensor];
      source.read_in_pieces(t.fqn, detail::rows_box(t.shape, p),
                            [&](const ChunkStorageMetadata& box, const at::Tensor& block) {
                              const auto [offset, length] = file.append_tensor(block, t.dtype);
                              items.push_back({t.key, true, box, offset, length});
                            });
      done.piece_done(i, t.fqn);
    }
    source.close();
  }
  if (has_values)
    for (const auto& v : plan.values) {
      const auto [offset, length] = file.append({{"data.pkl", v.pickle.data(), v.pickle.size()}});
      items.push_back({v.key, false, {}, offset, length});
    }
  file.sync();
  return items;
}

// --- dcp:publish ----------------------------------------------------------------

// `written`: every rank's items, in rank order.
void publish(const std::string& dst, const ExportPlan& plan, std::vector<std::vector<WrittenItem>> written) {
  detail::DcpMetadata md;
  md.version = detail::kDcpMetadataVersion;
  md.paths = plan.paths;
  for (const auto& t : plan.tensors) md.tensors[t.key] = detail::DcpTensor{t.dtype, t.shape, {}};
  for (std::size_t rank = 0; rank < written.size(); ++rank)
    for (auto& item : written[rank]) {
      detail::DcpItem where{data_file_name(static_cast<int>(rank)), item.offset, item.length};
      if (item.tensor)
        md.tensors.at(item.key).chunks.push_back({std::move(item.box), std::move(where)});
      else
        md.values.emplace(item.key, std::move(where));
    }
  for (auto& [key, t] : md.tensors)
    std::sort(t.chunks.begin(), t.chunks.end(),
              [](const detail::DcpChunk& a, const detail::DcpChunk& b) { return a.box.offsets < b.box.offsets; });
  detail::write_new_file_synced(plan.temporary_directory + "/" + kMetadataName, detail::write_dcp_metadata(md));
  detail::fsync_file(plan.temporary_directory);
  detail::publish_directory(plan.temporary_directory, dst, is_ours);
}

}  // namespace

DcpExport checkpoint_to_dcp(const std::string& src, const std::string& dst_path, const CheckpointToDcpOptions& options,
                            MPI_Comm comm) {
  auto dst = dst_path;
  while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
  detail::Comm c(comm, options.coordinator);
  c.require_same("DCP export", {{"source", src}, {"destination", dst}});
  c.set_timeout(detail::resolve_timeout(options.timeout_seconds));
  const auto plan = ByteReader::decode<ExportPlan>(
      c.broadcast("dcp:plan", [&] { return detail::encode_message(plan_export(src, dst)); }));
  DcpExport result;
  try {
    std::vector<std::vector<WrittenItem>> written;
    for (const auto& bytes : c.all_gather("dcp:write", [&] {
           return detail::encode_message(write_items(src, plan, c, options.split_min_bytes, options.progress));
         }))
      written.push_back(ByteReader::decode<std::vector<WrittenItem>>(bytes));
    for (const auto& items : written) result.files += items.empty() ? 0 : 1;
    c.broadcast("dcp:publish", [&] {
      publish(dst, plan, std::move(written));
      return Bytes();
    });
  } catch (...) {
    if (c.is_coordinator()) remove_directory(plan.temporary_directory);
    throw;
  }
  for (const auto& t : plan.tensors) {
    result.tensors += 1;
    result.bytes += detail::volume(t.shape) * static_cast<std::int64_t>(dtype_size(t.dtype));
  }
  return result;
}

}  // namespace h5dcp
