// The seeds' distributed utilities without MPI: tensors in nested state
// dicts and IValue nests (apply, cast, move), key prefixes, storage release,
// and the collective ones as single-process no-ops.

#include <ATen/ATen.h>
#include <ATen/core/class_type.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "h5dcp/async_save.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/training/device.hpp"
#include "h5dcp/training/module_sync.hpp"
#include "h5dcp/training/utils.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

StateDict nested() {
  return StateDict{
      {"model", StateDict{{"w", at::arange(6, at::kFloat).reshape({2, 3})},
                          {"mask", at::ones({3}, at::kBool)},
                          {"emb", ShardedTensor({4, 2}, {Shard{at::full({2, 2}, 1.5, at::kDouble), {2, 0}}})}}},
      {"groups", StateList{StateDict{{"lr", 0.1}, {"ids", at::arange(3, at::kLong)}}, StateValue()}},
      {"step", 7},
      {"name", "adam"},
      {"unset", at::Tensor()},
  };
}

const at::Tensor& tensor_at(const StateDict& sd, const std::string& fqn) {
  return std::get<at::Tensor>(value_at(sd, fqn));
}

// --- apply_to_tensors ------------------------------------------------------

TEST(ApplyToTensors, ReachesEveryTensorOfANestedStateDict) {
  const auto in = nested();
  std::vector<std::string> seen;
  const auto out = apply_to_tensors(in, [&](const at::Tensor& t) {
    seen.push_back(c10::toString(t.scalar_type()));
    return t.to(at::kFloat) * 2;
  });
  // In key order: groups/0/ids, model/emb (its shard), model/mask, model/w;
  // the undefined tensor is skipped.
  EXPECT_EQ(seen, (std::vector<std::string>{"Long", "Double", "Bool", "Float"}));
  EXPECT_TRUE(at::equal(tensor_at(out, "model/w"), at::arange(6, at::kFloat).reshape({2, 3}) * 2));
  EXPECT_TRUE(at::equal(tensor_at(out, "groups/0/ids"), at::arange(3, at::kFloat) * 2));
  const auto& emb = std::get<ShardedTensor>(value_at(out, "model/emb"));
  EXPECT_EQ(emb.global_shape(), (std::vector<std::int64_t>{4, 2}));
  ASSERT_EQ(emb.local_shards().size(), 1u);
  EXPECT_EQ(emb.local_shards()[0].offsets, (std::vector<std::int64_t>{2, 0}));
  EXPECT_TRUE(at::equal(emb.local_shards()[0].tensor, at::full({2, 2}, 3.0, at::kFloat)));
  // Everything else is copied as it was, and the input is untouched.
  EXPECT_EQ(std::get<double>(value_at(out, "groups/0/lr")), 0.1);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(value_at(out, "groups/1")));
  EXPECT_EQ(std::get<std::int64_t>(value_at(out, "step")), 7);
  EXPECT_EQ(std::get<std::string>(value_at(out, "name")), "adam");
  EXPECT_FALSE(tensor_at(out, "unset").defined());
  EXPECT_TRUE(at::equal(tensor_at(in, "model/w"), at::arange(6, at::kFloat).reshape({2, 3})));
}

TEST(ApplyToTensors, IdentityKeepsTensorsShared) {
  const auto in = nested();
  const auto out = apply_to_tensors(in, [](const at::Tensor& t) { return t; });
  EXPECT_TRUE(tensor_at(out, "model/w").is_same(tensor_at(in, "model/w")));
  const StateValue list = StateList{at::zeros({2}), 3};
  const auto list_out = apply_to_tensors(std::get<StateList>(list), [](const at::Tensor& t) { return t + 1; });
  EXPECT_TRUE(at::equal(std::get<at::Tensor>(list_out[0]), at::ones({2})));
  EXPECT_EQ(std::get<std::int64_t>(list_out[1]), 3);
  EXPECT_TRUE(
      at::equal(apply_to_tensors(at::ones({1}), [](const at::Tensor& t) { return t * 5; }), at::full({1}, 5.0)));
}

