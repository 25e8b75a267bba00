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
from ._format import (MAX_DEPTH, PACKS, Budget, check_key, check_storage, container_kind, escape_key,
                      in_position_order, leaf_kind, packed_tensors, packs_known, tensor_info, unescape_key,
                      value_bytes)


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


class _Packed:
    """A packed tensor met as a child of its container: its pack and info."""

    def __init__(self, pack, info):
        self.pack, self.info = pack, info


def _packed_by_parent(f, fqn, budget):
    """The packed tensors under the container `fqn` ("" for all), by the fqn
    of their parent: {parent: [(link name, fqn, _Packed)]}."""
    out = {}
    for child, (pack, info) in packed_tensors(f, budget).items():
        if fqn and not child.startswith(fqn + "/"):
            continue
        parent, _, name = child.rpartition("/")
        out.setdefault(parent, []).append((name, child, _Packed(pack, info)))
    return out


def build(group, fqn, on_tensor, on_value):
    """The dict or list `group` (at `fqn`, "" for the root) as Python
    containers, each tensor dataset replaced by on_tensor(dataset, TensorInfo)
    and each value dataset by on_value(dataset, kind, fqn). A packed tensor
    (format 1.2) comes as on_tensor(its pack, TensorInfo with pack_offset)."""
    walk = _Walk(group.file)
    skip_packs = packs_known(group.file)
    packed = _packed_by_parent(group.file, fqn, walk.budget) if skip_packs else {}
    placed = set()
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
            if skip_packs and not parent_fqn and link == PACKS:
                continue  # read by packed_tensors
            child = link if not parent_fqn else parent_fqn + "/" + link
            obj = walk.child(parent, link, child)
            entries.append((check_key(obj, link, child), child, obj))
        for name, child, obj in packed.get(parent_fqn, []):
            key = unescape_key(name)
            if any(c == child for _, c, _ in entries):
                raise FormatError("h5dcp: the packed tensor '%s' is also an object of the tree: the checkpoint is "
                                  "damaged" % child)
            entries.append((key, child, obj))
        placed.add(parent_fqn)
        if isinstance(out, list):
            entries = in_position_order(entries, parent_fqn)
        else:  # the file's order, by link name, packed tensors among the others
            entries.sort(key=lambda e: escape_key(e[0]).encode("utf-8", "surrogateescape"))
        for key, child, obj in entries:
            if isinstance(obj, _Packed):
                value = None
                leaves.append((out, key if isinstance(out, dict) else len(out), obj.pack, "tensor", child, obj.info))
            elif isinstance(obj, h5py.Group):
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
    stray = sorted(set(packed) - placed)
    if stray:
        raise FormatError("h5dcp: the packed tensor '%s' lies in no container of the checkpoint"
                          % packed[stray[0]][0][1])
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
            if fqn in packed_tensors(f, Budget(f)):
                raise FormatError("h5dcp: the prefix '%s' of '%s' names a tensor or value, not a dict or list"
                                  % (prefix, f.filename))
            raise KeyError("h5dcp: '%s' holds nothing at prefix '%s'" % (f.filename, prefix))
        if obj.id.links.get_info(name).type != h5py.h5l.TYPE_HARD:
            raise FormatError("h5dcp: the prefix '%s' of '%s' passes a soft or external link: h5dcp checkpoints "
                              "hold only hard links" % (prefix, f.filename))
        obj = obj[part]
    if not isinstance(obj, h5py.Group):
        raise FormatError("h5dcp: the prefix '%s' of '%s' names a %s, not a dict or list"
                          % (prefix, f.filename, "tensor or value" if isinstance(obj, h5py.Dataset) else "link"))
    return obj, fqn
