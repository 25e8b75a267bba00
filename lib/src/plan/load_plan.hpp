#pragma once
// Pure load planning (the default load planner's logic): what a rank wants,
// checked against what was saved.
//
// Every tensor is stored as one dataset with its global shape, so any block
// of it can be read directly as one hyperslab, whatever sharding saved it: a
// rank's read is the block it wants itself. Planning is the checking of every
// request against the metadata, reporting all problems at once.

#include <vector>

#include "h5dcp/plan.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// One leaf a rank wants: a whole plain tensor, one local shard, or a value.
struct LoadRequest {
  MetadataIndex dest_index;
  bool value = false;            ///< a non-tensor value (then nothing below matters)
  DType dtype = DType::Float32;  ///< the destination's dtype
  Shape global_shape;
  ChunkStorageMetadata box;  ///< the destination block, in global coordinates
  /// Empty: the destination is the stored tensor itself (same global shape).
  /// Otherwise the destination's "global" tensor is a block of the stored
  /// one starting here (PyTorch DCP's _ReaderWithOffset): storage offsets are
  /// box offsets + this, and the block must fit inside the stored shape.
  Shape storage_offset;
};

/// Checks `wanted` against `metadata`: every fqn present with the same kind;
/// tensors with the same global shape and dtype (any dtype when
/// `convert_dtype`), every block inside. Missing fqns are an error when
/// `strict`, else listed in the plan. Throws one UsageError listing every
/// problem. Also lists the stored leaves nobody on this rank asked for, and
/// for each block the saved chunks it overlaps (found with a ChunkIndex, not
/// by scanning every chunk). Throws FormatError naming the tensor and two
/// chunks when a requested tensor's saved chunks overlap (checked once per
/// tensor: a sum of volumes alone would let an overlap hide a gap), and when
/// they leave part of a requested block uncovered.
LoadPlan create_local_load_plan(const std::vector<LoadRequest>& wanted, const Metadata& metadata, bool strict,
                                bool convert_dtype);

}  // namespace h5dcp::detail