TEST(ApplyToTensors, WalksIValueNests) {
  // A tuple of (tensor, [tensor, 3], {"a": tensor}, "text") and a tensor list.
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(at::ones({2}));
  list.push_back(3);
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  dict.insert("a", at::ones({1}));
  const c10::IValue input = c10::ivalue::Tuple::create(
      {c10::IValue(at::ones({3})), c10::IValue(list), c10::IValue(dict), c10::IValue("text")});
  const auto out = apply_to_tensors(input, [](const at::Tensor& t) { return t * 4; });
  ASSERT_TRUE(out.isTuple());
  const auto& elements = out.toTupleRef().elements();
  ASSERT_EQ(elements.size(), 4u);
  EXPECT_TRUE(at::equal(elements[0].toTensor(), at::full({3}, 4.0)));
  const auto out_list = elements[1].toList();
  EXPECT_TRUE(at::equal(out_list.get(0).toTensor(), at::full({2}, 4.0)));
  EXPECT_EQ(out_list.get(1).toInt(), 3);
  EXPECT_TRUE(at::equal(elements[2].toGenericDict().at("a").toTensor(), at::full({1}, 4.0)));
  EXPECT_EQ(elements[3].toStringRef(), "text");
  // The input is untouched.
  EXPECT_TRUE(at::equal(input.toTupleRef().elements()[0].toTensor(), at::ones({3})));

  const c10::IValue tensors(c10::List<at::Tensor>({at::ones({1}), at::zeros({1})}));
  const auto out_tensors = apply_to_tensors(tensors, [](const at::Tensor& t) { return t + 1; });
  ASSERT_TRUE(out_tensors.isTensorList());
  EXPECT_TRUE(at::equal(out_tensors.toTensorList().get(0), at::full({1}, 2.0)));
  EXPECT_TRUE(at::equal(out_tensors.toTensorList().get(1), at::ones({1})));

  // Forward inputs and kwargs.
  const auto args =
      apply_to_tensors(std::vector<c10::IValue>{at::ones({1}), 2.5}, [](const at::Tensor& t) { return t - 1; });
  EXPECT_TRUE(at::equal(args[0].toTensor(), at::zeros({1})));
  EXPECT_EQ(args[1].toDouble(), 2.5);
  const auto kwargs = apply_to_tensors(IValueKwargs{{"x", at::ones({1})}}, [](const at::Tensor& t) { return t * 3; });
  EXPECT_TRUE(at::equal(kwargs.at("x").toTensor(), at::full({1}, 3.0)));
}

TEST(ApplyToTensors, NamedTuplesAndObjectsKeepTheirType) {
  const auto type =
      c10::TupleType::createNamed(c10::QualifiedName("__main__.Batch"), std::vector<std::string>{"x", "n"},
                                  {c10::TensorType::get(), c10::IntType::get()});
  const c10::IValue batch = c10::ivalue::Tuple::createNamed({c10::IValue(at::ones({2})), c10::IValue(5)}, type);
  const auto out = apply_to_tensors(batch, [](const at::Tensor& t) { return t * 2; });
  const auto out_type = out.toTupleRef().type();
  ASSERT_TRUE(out_type->schema());
  EXPECT_EQ(out_type->name()->qualifiedName(), "__main__.Batch");
  EXPECT_TRUE(at::equal(out.toTupleRef().elements()[0].toTensor(), at::full({2}, 2.0)));
  EXPECT_EQ(out.toTupleRef().elements()[1].toInt(), 5);

  // A script object (the seeds' dataclass): a copy with new attributes.
  auto cls = c10::ClassType::create(c10::QualifiedName("__torch__.Pair"), std::weak_ptr<torch::jit::CompilationUnit>());
  cls->addAttribute("t", c10::TensorType::get());
  cls->addAttribute("k", c10::IntType::get());
  auto object = c10::ivalue::Object::create(cls, 2);
  object->setSlot(0, at::ones({1}));
  object->setSlot(1, 9);
  const auto moved = apply_to_tensors(c10::IValue(object), [](const at::Tensor& t) { return t + 1; });
  ASSERT_TRUE(moved.isObject());
  EXPECT_NE(&moved.toObjectRef(), object.get());
  EXPECT_TRUE(at::equal(moved.toObjectRef().getSlot(0).toTensor(), at::full({1}, 2.0)));
  EXPECT_EQ(moved.toObjectRef().getSlot(1).toInt(), 9);
  EXPECT_TRUE(at::equal(object->getSlot(0).toTensor(), at::ones({1})));  // the original is untouched
}

// --- cast_forward_inputs ---------------------------------------------------

