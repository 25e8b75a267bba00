"""Walking the tree of a checkpoint into the nested state dict it mirrors,
with the leaves made by the caller (tensors read, placeholders, checks).

The whole tree is checked before any tensor or value is read, as the C++
reader's index walk does: h5dcp writes a tree of hard links, each object
once, every dataset's data inside the file. So a soft or external link, an
object reached twice (a cycle, or a group shared by two parents: 2^n paths
through n such levels), nesting deeper than MAX_DEPTH, external storage, a
virtual dataset, and datasets declaring more bytes than the file holds are
refused before anything is followed, opened elsewhere or allocated. The walk
is iterative (a deep file cannot end in RecursionError)."""

import h5py

from ._errors import FormatError, reading
from ._format import (MAX_DEPTH, Budget, check_key, check_storage, container_kind, in_position_order, leaf_kind,
                      tensor_info, value_bytes)


class _Walk:
    """The objects met so far, by address, and the file's byte budget."""

    def __init__(self, f):
        self.path = f.filename
        self.seen = {}
        self.budget = Budget(f)

    def remember(self, info, fqn):
        key = (info.fileno, info.addr)
        if key in self.seen:
            raise FormatError("h5dcp: '%s' is the object already read as '%s': a group or dataset linked twice "
                              "(a cycle, or shared), which h5dcp never writes" % (fqn, self.seen[key]))
        self.seen[key] = fqn or "/"

    def child(self, group, link, fqn):
        """The object the link `link` of `group` names, after checking the
        link is a hard one and its target was not met before."""
        name = link.encode("utf-8", "surrogateescape")
        with reading(fqn):
            kind = group.id.links.get_info(name).type
        if kind != h5py.h5l.TYPE_HARD:
            raise FormatError("h5dcp: '%s' is %s link: h5dcp checkpoints hold only hard links (a link may lead back "
                              "into its own group or out of the file)"
                              % (fqn, "a soft" if kind == h5py.h5l.TYPE_SOFT else "an external"))
        with reading(fqn):
            self.remember(h5py.h5o.get_info(group.id, name), fqn)
            return group[link]


def build(group, fqn, on_tensor, on_value):
    """The dict or list `group` (at `fqn`, "" for the root) as Python
    containers, each tensor dataset replaced by on_tensor(dataset, TensorInfo)
    and each value dataset by on_value(dataset, kind, fqn)."""
    walk = _Walk(group.file)
    with reading(fqn):
        walk.remember(h5py.h5o.get_info(group.id), fqn)
    top = [] if container_kind(group, fqn) == "list" else {}
    # (group, its fqn, its depth, the Python container it fills)
    pending = [(group, fqn, len(fqn.split("/")) if fqn else 0, top)]
    leaves = []  # (container, key, dataset, kind, fqn, TensorInfo or None), read once all is checked
    while pending:
        parent, parent_fqn, depth, out = pending.pop()
        entries = []
        with reading(parent_fqn):
            links = list(parent)
        for link in links:
            child = link if not parent_fqn else parent_fqn + "/" + link
            obj = walk.child(parent, link, child)
            entries.append((check_key(obj, link, child), child, obj))
        if isinstance(out, list):
            entries = in_position_order(entries, parent_fqn)
        for key, child, obj in entries:
            if isinstance(obj, h5py.Group):
                if depth + 1 >= MAX_DEPTH:
                    raise FormatError("h5dcp: '%s' is nested %d containers deep, deeper than the %d h5dcp reads: "
                                      "the checkpoint is damaged" % (child, depth + 1, MAX_DEPTH))
                value = [] if container_kind(obj, child) == "list" else {}
                pending.append((obj, child, depth + 1, value))
            elif isinstance(obj, h5py.Dataset):
                check_storage(obj, child)
                kind = leaf_kind(obj, child)
                if kind == "tensor":
                    info = tensor_info(obj, child, walk.budget)
                else:
                    walk.budget.claim(obj, value_bytes(obj, kind, child), "value '%s'" % child)
                    info = None
                value = None
                leaves.append((out, key if isinstance(out, dict) else len(out), obj, kind, child, info))
            else:
                raise FormatError("h5dcp: '%s' is neither a group nor a dataset" % child)
            if isinstance(out, list):
                out.append(value)
            else:
                out[key] = value
    for out, key, obj, kind, child, info in leaves:
        with reading(child):
            out[key] = on_tensor(obj, info) if kind == "tensor" else on_value(obj, kind, child)
    return top


def subtree(f, prefix):
    """The group named by the fqn `prefix` ("model", "model/", "optim/state"),
    and its fqn without the trailing slash. Each link on the way must be a
    hard one: a soft or external link would lead elsewhere, or out of the file."""
    fqn = (prefix or "").strip("/")
    if not fqn:
        return f, ""
    obj = f
    for part in fqn.split("/"):
        if not part:
            continue
        name = part.encode("utf-8", "surrogateescape")
        if not isinstance(obj, h5py.Group) or not obj.id.links.exists(name):
            raise KeyError("h5dcp: '%s' holds nothing at prefix '%s'" % (f.filename, prefix))
        if obj.id.links.get_info(name).type != h5py.h5l.TYPE_HARD:
            raise FormatError("h5dcp: the prefix '%s' of '%s' passes a soft or external link: h5dcp checkpoints "
                              "hold only hard links" % (prefix, f.filename))
        obj = obj[part]
    if not isinstance(obj, h5py.Group):
        raise FormatError("h5dcp: the prefix '%s' of '%s' names a %s, not a dict or list"
                          % (prefix, f.filename, "tensor or value" if isinstance(obj, h5py.Dataset) else "link"))
    return obj, fqn
