#pragma once
// A torch::nn::Module as a Stateful: its parameters and buffers by fully
// qualified name ("encoder.layer1.weight"), saved without copies and loaded
// in place.
//
//   h5dcp::StateDict state{{"model", std::make_shared<h5dcp::ModuleState>(net)}};
//   h5dcp::save(state, path);   // collective
//   h5dcp::load(state, path);   // collective; parameters filled in place

#include <map>
#include <memory>
#include <string>

#include "h5dcp/sharded_tensor.hpp"
#include "h5dcp/stateful.hpp"

namespace torch::nn {
class Module;
}

namespace h5dcp {

class ModuleState : public Stateful {
 public:
  /// `layouts` names the parameters/buffers that are blocks of larger
  /// global tensors (a sharded model: FSDP/ZeRO-3 or tensor parallel); they
  /// are saved as ShardedTensors. Not collective.
  explicit ModuleState(std::shared_ptr<torch::nn::Module> module, std::map<std::string, BlockLayout> layouts = {},
                       bool strict = true);

  /// Parameters and buffers (detached: they share storage). Not collective.
  StateDict state_dict() override;

  /// Copies `state` into the parameters and buffers (nothing to copy when it
  /// holds their own storage, as after an in-place load). With `strict`,
  /// throws UsageError naming missing and unexpected keys; always throws
  /// UsageError for a shape or dtype mismatch. Not collective.
  void load_state_dict(const StateDict& state) override;

 private:
  std::shared_ptr<torch::nn::Module> module_;
  std::map<std::string, BlockLayout> layouts_;
  bool strict_;
};

}  // namespace h5dcp