TEST(CastForwardInputs, CastsFloatingTensorsOnlyAndKeepsRequiresGrad) {
  auto x = at::ones({2, 2}, at::kFloat).set_requires_grad(true);
  const auto ids = at::arange(4, at::kLong);
  const auto flags = at::ones({2}, at::kBool);
  const auto already = at::ones({1}, at::kBFloat16);
  const auto out = cast_forward_inputs(at::kBFloat16, std::vector<c10::IValue>{x, ids, flags, already, 1.5});
  const auto& cast = out[0].toTensor();
  EXPECT_EQ(cast.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(cast.requires_grad());
  EXPECT_TRUE(out[1].toTensor().is_same(ids));      // integers untouched
  EXPECT_TRUE(out[2].toTensor().is_same(flags));    // bools untouched
  EXPECT_TRUE(out[3].toTensor().is_same(already));  // already bfloat16
  EXPECT_EQ(out[4].toDouble(), 1.5);
  // Gradients flow back through the cast, in the input's dtype.
  cast.to(at::kFloat).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(x.grad(), at::ones({2, 2})));

  // A tensor that does not require grad gives one that does not either.
  EXPECT_FALSE(cast_if_floating(at::ones({1}, at::kDouble), at::kHalf).requires_grad());
  EXPECT_EQ(cast_if_floating(at::ones({1}, at::kHalf), at::kDouble).scalar_type(), at::kDouble);
}

TEST(CastForwardInputs, NoDtypeIsANoOpAndIntegerDtypesAreRefused) {
  const auto x = at::ones({1});
  EXPECT_TRUE(cast_forward_inputs(std::nullopt, std::vector<c10::IValue>{x})[0].toTensor().is_same(x));
  EXPECT_THROW(cast_forward_inputs(at::kInt, std::vector<c10::IValue>{x}), UsageError);
  EXPECT_THROW(cast_if_floating(x, at::kBool), UsageError);
  const auto kwargs = cast_forward_inputs(at::kDouble, IValueKwargs{{"x", x}, {"n", 3}});
  EXPECT_EQ(kwargs.at("x").toTensor().scalar_type(), at::kDouble);
  EXPECT_EQ(kwargs.at("n").toInt(), 3);
  const auto nest = cast_forward_inputs(at::kHalf, nested());
  EXPECT_EQ(tensor_at(nest, "model/w").scalar_type(), at::kHalf);
  EXPECT_EQ(tensor_at(nest, "model/mask").scalar_type(), at::kBool);
  EXPECT_EQ(tensor_at(nest, "groups/0/ids").scalar_type(), at::kLong);
  EXPECT_EQ(std::get<ShardedTensor>(value_at(nest, "model/emb")).local_shards()[0].tensor.scalar_type(), at::kHalf);
  const c10::IValue single(at::ones({1}, at::kDouble));
  EXPECT_EQ(cast_forward_inputs(at::kFloat, single).toTensor().scalar_type(), at::kFloat);
}

// --- recursive_to ----------------------------------------------------------

TEST(RecursiveTo, TensorsAlreadyThereStayShared) {
  const auto in = nested();
  const auto out = recursive_to(in, at::Device(at::kCPU));
  EXPECT_TRUE(tensor_at(out, "model/w").is_same(tensor_at(in, "model/w")));
  EXPECT_TRUE(std::get<ShardedTensor>(value_at(out, "model/emb"))
                  .local_shards()[0]
                  .tensor.is_same(std::get<ShardedTensor>(value_at(in, "model/emb")).local_shards()[0].tensor));
}

TEST(RecursiveTo, MovesEveryTensorToAnotherDevice) {
  // The meta device exists in every LibTorch: a real move without a GPU.
  const at::Device meta(at::kMeta);
  for (bool side_stream : {false, true}) {
    const auto out = recursive_to(nested(), meta, side_stream);
    EXPECT_TRUE(tensor_at(out, "model/w").is_meta());
    EXPECT_EQ(tensor_at(out, "model/w").sizes(), (at::IntArrayRef{2, 3}));
    EXPECT_EQ(tensor_at(out, "groups/0/ids").scalar_type(), at::kLong);
    EXPECT_TRUE(tensor_at(out, "groups/0/ids").is_meta());
    const auto& emb = std::get<ShardedTensor>(value_at(out, "model/emb"));
    EXPECT_TRUE(emb.local_shards()[0].tensor.is_meta());
    EXPECT_EQ(emb.local_shards()[0].offsets, (std::vector<std::int64_t>{2, 0}));
    EXPECT_EQ(std::get<std::string>(value_at(out, "name")), "adam");
  }
  const auto args =
      recursive_to(std::vector<c10::IValue>{at::ones({1}), c10::IValue(c10::List<at::Tensor>({at::ones({2})}))}, meta);
  EXPECT_TRUE(args[0].toTensor().is_meta());
  EXPECT_TRUE(args[1].toTensorList().get(0).is_meta());
  EXPECT_TRUE(recursive_to(IValueKwargs{{"x", at::ones({1})}}, meta).at("x").toTensor().is_meta());
  EXPECT_TRUE(recursive_to(StateValue(at::ones({1})), meta).is_tensor());
}

