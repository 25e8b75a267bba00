#pragma once
// Reading a block and checking it against the checksums stored with it.

#include <ATen/core/Tensor.h>

#include "h5dcp/metadata.hpp"
#include "h5dcp/plan.hpp"
#include "hdf5/container_reader.hpp"
#include "plan/checksum_layout.hpp"
#include "torch/device_copies.hpp"

namespace h5dcp::detail {

/// Reads `item` into `block` (the destination block, any device, strides or
/// dtype) and verifies every checksum slab it touches, as
/// plan/slab_reads.hpp lays out: slabs are read whole (a resharded read
/// reads the rest of a partly wanted slab too) and checked before their
/// part is copied out (through `uploads`: to a GPU block asynchronously, so
/// that the next slab is read meanwhile; the caller calls uploads.finish()).
/// Throws FormatError naming the tensor, the saved chunk and the slab on a
/// mismatch. Not collective.
void read_verified(ContainerReader& reader, const ReadItem& item, const at::Tensor& block,
                   const TensorStorageMetadata& storage, const TensorChecksums& checksums, HostToDevice& uploads);
/// The same with every copy done on return.
void read_verified(ContainerReader& reader, const ReadItem& item, const at::Tensor& block,
                   const TensorStorageMetadata& storage, const TensorChecksums& checksums);

}  // namespace h5dcp::detail
