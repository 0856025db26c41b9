"""The few Gluon names that differ between the triton versions the kernels run under, resolved once.

The kernels are written against triton 3.6's Gluon (the CUDA images' triton) and run unchanged under the course's
locked triton (3.9): later versions renamed the TMA copy from global to shared memory (``async_load``), the barrier
over a partition's warps (``barrier``) and wrapped the TMA reduce (``async_atomic_add``). Each kernel module takes
these from here, so a rename is handled in one place. So is :func:`mma_wait`, a wgmma wait that an attribute of
the op (which only newer Triton's barrier pass reads) can keep to the calling warpgroup.
"""
from __future__ import annotations

from triton._C.libtriton import ir
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import _unwrap_if_constexpr, builtin
from triton.experimental.gluon.language.nvidia import hopper as _hopper
from triton.experimental.gluon.language.nvidia.hopper import tma

#: a barrier over the warps of the calling partition (``thread_barrier`` up to triton 3.6, ``barrier`` later)
sync = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier

#: the TMA copy of a tile from global into shared memory, completed on an mbarrier by its byte count
#: (``async_copy_global_to_shared`` up to triton 3.6, ``async_load`` later)
tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared


@builtin
def _tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    """TMA bulk reduce (cp.reduce.async.bulk.tensor .add): global[box at coord] += shared ``src``; completion is
    tracked like a TMA store's (``tma.store_wait``). For triton versions without ``tma.async_atomic_add``."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


#: the TMA reduce-add of an fp32 tile from shared memory into global memory
tma_add = tma.async_atomic_add if hasattr(tma, "async_atomic_add") else _tma_reduce_add


@builtin
def mma_wait(num_outstanding=0, deps=None, own=False, _semantic=None):
    """``warpgroup_mma_wait``; with ``own`` (a constexpr) for the calling warpgroup's wgmma only (the op's
    ``warpGroupLocal`` attribute).

    In a partition of more than 4 warps, Triton's shared-memory barrier pass treats every wgmma wait as a wait for
    all the partition's warpgroups and puts a barrier over all of them behind it, in case a later store overwrites
    an operand another warpgroup's wgmma still reads. Where the code orders those stores itself (a barrier after
    each warpgroup's own wait, before any operand is overwritten), that barrier only makes the warpgroups wait for
    each other. Returns what ``warpgroup_mma_wait`` returns."""
    out = _hopper.warpgroup_mma_wait(num_outstanding, deps, _semantic=_semantic)
    if _unwrap_if_constexpr(own):
        first = out[0] if isinstance(out, tuple) else out
        first.handle.set_attr("warpGroupLocal", _semantic.builder.get_unit_attr())
    return out