TEST(RecursiveTo, CudaWithoutCudaNamesTheTensor) {
  if (torch::cuda::is_available()) {
    const auto out = recursive_to(nested(), at::Device(at::kCUDA, 0));
    EXPECT_TRUE(tensor_at(out, "model/w").is_cuda());
    EXPECT_TRUE(at::equal(tensor_at(out, "model/w").cpu(), tensor_at(nested(), "model/w")));
    return;
  }
  try {
    recursive_to(nested(), at::Device(at::kCUDA, 0));
    FAIL() << "moved to CUDA without CUDA";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("h5dcp: cannot move 'groups/0/ids' from cpu to cuda:0: "), std::string::npos)
        << e.what();
  }
}

// A LibTorch built with CUDA on a machine without a GPU (CI, login nodes):
// CUDA is there, no device is, and everything falls back to the CPU.
TEST(Cuda, CompiledInWithoutADeviceFallsBackToTheCpu) {
#if H5DCP_WITH_CUDA
  // The CUDA build of LibTorch registers its CUDA device guard when loaded.
  EXPECT_TRUE(c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) << "h5dcp was built with CUDA";
#else
  EXPECT_FALSE(c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) << "h5dcp was built without CUDA";
#endif
  if (torch::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present: the fallback is not taken";
  const auto choice = choose_device(0, 1, static_cast<int>(torch::cuda::device_count()), {});
  EXPECT_EQ(choice.device(), "cpu");
  // recursive_to(cuda) is a UsageError naming the tensor (above); async saves
  // stage in pageable memory: one in a single process, read back exactly.
  const test::TempDir dir;
  StateDict sd{{"w", at::arange(12, at::kFloat).reshape({3, 4})}};
  async_save(sd, dir.file("a.h5")).get();
  finish_async_saves();
  StateDict back{{"w", at::zeros({3, 4})}};
  load(back, dir.file("a.h5"));
  EXPECT_TRUE(at::equal(std::get<at::Tensor>(back.at("w")), std::get<at::Tensor>(sd.at("w"))));
}

// --- replace_by_prefix -----------------------------------------------------

TEST(ReplaceByPrefix, RenamesTopLevelKeysOfAStateDict) {
  StateDict sd{{"module.fc.weight", at::ones({1})}, {"module.sub", StateDict{{"module.x", 1}}}, {"other", 2}};
  replace_by_prefix(sd, "module.", "");
  ASSERT_EQ(sd.size(), 3u);
  EXPECT_TRUE(sd.at("fc.weight").is_tensor());
  // Nested keys are not renamed: only the top level.
  EXPECT_EQ(std::get<std::int64_t>(std::get<StateDict>(sd.at("sub")).at("module.x")), 1);
  EXPECT_EQ(std::get<std::int64_t>(sd.at("other")), 2);
  replace_by_prefix(sd, "", "net.");
  EXPECT_EQ(sd.count("net.fc.weight") + sd.count("net.sub") + sd.count("net.other"), 3u);
}

TEST(ReplaceByPrefix, RefusesEqualPrefixesAndCollisionsWithoutChangingAnything) {
  StateDict sd{{"module.x", 1}, {"x", 2}, {"module.y", 3}};
  const auto before = sd;
  EXPECT_THROW(replace_by_prefix(sd, "module.", "module."), UsageError);
  try {
    replace_by_prefix(sd, "module.", "");
    FAIL() << "no collision reported";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "h5dcp: renaming the key 'module.x' to 'x' (prefix 'module.' -> '') would replace 'x'");
  }
  EXPECT_EQ(sd.size(), before.size());
  EXPECT_EQ(std::get<std::int64_t>(sd.at("module.x")), 1);
  EXPECT_EQ(std::get<std::int64_t>(sd.at("x")), 2);
}

