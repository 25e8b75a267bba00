// verify_checkpoint(): every check a reader relies on, one after the other.
// A check reports problems and never stops the ones after it, except that
// nothing can be checked once the metadata cannot be read.

#include "h5dcp/verify.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "api/local_copy_summary.hpp"
#include "base/checksum.hpp"
#include "base/exception_text.hpp"
#include "base/utf8.hpp"
#include "h5dcp/error.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/hdf5_access.hpp"
#include "plan/checksum_layout.hpp"
#include "plan/chunk_geometry.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {
namespace {

using detail::Shape;

class Verifier {
 public:
  Verifier(const std::string& path, const VerifyOptions& options, VerifyReport& report)
      : path_(path), options_(options), report_(report) {}

  void run() {
    report_.checks = {"metadata", "structure", "tiling", "data", "checksums", "values"};
    try {
      // Tiling is a check of its own below: read the chunks as they are.
      auto file = detail::read_checkpoint_file_index(path_, /*require_exact_tiling=*/false);
      index_ = std::move(file.index);
      if (file.local) report_.local_copy = detail::summarize_local_copy(*file.local, file.owners);
      owners_ = std::move(file.owners);
    } catch (const Error& e) {
      problem("metadata", "", e.what());
      return;
    }
    report_.containers = static_cast<std::int64_t>(index_.metadata.containers.size());
    check_structure();
    check_tensors();
    check_values();
  }

 private:
  void problem(const char* check, const std::string& where, const std::string& message) {
    report_.problems.push_back(VerifyProblem{check, where, message});
  }

  // Every list holds exactly the elements 0..n-1.
  void check_structure() {
    std::map<std::string, std::vector<std::string>> children;
    auto add = [&](const std::string& fqn) {
      const auto slash = fqn.rfind('/');
      children[slash == std::string::npos ? "" : fqn.substr(0, slash)].push_back(
          slash == std::string::npos ? fqn : fqn.substr(slash + 1));
    };
    for (const auto& [fqn, kind] : index_.metadata.containers) add(fqn);
    for (const auto& [fqn, storage] : index_.metadata.state_dict_metadata) add(fqn);
    for (const auto& [fqn, kind] : index_.metadata.containers) {
      if (kind != ContainerKind::List) continue;
      const auto& names = children[fqn];
      std::set<std::string> expected;
      for (std::size_t i = 0; i < names.size(); ++i) expected.insert(std::to_string(i));
      if (std::set<std::string>(names.begin(), names.end()) != expected)
        problem("structure", fqn, "the list's elements are not numbered 0.." + std::to_string(names.size() - 1));
    }
  }

  void check_tensors() {
    std::optional<detail::ContainerReader> reader;
    try {
      reader.emplace(path_, MPI_COMM_NULL);
    } catch (const Error& e) {
      problem("data", "", e.what());
    }
    Progress progress;
    for (const auto& [fqn, storage] : index_.metadata.state_dict_metadata)
      if (const auto* t = std::get_if<TensorStorageMetadata>(&storage)) {
        progress.items_total += 1;
        progress.bytes_total += detail::volume(t->size) * static_cast<std::int64_t>(dtype_size(t->properties.dtype));
      }
    for (const auto& [fqn, storage] : index_.metadata.state_dict_metadata) {
      const auto* t = std::get_if<TensorStorageMetadata>(&storage);
      if (t == nullptr) continue;
      report_.tensors += 1;
      if (!t->size.empty() && detail::volume(t->size) > 0) {
        try {
          detail::check_exact_tiling(fqn, t->size, t->chunks);
        } catch (const Error& e) {
          problem("tiling", fqn, e.what());
        }
      }
      if (reader) check_data(*reader, fqn, *t);
      progress.items_done += 1;
      progress.bytes_done += detail::volume(t->size) * static_cast<std::int64_t>(dtype_size(t->properties.dtype));
      progress.current = fqn;
      if (options_.progress) options_.progress(progress);
    }
    if (reader) {
      try {
        reader->close();
      } catch (const Error& e) {
        problem("data", "", e.what());
      }
    }
  }

  // A box the tensor is read back in, with the digest it must have when the
  // file stores checksums.
  struct Piece {
    ChunkStorageMetadata box;
    std::optional<std::uint64_t> digest;
    std::size_t chunk = 0;
  };

