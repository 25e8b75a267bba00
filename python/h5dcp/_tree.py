"""Walking the tree of a checkpoint into the nested state dict it mirrors,
with the leaves made by the caller (tensors read, placeholders, checks)."""

import h5py

from ._errors import FormatError
from ._format import children, leaf_kind, tensor_info


def build(group, fqn, on_tensor, on_value):
    """The dict or list `group` (at `fqn`, "" for the root) as Python
    containers, each tensor dataset replaced by on_tensor(dataset, TensorInfo)
    and each value dataset by on_value(dataset, kind, fqn)."""
    kind, entries = children(group, fqn)
    items = []
    for key, link, obj in entries:
        child = link if not fqn else fqn + "/" + link
        if isinstance(obj, h5py.Group):
            value = build(obj, child, on_tensor, on_value)
        elif isinstance(obj, h5py.Dataset):
            leaf = leaf_kind(obj, child)
            value = on_tensor(obj, tensor_info(obj, child)) if leaf == "tensor" else on_value(obj, leaf, child)
        else:
            raise FormatError("h5dcp: '%s' is neither a group nor a dataset" % child)
        items.append((key, value))
    return [value for _, value in items] if kind == "list" else dict(items)


def subtree(f, prefix):
    """The group named by the fqn `prefix` ("model", "model/", "optim/state"),
    and its fqn without the trailing slash."""
    fqn = (prefix or "").strip("/")
    if not fqn:
        return f, ""
    obj = f.get(fqn)
    if obj is None:
        raise KeyError("h5dcp: '%s' holds nothing at prefix '%s'" % (f.filename, prefix))
    if not isinstance(obj, h5py.Group):
        raise FormatError("h5dcp: the prefix '%s' of '%s' names a %s, not a dict or list"
                          % (prefix, f.filename, "tensor or value" if isinstance(obj, h5py.Dataset) else "link"))
    return obj, fqn