TEST(ReplaceByPrefix, RenamesModuleStyleMaps) {
  std::map<std::string, at::Tensor> map{{"enc.w", at::ones({1})}, {"dec.w", at::zeros({1})}};
  replace_by_prefix(map, "enc.", "encoder.");
  EXPECT_EQ(map.count("encoder.w"), 1u);
  EXPECT_EQ(map.count("enc.w"), 0u);
  EXPECT_TRUE(at::equal(map.at("encoder.w"), at::ones({1})));
  EXPECT_THROW(replace_by_prefix(map, "a", "a"), UsageError);

  torch::OrderedDict<std::string, at::Tensor> ordered;
  ordered.insert("z.w", at::ones({1}));
  ordered.insert("a.w", at::zeros({1}));
  ordered.insert("z.b", at::full({1}, 2.0));
  replace_by_prefix(ordered, "z.", "y.");
  EXPECT_EQ(ordered.keys(), (std::vector<std::string>{"y.w", "a.w", "y.b"}));  // positions kept
  EXPECT_TRUE(at::equal(ordered["y.b"], at::full({1}, 2.0)));
  torch::OrderedDict<std::string, at::Tensor> clash;
  clash.insert("m.x", at::ones({1}));
  clash.insert("x", at::ones({1}));
  EXPECT_THROW(replace_by_prefix(clash, "m.", ""), UsageError);
  EXPECT_EQ(clash.keys(), (std::vector<std::string>{"m.x", "x"}));
}

TEST(ReplaceFqnPrefix, RenamesPathsInsideTheNest) {
  const auto w = at::ones({2});
  StateDict sd{{"model", StateDict{{"module.fc.w", w}, {"module.fc.b", 1}, {"head", 2}}}, {"step", 3}};
  replace_fqn_prefix(sd, "model/module.", "model/");
  const auto& model = std::get<StateDict>(sd.at("model"));
  EXPECT_EQ(model.size(), 3u);
  EXPECT_TRUE(std::get<at::Tensor>(model.at("fc.w")).is_same(w));
  EXPECT_EQ(std::get<std::int64_t>(model.at("fc.b")), 1);
  EXPECT_EQ(std::get<std::int64_t>(model.at("head")), 2);
  EXPECT_EQ(std::get<std::int64_t>(sd.at("step")), 3);

  // Whole subtrees move; the emptied container goes, empty ones stay.
  StateDict tree{{"model", StateDict{{"a", StateDict{{"x", 1}}}, {"empty", StateDict{}}, {"list", StateList{4, 5}}}},
                 {"keep", StateDict{}}};
  replace_fqn_prefix(tree, "model/", "net/");
  EXPECT_EQ(tree.count("model"), 0u);
  EXPECT_EQ(tree.count("keep"), 1u);
  EXPECT_EQ(std::get<std::int64_t>(value_at(tree, "net/a/x")), 1);
  EXPECT_TRUE(std::get<StateDict>(value_at(tree, "net/empty")).empty());
  EXPECT_EQ(std::get<StateList>(value_at(tree, "net/list")).size(), 2u);
  EXPECT_EQ(std::get<std::int64_t>(value_at(tree, "net/list/1")), 5);
}

TEST(ReplaceFqnPrefix, RefusesWhatWouldBreakTheNest) {
  StateDict sd{{"groups", StateList{1, 2}}, {"a", 1}, {"b", StateDict{{"c", 2}}}, {"x", 3}, {"y", StateDict{{"x", 4}}}};
  const auto before = flatten_state_dict(sd).leaves.size();
  EXPECT_THROW(replace_fqn_prefix(sd, "b/", "b/"), UsageError);
  EXPECT_THROW(replace_fqn_prefix(sd, "groups/0", "groups/5"), UsageError);  // a list with a gap
  EXPECT_THROW(replace_fqn_prefix(sd, "b/", "a/"), UsageError);              // under a leaf
  EXPECT_THROW(replace_fqn_prefix(sd, "y/", ""), UsageError);                // 'y/x' onto 'x'
  EXPECT_EQ(flatten_state_dict(sd).leaves.size(), before);
  EXPECT_EQ(std::get<std::int64_t>(value_at(sd, "b/c")), 2);
  EXPECT_EQ(std::get<std::int64_t>(value_at(sd, "y/x")), 4);
}

