#pragma once
// Binary encodings of the plans and the metadata that ranks exchange.

#include <map>
#include <string>

#include "base/byte_codec.hpp"
#include "h5dcp/metadata.hpp"
#include "h5dcp/plan.hpp"
#include "plan/checksum_layout.hpp"

namespace h5dcp {
namespace detail {
template <>
struct LastEnumerator<ContainerKind> {
  static constexpr ContainerKind value = ContainerKind::List;
};
}  // namespace detail
H5DCP_MESSAGE_FIELDS(ChunkStorageMetadata, m.offsets, m.sizes);
}  // namespace h5dcp

namespace h5dcp::detail {

/// What the coordinator reads from a checkpoint and shares: the metadata and
/// the encoded non-tensor values (small; every rank may need them).
struct CheckpointIndex {
  Metadata metadata;
  std::map<std::string, std::string> values;         ///< fqn -> encoded payload
  std::map<std::string, TensorChecksums> checksums;  ///< fqn -> stored checksums (tensors that have them)
};

Bytes encode(const SavePlan& plan);
SavePlan decode_save_plan(std::string_view bytes);

Bytes encode(const GlobalSavePlan& plan);
GlobalSavePlan decode_global_save_plan(std::string_view bytes);

Bytes encode(const Metadata& metadata);
Metadata decode_metadata(std::string_view bytes);

Bytes encode(const std::vector<ChunkChecksums>& checksums);
std::vector<ChunkChecksums> decode_chunk_checksums(std::string_view bytes);

Bytes encode(const CheckpointIndex& index);
CheckpointIndex decode_checkpoint_index(std::string_view bytes);

}  // namespace h5dcp::detail
