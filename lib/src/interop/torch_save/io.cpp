// read_torch_save() and write_torch_save(): whole state dicts in memory.

#include <ATen/core/Tensor.h>

#include <map>
#include <set>
#include <vector>

#include "formats/pickle_writer.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/torch_save.hpp"
#include "interop/torch_save/archive.hpp"
#include "interop/torch_save/tree.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {
namespace {

namespace pickle = detail::pickle;

// The storages a state dict's tensors view, each written once, like torch.save.
class StorageTable {
 public:
  pickle::ObjectPtr tensor_object(const std::string& fqn, const at::Tensor& input) {
    if (!input.defined()) throw UsageError("h5dcp: '" + fqn + "' is an undefined tensor");
    if (input.layout() != at::kStrided || input.is_quantized())
      throw UsageError("h5dcp: '" + fqn +
                       "' is not a dense tensor; a torch.save file written by h5dcp holds dense ones");
    const auto dtype = detail::to_dtype(input.scalar_type());
    if (!dtype)
      throw UsageError("h5dcp: '" + fqn + "' has dtype " + std::string(c10::toString(input.scalar_type())) +
                       ", which h5dcp does not write (it writes " + supported_dtype_names() + ")");
    at::Tensor t = input.device().is_cpu() ? input : input.to(at::kCPU);
    const auto element = static_cast<std::size_t>(t.element_size());
    auto storage = find(t, *dtype);
    if (!storage) {
      // A storage seen with another dtype (torch.save refuses those), or one
      // that is not a whole number of elements: this tensor gets its own.
      if (t.storage().nbytes() % element != 0 || seen_.count(t.storage().unsafeGetStorageImpl()) != 0)
        t = t.clone(at::MemoryFormat::Contiguous);
      storage = add(t, *dtype, element);
    }
    pickle::TensorView view;
    view.storage = storage;
    view.storage_offset = t.storage_offset();
    view.sizes.assign(t.sizes().begin(), t.sizes().end());
    view.strides.assign(t.strides().begin(), t.strides().end());
    return pickle::Object::tensor_of(std::move(view));
  }

  void write_records(detail::TorchSaveWriter& writer) const {
    for (const auto& r : records_)
      writer.write_record("data/" + r.storage->key, r.owner.storage().data(), r.owner.storage().nbytes());
  }

 private:
  struct Record {
    std::shared_ptr<pickle::Storage> storage;
    at::Tensor owner;  // keeps the storage alive until it is written
  };

  std::shared_ptr<pickle::Storage> find(const at::Tensor& t, DType dtype) const {
    const auto it = by_impl_.find({t.storage().unsafeGetStorageImpl(), dtype});
    return it == by_impl_.end() ? nullptr : it->second;
  }

  std::shared_ptr<pickle::Storage> add(const at::Tensor& t, DType dtype, std::size_t element) {
    auto s = std::make_shared<pickle::Storage>();
    s->key = std::to_string(records_.size());
    s->dtype = dtype;
    s->numel = static_cast<std::int64_t>(t.storage().nbytes() / element);
    s->location = "cpu";
    const auto* impl = t.storage().unsafeGetStorageImpl();
    by_impl_.emplace(std::make_pair(impl, dtype), s);
    seen_.insert(impl);
    records_.push_back(Record{s, t});
    return s;
  }

  std::map<std::pair<const c10::StorageImpl*, DType>, std::shared_ptr<pickle::Storage>> by_impl_;
  std::set<const c10::StorageImpl*> seen_;
  std::vector<Record> records_;
};

}  // namespace

StateDict read_torch_save(const std::string& path) {
  detail::TorchSaveReader reader(path);
  const auto index = reader.read_index();
  std::map<std::string, at::Tensor> storages;
  for (const auto& [key, info] : index.storages) storages.emplace(key, reader.read_storage(key, info));
  FlatStateDict flat;
  flat.containers = index.containers;
  for (const auto& [fqn, t] : index.tensors) flat.leaves.emplace(fqn, detail::view_of(storages.at(t.storage), t));
  for (const auto& [fqn, v] : index.values) flat.leaves.emplace(fqn, detail::decode_value(v.encoding, v.payload, fqn));
  return unflatten_state_dict(flat);
}

void write_torch_save(const StateDict& state_dict, const std::string& path) {
  StorageTable storages;
  const auto root = detail::pickle_tree(
      state_dict, [&](const std::string& fqn, const at::Tensor& t) { return storages.tensor_object(fqn, t); });
  const auto data = detail::pickle::pickle(*root);
  detail::TorchSaveWriter writer(path);
  writer.write_record("data.pkl", data.data(), data.size());
  storages.write_records(writer);
  writer.commit();
}

}  // namespace h5dcp
