#pragma once
// Pure load planning: what a rank wants, checked against what was saved.
//
// Every tensor is stored as one dataset with its global shape, so any block
// of it can be read directly as a hyperslab, whatever sharding saved it: a
// read is the wanted block itself. Planning is then the checking of every
// request against the metadata, reporting all problems at once.

#include <vector>

#include "h5dcp/metadata.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// One block a rank wants to fill: a whole plain tensor or one local shard.
struct ReadItem {
  MetadataIndex index;
  DType dtype = DType::Float32;
  Shape global_shape;
  ChunkStorageMetadata box;  ///< the block, in global coordinates
};

struct LoadPlan {
  std::vector<ReadItem> items;
};

/// Checks `wanted` against `metadata`: every key present and a tensor, same
/// dtype, same global shape, every block inside it. Throws one UsageError
/// listing every missing key and every mismatch. Returns the reads to do.
LoadPlan create_local_load_plan(std::vector<ReadItem> wanted, const Metadata& metadata);

}  // namespace h5dcp::detail
