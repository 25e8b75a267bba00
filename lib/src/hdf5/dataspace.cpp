#include "hdf5/dataspace.hpp"

#include <hdf5.h>

#include <vector>

#include "hdf5/hdf5_error.hpp"

namespace h5dcp::detail {

Handle dataspace_of(const Shape& shape) {
  if (shape.empty()) return Handle(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Handle(check_id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple"),
                H5Sclose);
}

void select_block(hid_t space, const ChunkStorageMetadata& box, const std::string& fqn) {
  if (box.offsets.empty()) {
    check_status(H5Sselect_all(space), "H5Sselect_all");
    return;
  }
  const std::vector<hsize_t> start(box.offsets.begin(), box.offsets.end());
  const std::vector<hsize_t> count(box.sizes.begin(), box.sizes.end());
  check_status(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
               "selecting block " + describe_box(box) + " of '" + fqn + "'");
}

}  // namespace h5dcp::detail