// --- storage ---------------------------------------------------------------

TEST(Storage, FreeAndAllocKeepTheTensorEveryHolderSees) {
  auto t = at::zeros({4, 3}, at::kFloat).set_requires_grad(true);
  const auto holder = t;  // what an optimizer or a module holds
  EXPECT_TRUE(storage_allocated(t));
  EXPECT_TRUE(free_storage(t));
  EXPECT_FALSE(storage_allocated(holder));
  EXPECT_EQ(holder.storage().nbytes(), 0u);
  EXPECT_EQ(holder.sizes(), (at::IntArrayRef{4, 3}));  // the shape stays
  EXPECT_FALSE(free_storage(t));                       // already freed
  EXPECT_TRUE(alloc_storage(t, {4, 3}));
  EXPECT_EQ(holder.storage().nbytes(), 48u);
  EXPECT_FALSE(alloc_storage(t, {12}));  // already that size
  {
    c10::NoGradGuard no_grad;
    t.fill_(2.5);
  }
  EXPECT_TRUE(at::equal(holder.detach(), at::full({4, 3}, 2.5)));
  EXPECT_TRUE(holder.requires_grad());
}

TEST(Storage, RefusesUnsafeRequests) {
  auto t = at::zeros({4, 3});
  EXPECT_THROW(free_storage(t[1]), UsageError);        // starts inside the storage
  EXPECT_THROW(alloc_storage(t, {5, 3}), UsageError);  // allocated with another size
  EXPECT_TRUE(free_storage(t));
  EXPECT_TRUE(alloc_storage(t, {2}));  // any size once freed
  EXPECT_EQ(t.storage().nbytes(), 8u);
  float data[4] = {1, 2, 3, 4};
  EXPECT_THROW(free_storage(at::from_blob(data, {4})), UsageError);
  EXPECT_THROW(free_storage(at::Tensor()), UsageError);
  EXPECT_FALSE(storage_allocated(at::Tensor()));
}

// --- the collective ones, without MPI ---------------------------------------

TEST(WithoutMpi, SyncIsANoOpThatPlansBuckets) {
  const auto a = at::arange(4, at::kFloat);
  const auto b = at::arange(2, at::kDouble);
  const auto buckets = sync_params_and_buffers({a, b, a.clone()}, 16, 0);
  ASSERT_EQ(buckets.size(), 3u);  // a (16 bytes) fills one bucket; b is another dtype
  EXPECT_EQ(buckets[0].tensors, (std::vector<std::size_t>{0}));
  EXPECT_EQ(buckets[1].dtype, at::kDouble);
  EXPECT_EQ(buckets[2].bytes, 16u);
  EXPECT_TRUE(at::equal(a, at::arange(4, at::kFloat)));
  EXPECT_THROW(sync_params_and_buffers({a}, 16, 1), UsageError);
  EXPECT_NO_THROW(verify_param_shapes_across_ranks(NamedTensors{{"a", a}}));
  EXPECT_THROW(verify_param_shapes_across_ranks(NamedTensors{{"a", a}, {"a", b}}), CheckpointError);
}

TEST(WithoutMpi, DeviceAssignmentIsThisProcessAlone) {
  const auto local = node_local_rank();
  EXPECT_EQ(local.rank, 0);
  EXPECT_EQ(local.size, 1);
  EXPECT_FALSE(local.node.empty());
  const auto assignment = assign_device();
  EXPECT_EQ(assignment.rank, 0);
  EXPECT_EQ(assignment.size, 1);
  EXPECT_EQ(assignment.device_count, static_cast<int>(torch::cuda::device_count()));
  const auto expected = choose_device(-1, 0, assignment.device_count, current_environment());
  EXPECT_EQ(assignment.choice.device(), expected.device());
  EXPECT_EQ(assignment.description.rfind("rank 0 (node " + local.node + ", local ", 0), 0u) << assignment.description;
  EXPECT_NE(assignment.description.find(") -> " + expected.summary()), std::string::npos) << assignment.description;
  EXPECT_EQ(gather_device_descriptions(assignment), (std::vector<std::string>{assignment.description}));
}

}  // namespace
}  // namespace h5dcp
