"""The adopter module a PyTorch maintainer would write to gate torch's own registered custom classes.

Load it with ``--torchbind-load=sample_classes.torch_registered``. It builds a distributed world in this process
and gives example objects where the constructors cannot be generated:

- the world: ``TORCH_CORPUS_WORLD=gloo`` (default), a single-process gloo group from a file store (rank 0 of 1);
  ``TORCH_CORPUS_WORLD=fake``, torch's fake backend (``torch.testing._internal.distributed.fake_pg``) as rank 0 of
  4, so meshes can have two dimensions without other processes;
- ``torch._C.Generator`` (a reference class, ``guard_fn`` = device): generators seeded 0 and 1; ``manual_seed``
  is the one state-changing call given arguments, the methods that hand the state out or replace it wholesale
  are excluded (they are readers, or take a state tensor the plugin cannot make);
- ``ProcessGroup``: the world group; its C methods are collectives and lifecycle calls (``abort``, ``shutdown``),
  none of which changes what a compiled program may read, so they are excluded;
- ``DeviceMesh``: a 1-D mesh, and with the fake world a 2-D mesh with dimension names;
- the DTensor placements (their constructors are C++ bindings): ``Shard(0)``, ``Shard(1)``, ``Replicate()``,
  ``Partial()``, ``Partial("max")``, ``_StridedShard(0, split_factor=2)``, ``_MaskPartial``;
- two custom ops a library would write around these classes: ``corpus::noise`` takes a ``Generator``,
  ``corpus::scale_by_world`` a ``ProcessGroup``.
"""

from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
from hypothesis import strategies as st

import conformance

WORLD = os.environ.get("TORCH_CORPUS_WORLD", "gloo")

if not dist.is_initialized():
    if WORLD == "fake":
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)
    else:
        _store = tempfile.NamedTemporaryFile(prefix="torch-corpus-store-", delete=False).name
        dist.init_process_group("gloo", store=dist.FileStore(_store, 1), rank=0, world_size=1)

from torch.distributed.device_mesh import init_device_mesh  # noqa: E402 - needs the world
from torch.distributed.tensor import placement_types as pt  # noqa: E402 - registers the placements

GENERATOR = "torch._C.Generator"
GROUP = "torch.distributed.distributed_c10d.ProcessGroup"
MESH = "torch.distributed.device_mesh.DeviceMesh"
PLACEMENTS = "torch.distributed.tensor.placement_types"


# ----- torch._C.Generator ----------------------------------------------------------------------------------------

@conformance.examples(GENERATOR)
def generators():
    return [torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)]


conformance.strategy(GENERATOR, "manual_seed", arg=None)(lambda: st.sampled_from(["0", "7", "123"]))
for _method in ("seed", "get_state", "set_state", "graphsafe_get_state", "graphsafe_set_state", "clone_state",
                "get_offset", "set_offset", "initial_seed"):
    conformance.strategy(GENERATOR, _method)(lambda: None)


@torch.library.custom_op("corpus::noise", mutates_args=())
def noise(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """``x`` plus standard normal noise drawn from ``g`` (advances ``g``)."""
    return x + torch.randn(x.shape, generator=g, dtype=x.dtype)


@noise.register_fake
def _(x, g):
    return torch.empty_like(x)


# ----- ProcessGroup ------------------------------------------------------------------------------------------------

@conformance.examples(GROUP)
def groups():
    return [dist.group.WORLD]


for _method in [m for m in dir(dist.ProcessGroup) if not m.startswith("_")
                and callable(getattr(dist.ProcessGroup, m))]:
    conformance.strategy(GROUP, _method)(lambda: None)  # collectives and lifecycle: no reader state changes


@torch.library.custom_op("corpus::scale_by_world", mutates_args=())
def scale_by_world(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """``x`` times the group's size (what a tensor-parallel layer's local shard needs)."""
    return x * group.size()


@scale_by_world.register_fake
def _(x, group):
    return torch.empty_like(x)


# ----- DeviceMesh -------------------------------------------------------------------------------------------------

@conformance.examples(MESH)
def meshes():
    out = [init_device_mesh("cpu", (dist.get_world_size(),))]
    if WORLD == "fake":
        out.append(init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")))
    return out


conformance.strategy(MESH, "get_group", arg="mesh_dim")(lambda: st.sampled_from(["0", "None"]))
conformance.strategy(MESH, "get_local_rank", arg="mesh_dim")(lambda: st.sampled_from(["0", "None"]))
conformance.strategy(MESH, "get_coordinate", arg=None)(lambda: st.just(""))
# torch's own op taking a mesh, ``_dtensor::mesh_get_process_group`` (torch/distributed/tensor/_collective_utils.py,
# Library.define; found from its definition): a dimension the mesh has
conformance.strategy(MESH, "_dtensor::mesh_get_process_group", arg="dim")(lambda: st.just("0"))
for _method in ("_flatten", "_unflatten", "_get_slice_mesh_layout", "_create_sub_mesh", "_create_flatten_mesh",
                "from_group", "get_all_groups", "_get_mesh_dim_by_name", "size", "get_rank"):
    if hasattr(torch.distributed.device_mesh.DeviceMesh, _method):
        conformance.strategy(MESH, _method)(lambda: None)


# ----- DTensor placements -----------------------------------------------------------------------------------------

@conformance.examples(f"{PLACEMENTS}.Shard")
def shards():
    return [pt.Shard(0), pt.Shard(1)]


@conformance.examples(f"{PLACEMENTS}.Replicate")
def replicates():
    return [pt.Replicate()]


@conformance.examples(f"{PLACEMENTS}.Partial")
def partials():
    return [pt.Partial(), pt.Partial("max")]


@conformance.examples(f"{PLACEMENTS}.Placement")
def placements():
    return [pt.Shard(0), pt.Replicate(), pt.Partial()]


@conformance.examples(f"{PLACEMENTS}._StridedShard")
def strided_shards():
    return [pt._StridedShard(0, split_factor=2), pt._StridedShard(1, split_factor=2)]


@conformance.examples(f"{PLACEMENTS}._MaskPartial")
def mask_partials():
    return [pt._MaskPartial(offset_shape=torch.Size([4]), offset_dim=0)]
