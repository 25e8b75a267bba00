#pragma once
// Names of the container format v1 (docs/FORMAT.md is the reference).

namespace h5dcp::detail::layout {

// Root group attributes.
inline constexpr const char* kFormatVersion = "h5dcp.format_version";  // int64[2]: major, minor
inline constexpr const char* kLibraryVersion = "h5dcp.library_version";
inline constexpr const char* kWorldSize = "h5dcp.world_size";                  // int64[1]
inline constexpr const char* kCreated = "h5dcp.created";                       // ISO-8601 UTC
inline constexpr const char* kChecksumAlgorithm = "h5dcp.checksum_algorithm";  // "xxh3-64"

// Root attributes of a node-local tier's copy (hdf5/local_file.hpp).
inline constexpr const char* kLocalRunId = "h5dcp.local.run_id";
inline constexpr const char* kLocalStep = "h5dcp.local.step";                 // int64[1]
inline constexpr const char* kLocalOwnerRank = "h5dcp.local.owner_rank";      // int64[1]
inline constexpr const char* kLocalReplica = "h5dcp.local.replica";           // int64[1]
inline constexpr const char* kLocalNodes = "h5dcp.local.nodes";               // node names, one per line
inline constexpr const char* kLocalRankNode = "h5dcp.local.rank_node";        // int64[world_size]
inline constexpr const char* kLocalChunkOwners = "h5dcp.local.chunk_owners";  // int64[chunks], on tensors

// Attributes of every group and dataset below the root.
inline constexpr const char* kKey = "h5dcp.key";  // the dict key or list position, unescaped (UTF-8)

// Groups: nested dicts and lists.
inline constexpr const char* kContainer = "h5dcp.container";  // "dict" or "list"
inline constexpr const char* kDict = "dict";
inline constexpr const char* kList = "list";

// Datasets: tensors and non-tensor values.
inline constexpr const char* kKind = "h5dcp.kind";  // "tensor" or a value encoding
inline constexpr const char* kTensor = "tensor";
inline constexpr const char* kDType = "h5dcp.dtype";                 // tensors: torch dtype name
inline constexpr const char* kChunkOffsets = "h5dcp.chunk_offsets";  // tensors: int64[chunks, ndim]
inline constexpr const char* kChunkSizes = "h5dcp.chunk_sizes";      // tensors: int64[chunks, ndim]
inline constexpr const char* kChecksumRows = "h5dcp.checksum_rows";  // tensors: int64[chunks], rows per slab
inline constexpr const char* kChecksums = "h5dcp.checksums";         // tensors: uint64[slabs]; values: uint64[1]

// Format 1.2: the packs of small tensors (hdf5/pack_index.hpp). No escaped
// key is `%packs`: escaping makes a `%` only in `%25`, `%2F`, `%2E` and `%`.
inline constexpr const char* kPacks = "%packs";     // root group: a 1-D dataset per dtype, and the index
inline constexpr const char* kPackIndex = "index";  // compound table, a row per packed tensor; h5dcp.checksums

}  // namespace h5dcp::detail::layout
