// verify_param_shapes_across_ranks: one hash per rank when ranks agree, the
// full (name, dtype, shape) lists only to explain a disagreement.

#include <c10/core/ScalarType.h>

#include <functional>
#include <set>

#include "base/byte_codec.hpp"
#include "h5dcp/error.hpp"
#include "torch/dtype_mapping.hpp"
#include "training/module_sync_internal.hpp"
#include "training/param_agreement.hpp"

namespace h5dcp {
namespace detail {
namespace {

std::vector<ParamSignature> signatures_of(const NamedTensors& tensors, bool dense_only) {
  std::vector<ParamSignature> signatures;
  signatures.reserve(tensors.size());
  std::set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second) throw UsageError("h5dcp: the tensor name '" + name + "' is listed twice");
    if (!tensor.defined()) throw UsageError("h5dcp: the tensor '" + name + "' is undefined");
    if (dense_only && (tensor.layout() != at::kStrided || tensor.is_meta()))
      throw UsageError("h5dcp: the tensor '" + name + "' is not a dense tensor with memory (layout " +
                       c10::toString(tensor.layout()) + ", device " + tensor.device().str() +
                       "); it cannot be broadcast");
    const auto dtype = to_dtype(tensor.scalar_type());
    signatures.push_back(
        ParamSignature{name, dtype ? std::string(dtype_name(*dtype)) : std::string(c10::toString(tensor.scalar_type())),
                       tensor.sizes().vec()});
  }
  return signatures;
}

}  // namespace

void require_same_tensors(const Comm& comm, const NamedTensors& tensors, std::string_view what, const std::string& step,
                          bool dense_only) {
  std::vector<ParamSignature> mine;
  const auto hashes = comm.all_gather(step, [&] {
    mine = signatures_of(tensors, dense_only);
    ByteWriter w;
    w.put<std::uint64_t>(std::hash<std::string>{}(encode_signatures(mine)));
    return w.take();
  });
  bool same = true;
  for (const auto& h : hashes) same = same && h == hashes.front();
  if (same) return;
  // Someone differs: every rank gets every list and builds the same message.
  const auto all = comm.all_gather(step, [&] { return encode_signatures(mine); });
  std::vector<std::vector<ParamSignature>> per_rank;
  per_rank.reserve(all.size());
  for (const auto& bytes : all) per_rank.push_back(decode_signatures(bytes));
  auto message = describe_param_disagreement(per_rank, what);
  if (message.empty()) message = "h5dcp: the " + std::string(what) + " differ across ranks";  // a hash collision's twin
  throw UsageError(message);
}

}  // namespace detail

void verify_param_shapes_across_ranks(const NamedTensors& params, MPI_Comm comm) {
  const detail::Comm dup(comm);
  detail::require_same_tensors(dup, params, "parameters", "verify_param_shapes", /*dense_only=*/false);
}

}  // namespace h5dcp
