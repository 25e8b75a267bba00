#pragma once
// Reads checkpoint files: the metadata and values (serially, once, by the
// coordinator) and blocks of tensors (by every rank, independently).

#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "h5dcp/metadata.hpp"
#include "hdf5/handle.hpp"
#include "hdf5/pack_index.hpp"
#include "plan/codec.hpp"
#include "plan/pack_runs.hpp"
#include "storage/file_descriptor.hpp"
#include "storage/read_ahead.hpp"

namespace h5dcp::detail {

/// Reads the metadata and the non-tensor values of the checkpoint at `path`,
/// serially (not collective). Throws FormatError when the file is missing,
/// not HDF5, not an h5dcp checkpoint, damaged, or of a newer major format;
/// damaged includes links other than a tree of hard links, nesting deeper
/// than 256 containers, datasets claiming more bytes than the file has, and
/// (when `require_exact_tiling`) a tensor whose chunks do not tile its shape
/// exactly. verify_checkpoint reads without that last check, to report it as
/// a problem of its own.
CheckpointIndex read_container_index(const std::string& path, bool require_exact_tiling = true);

/// The same, from the file `root` open at `path` (left open).
CheckpointIndex read_container_index(Hid root, const std::string& path, bool require_exact_tiling = true);

class ContainerReader {
 public:
  /// Opens `path` read-only; collective over `comm` unless MPI_COMM_NULL.
  ContainerReader(const std::string& path, MPI_Comm comm);

  /// Reads the block `box` of the tensor `fqn` (stored as `dtype`) into
  /// `out`, contiguous. Not collective (independent I/O).
  void read(const std::string& fqn, DType dtype, const ChunkStorageMetadata& box, void* out);

  /// Announces, in read order, a block read() will be asked for, so that
  /// the kernel reads it ahead (storage/read_ahead.hpp). Only blocks that
  /// are one range of the file, or nearly (rows), are announced. A packed
  /// tensor's block is also remembered, so that read() takes it with its
  /// neighbours in one run of the pack (plan/pack_runs.hpp). `into`: where
  /// read() will be asked to put it, when the caller knows (contiguous, of
  /// the stored dtype, and left alone until then): a run whose blocks all
  /// have such places is read straight into them, not into a buffer. Throws
  /// like read() when the dataset cannot be opened.
  void will_read(const std::string& fqn, DType dtype, const ChunkStorageMetadata& box, void* into = nullptr);

  /// The packs' index row of `fqn`, or nullptr when it has a dataset of its
  /// own. Reads of packed tensors in pack order (dtype, then offset) take
  /// the fewest runs. Not collective.
  const PackIndexRow* packed_row(const std::string& fqn) const;

  /// Closes the datasets, the file and every other HDF5 id it holds.
  /// Collective.
  void close();

  /// Forgets every HDF5 id without closing (after a rank timed out).
  void abandon() noexcept;

 private:
  // The dataset of `fqn`, opened once. Throws FormatError when missing or
  // packed (format 1.2: a tensor with no dataset of its own).
  Hid dataset(const std::string& fqn);
  Hid pack(DType dtype);
  // Where the pack's elements start in the file (H5Dget_offset, asked once),
  // or HADDR_UNDEF (not contiguous, not written, external).
  std::uint64_t pack_start(DType dtype);
  void read_pack_range(DType dtype, ElementRange range, void* out, const std::string& fqn);
  bool read_run_into_place(DType dtype, ElementRange run, const std::vector<ElementRange>& pieces,
                           const std::string& fqn);
  void read_pack_elements(DType dtype, ElementRange range, void* out, const std::string& fqn);
  void read_packed(const std::string& fqn, const PackIndexRow& row, DType dtype, const ChunkStorageMetadata& box,
                   void* out);

  std::string path_;
  Handle file_;
  Handle dxpl_;
  std::map<std::string, Handle> datasets_;
  // fqn -> its row of the packs' index (format 1.2): hashed, because every
  // packed tensor of a load looks its row up a few times (thousands of rows).
  std::unordered_map<std::string, PackIndexRow> packed_;
  std::map<DType, Handle> packs_;               // opened once each
  std::map<DType, std::uint64_t> pack_starts_;  // pack_start's answers
  // The ranges of each pack will_read announced, sorted before the next read.
  std::map<DType, std::vector<ElementRange>> announced_;
  bool announced_sorted_ = true;
  // The last run read from a pack: the reads inside it are copies, or, when
  // it was read into place (run_pieces_ not empty), nothing to do.
  DType run_dtype_ = DType::Float32;
  ElementRange run_;
  std::vector<ElementRange> run_pieces_;
  std::unique_ptr<char[]> run_bytes_;  // not zeroed first: every byte is read into
  std::int64_t run_capacity_ = 0;
  ReadAhead read_ahead_;
  FileDescriptor raw_;  // the file, for runs read into place (not through HDF5)
};

}  // namespace h5dcp::detail
