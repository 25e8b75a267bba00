// free_storage / alloc_storage: releasing and restoring a tensor's memory
// while every holder keeps the same tensor (see h5dcp/training/utils.hpp for why).

#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

#include <limits>
#include <string>

#include "h5dcp/error.hpp"
#include "h5dcp/training/utils.hpp"

namespace h5dcp {
namespace {

c10::StorageImpl& resizable_storage(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined()) throw UsageError(std::string("h5dcp: ") + what + " needs a defined tensor");
  if (!tensor.has_storage()) throw UsageError(std::string("h5dcp: ") + what + ": the tensor has no storage");
  auto* storage = tensor.storage().unsafeGetStorageImpl();
  if (!storage->resizable() || storage->allocator() == nullptr)
    throw UsageError(std::string("h5dcp: ") + what +
                     ": the tensor's storage cannot be resized (memory it does not own, e.g. from at::from_blob)");
  return *storage;
}

// Replaces the storage's memory with `nbytes` fresh bytes from its own
// allocator, on the tensor's device (CUDA's allocator uses the current one).
void reallocate(const at::Tensor& tensor, c10::StorageImpl& storage, std::size_t nbytes) {
  const c10::OptionalDeviceGuard guard(tensor.device());
  storage.set_data_ptr_noswap(storage.allocator()->allocate(nbytes));
  storage.set_nbytes(nbytes);
}

}  // namespace

bool free_storage(const at::Tensor& tensor) {
  auto& storage = resizable_storage(tensor, "free_storage");
  if (storage.nbytes() == 0) return false;
  if (tensor.storage_offset() != 0)
    throw UsageError("h5dcp: free_storage: the tensor starts at element " + std::to_string(tensor.storage_offset()) +
                     " of a storage of " + std::to_string(storage.nbytes()) + " bytes; freeing a tensor's storage is " +
                     "only safe for the tensor that starts it");
  reallocate(tensor, storage, 0);
  return true;
}

bool alloc_storage(const at::Tensor& tensor, at::IntArrayRef size) {
  auto& storage = resizable_storage(tensor, "alloc_storage");
  std::size_t elements = 1;
  for (const auto s : size) {
    if (s < 0) throw UsageError("h5dcp: alloc_storage: negative size " + std::to_string(s));
    if (s != 0 && elements > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(s) / 16)
      throw UsageError("h5dcp: alloc_storage: the size overflows");
    elements *= static_cast<std::size_t>(s);
  }
  const auto nbytes = elements * tensor.element_size();
  if (storage.nbytes() == nbytes) return false;
  if (storage.nbytes() != 0)
    throw UsageError("h5dcp: alloc_storage: the storage holds " + std::to_string(storage.nbytes()) + " bytes, not " +
                     std::to_string(nbytes) + "; free_storage it first");
  reallocate(tensor, storage, nbytes);
  return true;
}

bool storage_allocated(const at::Tensor& tensor) {
  return tensor.defined() && tensor.has_storage() && tensor.storage().data() != nullptr;
}

}  // namespace h5dcp
