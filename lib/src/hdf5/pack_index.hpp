#pragma once
// The packs of format 1.2 (docs/FORMAT.md, "Packed tensors"): the group
// `%packs` at the root holds one 1-D dataset per dtype, the small tensors of
// that dtype one after another, and `index`, a compound table with a row
// per packed tensor (its fqn, dtype, shape, place in its pack and checksum).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "h5dcp/dtype.hpp"
#include "hdf5/handle.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// One row of the index table.
struct PackIndexRow {
  std::string fqn;
  DType dtype = DType::Float32;
  Shape shape;
  std::int64_t offset = 0;         ///< of the first element in the dtype's pack
  std::int64_t count = 0;          ///< elements
  std::int64_t checksum_rows = 0;  ///< rows of its one checksum slab; 0 without elements
  std::uint64_t checksum = 0;      ///< XXH3-64 of its bytes (when it has elements)
};

/// Creates the index table for `rows` rows whose longest fqn has
/// `fqn_bytes` bytes, in `packs` (the `%packs` group). Collective in
/// parallel HDF5, like every creation: every rank passes the same sizes.
Handle create_pack_index(Hid packs, std::size_t rows, std::size_t fqn_bytes, Hid lcpl, Hid dcpl);

/// The rows as the table stores them (the row type's bytes, row after row):
/// what is written and what its checksum covers.
struct EncodedPackIndex {
  std::vector<char> bytes;
  std::size_t rows = 0;
  std::size_t fqn_bytes = 1;  ///< the longest fqn's, at least 1
};
EncodedPackIndex encode_pack_index(const std::vector<PackIndexRow>& rows);

/// Writes `encoded` into `index` (made by create_pack_index for as many
/// rows and fqns as long), with `dxpl`. One rank calls it.
void write_pack_index(Hid index, const EncodedPackIndex& encoded, Hid dxpl);

/// Reads and checks the index of the file whose root is `root`: the table's
/// type and checksum (its `h5dcp.checksums`), every row's dtype, shape and place inside its pack (which must
/// exist with the dtype's HDF5 type), no two rows sharing elements or an
/// fqn, at most `max_bytes` read in all. FormatError naming `path` and the
/// row otherwise.
std::vector<PackIndexRow> read_pack_index(Hid root, const std::string& path, std::int64_t max_bytes);

}  // namespace h5dcp::detail