  // The tensor's checksum slabs when it has checksums (each saved chunk cut
  // into slabs of about 1 MiB), else blocks of whole rows along dim 0.
  std::vector<Piece> pieces_of(const std::string& fqn, const TensorStorageMetadata& t) {
    std::vector<Piece> pieces;
    const auto element = static_cast<std::int64_t>(dtype_size(t.properties.dtype));
    const auto it = index_.checksums.find(fqn);
    if (it != index_.checksums.end()) {
      const auto& sums = it->second;
      bool fits = sums.rows.size() == t.chunks.size();
      for (std::size_t c = 0; fits && c < t.chunks.size(); ++c) {
        if (detail::volume(t.chunks[c].sizes) == 0) continue;
        for (auto& slab : detail::checksum_slabs(t.chunks[c], sums.rows[c])) {
          fits = pieces.size() < sums.digests.size();
          if (!fits) break;
          pieces.push_back(Piece{std::move(slab), sums.digests[pieces.size()], c});
        }
      }
      if (fits && pieces.size() == sums.digests.size()) return pieces;
      problem("checksums", fqn, "the stored checksums do not fit the tensor's chunks");
      pieces.clear();
    }
    const std::int64_t rows = t.size.empty() ? 1 : t.size[0];
    const std::int64_t row_bytes = detail::volume(t.size) / rows * element;
    const std::int64_t step =
        std::max<std::int64_t>(1, options_.max_block_bytes / std::max<std::int64_t>(row_bytes, 1));
    for (std::int64_t start = 0; start < rows; start += step) {
      ChunkStorageMetadata box{Shape(t.size.size(), 0), t.size};
      if (!t.size.empty()) {
        box.offsets[0] = start;
        box.sizes[0] = std::min(step, rows - start);
      }
      pieces.push_back(Piece{std::move(box), std::nullopt, 0});
    }
    return pieces;
  }

  // Reads every byte of the tensor back: each slab against its checksum,
  // each bool against {0, 1}.
  void check_data(detail::ContainerReader& reader, const std::string& fqn, const TensorStorageMetadata& t) {
    if (detail::volume(t.size) == 0) return;
    const auto element = static_cast<std::int64_t>(dtype_size(t.properties.dtype));
    std::vector<unsigned char> buffer;
    std::size_t mismatches = 0;
    std::string first_mismatch;
    bool bad_bool = false;
    auto pieces = pieces_of(fqn, t);
    if (report_.local_copy) {
      // A local copy holds its owner's chunks only: the rest are holes.
      const auto& owners = owners_.at(fqn);
      std::erase_if(pieces, [&](const Piece& p) {
        return p.chunk >= owners.size() || owners[p.chunk] != report_.local_copy->owner_rank;
      });
    }
    for (const auto& piece : pieces) {
      const auto bytes = static_cast<std::size_t>(detail::volume(piece.box.sizes) * element);
      buffer.resize(bytes);
      try {
        reader.read(fqn, t.properties.dtype, piece.box, buffer.data());
      } catch (const Error& e) {
        problem("data", fqn, e.what());
        return;
      }
      report_.bytes_read += static_cast<std::int64_t>(bytes);
      if (piece.digest && detail::checksum(buffer.data(), bytes) != *piece.digest && mismatches++ == 0)
        first_mismatch = "saved chunk " + std::to_string(piece.chunk) + ", slab " + detail::describe_box(piece.box);
      if (t.properties.dtype == DType::Bool && !bad_bool) {
        const auto bad = std::find_if(buffer.begin(), buffer.end(), [](unsigned char b) { return b > 1; });
        if (bad != buffer.end()) {
          bad_bool = true;
          problem("data", fqn,
                  "a bool tensor holds the byte " + std::to_string(*bad) + " (only 0 and 1 are booleans), in block " +
                      detail::describe_box(piece.box));
        }
      }
    }
    if (mismatches > 0)
      problem("checksums", fqn,
              std::to_string(mismatches) + " of " + std::to_string(pieces.size()) +
                  " slabs differ from their stored checksums (first: " + first_mismatch + "): the data is damaged");
  }

  void check_values() {
    for (const auto& [fqn, storage] : index_.metadata.state_dict_metadata) {
      const auto* v = std::get_if<BytesStorageMetadata>(&storage);
      if (v == nullptr) continue;
      report_.values += 1;
      try {
        const auto& payload = index_.values.at(fqn);
        (void)detail::decode_value(v->encoding, payload, fqn);
        if (v->encoding == "str" && !detail::is_valid_utf8(payload))
          problem("values", fqn, "the string is not valid UTF-8");
      } catch (const std::exception& e) {
        problem("values", fqn, detail::exception_text(e));
      }
    }
  }

  const std::string& path_;
  const VerifyOptions& options_;
  VerifyReport& report_;
  detail::CheckpointIndex index_;
  detail::ChunkOwners owners_;  // a local copy's
};

}  // namespace

VerifyReport verify_checkpoint(const std::string& path, const VerifyOptions& options) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw IoError("h5dcp: '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) throw IoError("h5dcp: '" + path + "' is not a regular file");
  if (::access(path.c_str(), R_OK) != 0) throw IoError("h5dcp: '" + path + "' cannot be read: " + std::strerror(errno));
  detail::Hdf5Access access;  // HDF5 is not thread-safe: see hdf5/hdf5_gate.hpp
  VerifyReport report;
  Verifier(path, options, report).run();
  return report;
}

}  // namespace h5dcp
