#pragma once
// Bucketing for broadcasts of many tensors (module parameters and buffers):
// which tensors travel together in one MPI_Bcast. Pure: sizes and type keys
// in, buckets out; every rank computes the same buckets from the same list.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace h5dcp::detail {

/// One tensor to broadcast: its element type (any key; tensors of different
/// keys never share a bucket) and its size in bytes.
struct BucketItem {
  std::int32_t key = 0;
  std::size_t bytes = 0;
};

/// Buckets of item indices. Items keep their order inside a bucket; buckets
/// are ordered by their first item. A bucket holds items of one key and at
/// most `limit` bytes, except a bucket of one item larger than `limit` (so
/// any limit, 0 included, works). An item joins the open bucket of its key
/// when it fits; otherwise that bucket is closed and a new one starts with it.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<BucketItem>& items, std::size_t limit);

}  // namespace h5dcp::detail
