#pragma once
// Writes a checkpoint file from a global save plan.

#include <mpi.h>
#include <sys/uio.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "h5dcp/options.hpp"
#include "h5dcp/plan.hpp"
#include "hdf5/handle.hpp"
#include "plan/checksum_layout.hpp"
#include "plan/tensor_packs.hpp"
#include "storage/early_writeback.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {

/// Where the bytes of one chunk are: contiguous, in host memory, in the
/// chunk's dtype, kept alive by the pointer's owner.
using ChunkSource = std::function<std::shared_ptr<const void>(const PlannedTensor&, const PlannedChunk&)>;

class ContainerWriter {
 public:
  /// Creates `path` with every group and dataset of `plan` and their
  /// attributes (creation is collective: every rank passes the same plan).
  /// Serial when `comm` is MPI_COMM_NULL. Tensors of at most
  /// `pack_max_bytes` saved whole go into the packs (plan/tensor_packs.hpp);
  /// a negative limit gives every tensor a dataset of its own.
  ContainerWriter(const std::string& path, MPI_Comm comm, const GlobalSavePlan& plan,
                  std::int64_t pack_max_bytes = kPackedTensorMaxBytes);

  /// Opens `path`, a file written from a plan of the same layout as `plan`
  /// (layout_digest: the same datasets, shapes and values' sizes), serially
  /// to write `plan`'s data over what it holds: a node-local copy rewritten
  /// in place (api/local_save.cpp), whose storage and metadata are there
  /// already. Writes the plan's values' checksums over the file's (its
  /// h5dcp.created stays); write_checksums then writes over the tensors'. Throws
  /// FormatError when a dataset of `plan` is missing or of another size.
  struct Rewrite {};
  ContainerWriter(const std::string& path, const GlobalSavePlan& plan, Rewrite);

  /// Writes the tensor blocks and values `rank` is the writer of, taking
  /// tensor bytes from `source`. Collective in IoMode::Collective. A failure
  /// (in `source` or in HDF5) does not stop the rank from taking part in the
  /// remaining collective writes (with empty selections), so no rank waits
  /// for it; the first failure is thrown at the end.
  void write(int rank, IoMode mode, const ChunkSource& source);

  /// Writes `box` of tensor `tensor_index` (an index into plan.tensors) from
  /// `data` (contiguous, the tensor's dtype) with independent I/O: any
  /// block, any number of calls per rank. Not collective.
  void write_block(std::size_t tensor_index, const ChunkStorageMetadata& box, const void* data);

  /// Writes the values `rank` is the writer of (independent I/O).
  void write_values(int rank);

  /// Stores every tensor's checksums (one entry per plan tensor) as
  /// attributes (over the file's, rewritten), and the packed tensors' in the
  /// packs' index (written by rank 0, its checksum an attribute). Collective:
  /// every rank passes the same checksums.
  void write_checksums(const std::vector<TensorChecksums>& checksums);

  /// Closes every dataset and the file. Collective. Throws on failure.
  void close();

  /// Bytes the file's data will reach once written: the end of the last
  /// dataset's storage (every dataset is allocated when created). Not
  /// collective.
  std::int64_t allocated_bytes() const;

  /// The open file's root group, and the dataset of plan tensor `t` (not a
  /// packed one), for attributes beyond a checkpoint's (hdf5/local_file.hpp).
  Hid root() const noexcept { return file_.get(); }
  Hid tensor_dataset(std::size_t t) const { return tensor_datasets_.at(t).get(); }

  /// Forgets every HDF5 id without closing (after a rank timed out).
  void abandon() noexcept;

 private:
  void write_tensors(int rank, bool collective, const ChunkSource& source, std::exception_ptr& failure);
  void create_packs(Hid root, Hid lcpl, Hid dcpl);
  void write_packs(int rank, const ChunkSource& source, std::exception_ptr& failure);
  bool write_pack_in_place(DType dtype, std::int64_t first, std::int64_t count, std::vector<iovec>& pieces);
  void write_pack_range(DType dtype, std::int64_t first, std::int64_t count, const void* data, Hid dxpl);
  std::shared_ptr<const void> maybe_short(std::shared_ptr<const void> data, std::int64_t bytes) const;

  std::string path_;
  MPI_Comm comm_;
  int rank_ = 0;  // in comm_ (0 without one)
  const GlobalSavePlan& plan_;
  Handle file_;
  bool rewrite_ = false;                 // opened by the Rewrite constructor
  std::vector<Handle> tensor_datasets_;  // one per plan_.tensors entry; invalid for a packed tensor
  std::vector<Handle> tensor_types_;     // file (= memory) type of each; invalid for a packed tensor
  std::vector<Handle> value_datasets_;   // one per plan_.values entry
  Handle independent_dxpl_;              // made on the first write_block
  EarlyWriteback writeback_;             // overlaps the disk writes with ours
  FileDescriptor raw_;                   // for write_pack_in_place, opened at its first call
  TensorPacks packs_;                    // where each packed tensor lies
  Handle packs_group_;                   // `%packs`, when there are packs
  std::map<DType, Handle> pack_datasets_;
  Handle pack_index_;
};

}  // namespace h5dcp::detail
