#pragma once
// What the exports of a checkpoint to other formats share (safetensors,
// DCP, torch.save): the checkpoint opened for reading, its tensors read in
// checked pieces of whole rows, and an export's small files written synced
// (storage/directory_publish.hpp puts a finished directory in place).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "h5dcp/progress.hpp"
#include "hdf5/container_reader.hpp"
#include "plan/row_split.hpp"

namespace h5dcp::detail {

/// The most an export reads at once: a piece is at most this many bytes, or
/// one row where a row is larger.
constexpr std::int64_t kExportPieceBytes = std::int64_t{64} << 20;

/// A checkpoint opened by one process for an export (not collective): its
/// index, and a reader of its tensors. HDF5 is not thread-safe: every HDF5
/// call of it, closing included, is made under the HDF5 gate, however the
/// export ends (an exception between reads included), and the gate is not
/// held between reads, so that a progress callback may call h5dcp.
class ExportSource {
 public:
  /// Reads the index and opens the file. Throws FormatError or IoError
  /// naming it.
  explicit ExportSource(const std::string& path);
  /// Closes what is still open, under the gate. Never throws.
  ~ExportSource();

  const CheckpointIndex& index() const noexcept { return index_; }

  /// Reads `rows` (a block of whole rows) of the tensor `fqn` in order, in
  /// pieces of whole rows of at most kExportPieceBytes (one row where a row
  /// is larger: checksum slabs are whole rows, and a piece must not read a
  /// slab again for each part of it), and hands each to `use` with its box,
  /// as a contiguous CPU tensor, checked against the checkpoint's checksums
  /// where the file has them. Memory holds one piece (and one checksum
  /// slab) at a time. Throws FormatError (a checksum mismatch too) or IoError naming
  /// the tensor; whatever `use` throws.
  void read_in_pieces(const std::string& fqn, const ChunkStorageMetadata& rows,
                      const std::function<void(const ChunkStorageMetadata& piece, const at::Tensor& bytes)>& use);

  /// Closes the file now; a second call does nothing. Throws IoError when
  /// closing fails.
  void close();

 private:
  at::Tensor read_checked(const TensorStorageMetadata& storage, const std::string& fqn,
                          const ChunkStorageMetadata& box);

  CheckpointIndex index_;
  std::optional<ContainerReader> reader_;
};

/// The progress of an export's row pieces of `tensors` (each with a shape
/// and a dtype): their totals, then a report to `callback` (if set) as each
/// piece is done.
class PiecesProgress {
 public:
  template <typename Tensors>
  PiecesProgress(const ProgressCallback& callback, const std::vector<RowPiece>& pieces, const Tensors& tensors)
      : callback_(callback) {
    for (const auto& p : pieces) {
      const auto& t = tensors[p.tensor];
      bytes_.push_back(p.rows * row_bytes(t.shape, static_cast<std::int64_t>(dtype_size(t.dtype))));
      done_.bytes_total += bytes_.back();
    }
    done_.items_total = static_cast<std::int64_t>(pieces.size());
  }
  /// Piece `i` (of the tensor `fqn`) is written.
  void piece_done(std::size_t i, const std::string& fqn) {
    if (!callback_) return;
    done_.items_done += 1;
    done_.bytes_done += bytes_.at(i);
    done_.current = fqn;
    callback_(done_);
  }

 private:
  const ProgressCallback& callback_;
  std::vector<std::int64_t> bytes_;
  Progress done_;
};

/// Creates the file `path` (which must not exist), writes `bytes` into it and
/// fsyncs it: an export's small files (an index, DCP's .metadata). Throws
/// IoError naming the path.
void write_new_file_synced(const std::string& path, std::string_view bytes);

}  // namespace h5dcp::detail
