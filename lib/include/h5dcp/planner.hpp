#pragma once
// Plans and planners: the extension points of save and load (in the spirit of
// DCP's SavePlanner / LoadPlanner).
//
// A save runs, on every rank: set_up -> create_local_plan; on the
// coordinator: create_global_plan over all local plans (index = rank); then
// every rank writes what the global plan assigns it, asking resolve_tensor
// for the data. A load runs: set_up (with the checkpoint's metadata) ->
// create_local_plan -> resolve_tensor for each read -> read -> commit_tensor;
// non-tensor values go through load_value. Derive from the default planners
// and override what you need; e.g. a reader whose state dict holds one
// tensor-parallel shard of a larger saved tensor translates storage offsets
// in create_local_plan.
//
// The plan types are in h5dcp/plan.hpp.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "h5dcp/plan.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

class SavePlanner {
 public:
  virtual ~SavePlanner() = default;
  /// Every rank, first: the state dict to save.
  virtual void set_up(const StateDict& state_dict, bool is_coordinator) = 0;
  /// Every rank: what it holds.
  virtual SavePlan create_local_plan() = 0;
  /// Coordinator only: merges every rank's plan (index = rank) into the
  /// global plan. Throwing here fails the save on every rank.
  virtual GlobalSavePlan create_global_plan(const std::vector<SavePlan>& local_plans) = 0;
  /// Every rank: the tensor holding the data of `chunk` of `tensor`, which
  /// the global plan assigned to this rank (any device, any strides).
  virtual at::Tensor resolve_tensor(const PlannedTensor& tensor, const PlannedChunk& chunk) = 0;
};

/// The default: one item per plain tensor, local shard and value; the
/// global plan validates that ranks agree on every key (shape, dtype, kind,
/// value) and that the shards of each tensor tile it exactly, and writes
/// replicated blocks and values once, by the least-loaded holder.
class DefaultSavePlanner : public SavePlanner {
 public:
  void set_up(const StateDict& state_dict, bool is_coordinator) override;
  SavePlan create_local_plan() override;
  GlobalSavePlan create_global_plan(const std::vector<SavePlan>& local_plans) override;
  at::Tensor resolve_tensor(const PlannedTensor& tensor, const PlannedChunk& chunk) override;

 protected:
  const StateDict* state_dict_ = nullptr;
  bool is_coordinator_ = false;
};

class LoadPlanner {
 public:
  virtual ~LoadPlanner() = default;
  /// Every rank, first: the state dict to fill and the checkpoint's metadata.
  virtual void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) = 0;
  /// Every rank: the reads it does. Throwing fails the load on every rank.
  virtual LoadPlan create_local_plan() = 0;
  /// The tensor to read `item` into (a block of it, at item.dest_offsets).
  virtual at::Tensor resolve_tensor(const ReadItem& item) = 0;
  /// Called once `tensor` (from resolve_tensor) holds the data of `item`.
  virtual void commit_tensor(const ReadItem& item, const at::Tensor& tensor) = 0;
  /// Stores a non-tensor value read from the checkpoint.
  virtual void load_value(const ReadItem& item, StateValue value) = 0;
};

/// The default: every leaf of the state dict is read from the same fqn; a
/// tensor must have the stored global shape and dtype (or the dtype is
/// converted when options.convert_dtype); missing keys are an error when
/// options.strict, else reported; non-tensor values are replaced.
class DefaultLoadPlanner : public LoadPlanner {
 public:
  explicit DefaultLoadPlanner(bool strict = true, bool convert_dtype = false)
      : strict_(strict), convert_dtype_(convert_dtype) {}
  void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) override;
  LoadPlan create_local_plan() override;
  at::Tensor resolve_tensor(const ReadItem& item) override;
  void commit_tensor(const ReadItem& item, const at::Tensor& tensor) override;
  void load_value(const ReadItem& item, StateValue value) override;

 protected:
  StateDict* state_dict_ = nullptr;
  const Metadata* metadata_ = nullptr;
  bool is_coordinator_ = false;
  bool strict_;
  bool convert_dtype_;
  /// fqn -> offset: tensors whose state-dict tensor is a block of the stored
  /// one starting at that offset (see OffsetLoadPlanner).
  std::map<std::string, Shape> storage_offsets_;
};

/// PyTorch DCP's _ReaderWithOffset: for the fqns in `storage_offsets`, the
/// state dict's tensor (plain or sharded, with its own global shape and
/// offsets) stands for the block of the stored tensor that starts at the
/// given offset; reads are translated by it. Used to load tensor-parallel
/// blocks of optimizer state (load_sharded_optimizer_state_dict).
class OffsetLoadPlanner : public DefaultLoadPlanner {
 public:
  explicit OffsetLoadPlanner(std::map<std::string, Shape> storage_offsets, bool strict = true,
                             bool convert_dtype = false)
      : DefaultLoadPlanner(strict, convert_dtype) {
    storage_offsets_ = std::move(storage_offsets);
  }
};

}  // namespace h5dcp
