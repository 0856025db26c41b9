"""count_io: the bytes a kernel call loads and stores, counted by hooking the Triton interpreter (chapters 05-09).

Each masked load and store counts the elements whose mask is true, per launch and per tensor argument. An atomic
read-modify-write (``tl.atomic_add`` etc.) counts as both a load and a store of its elements.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flashsim import kernels
from flashsim.errors import FlashsimError
from flashsim.kernels.runtime import interpreting


@dataclass
class IOCount:
    """Bytes a kernel call loaded and stored, as the interpreter saw them.

    ``launches``: one dict per kernel launch, in order: {"name", "loads": {tensor: bytes}, "stores": {...}}.
    Tensors are named by the kernel's argument names (Q, K, ...); addresses outside every tensor argument
    are counted under "?".
    """
    load_bytes: int = 0
    store_bytes: int = 0
    launches: list = field(default_factory=list)
    result: object = None

    def per_tensor(self) -> dict:
        """{launch name: {"loads": {...}, "stores": {...}}} (launches of one name are added together)."""
        out: dict = {}
        for L in self.launches:
            e = out.setdefault(L["name"], {"loads": {}, "stores": {}})
            for kind in ("loads", "stores"):
                for t, b in L[kind].items():
                    e[kind][t] = e[kind].get(t, 0) + b
        return out


def _interp_modules():
    from triton.runtime import interpreter as interp      # lazily: triton is an optional dependency
    return interp, interp.InterpreterBuilder, interp.GridExecutor


def count_io(kernel_call, *args, **kwargs) -> IOCount:
    """Run ``kernel_call(*args, **kwargs)`` in the Triton interpreter, counting the bytes of every load and store.

    Hooks ``InterpreterBuilder.create_masked_load``/``create_masked_store`` (and ``create_load``/``create_store``,
    which delegate to them on the Triton versions we support, 3.6 and 3.9; nested calls are counted once) plus
    ``GridExecutor.__call__`` to learn each launch's name and tensor arguments. ``create_atomic_rmw`` (what
    ``tl.atomic_add`` and the other read-modify-write atomics become; where the interpreter has it) is hooked too:
    its masked elements count as load bytes and as store bytes, the read and the write an atomic does in L2. The
    hooks are restored afterwards, also when the call raises. The call's return value is in ``.result``.
    """
    if not interpreting():
        raise FlashsimError("count_io needs the Triton interpreter (it hooks the interpreter's loads and stores); "
                            "on a GPU use ncu_profile, or start a fresh process with "
                            "flashsim.kernels.select_backend(interpret=True)")
    kernels.interpreter_self_check()     # run once before hooking, so its 10-element kernel is never counted
    interp, Builder, Grid = _interp_modules()
    counts = IOCount()
    state = {"depth": 0, "launch": None, "ranges": None}

    def tensor_of(addrs: np.ndarray) -> list:
        starts, ends, names = state["ranges"]
        idx = np.searchsorted(starts, addrs, side="right") - 1
        out = {}
        for u, c in zip(*np.unique(idx, return_counts=True)):
            name = names[u] if u >= 0 and addrs[idx == u].max() < ends[u] else "?"
            out[name] = out.get(name, 0) + int(c)
        return out

    def record(kind: str, ptrs, mask) -> None:
        ptr_data = np.asarray(ptrs.data)
        elem = ptrs.get_element_ty()
        nbytes = max(1, elem.primitive_bitwidth // 8)
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), ptr_data.shape) if mask is not None else \
            np.ones(ptr_data.shape, dtype=bool)
        addrs = ptr_data[m].astype(np.uint64).ravel()
        total = int(addrs.size) * nbytes
        if kind == "load":
            counts.load_bytes += total
        else:
            counts.store_bytes += total
        launch = state["launch"]
        if launch is None or addrs.size == 0:
            return
        bucket = launch["loads" if kind == "load" else "stores"]
        for name, n in tensor_of(addrs).items():
            bucket[name] = bucket.get(name, 0) + n * nbytes

    orig = {name: getattr(Builder, name) for name in
            ("create_masked_load", "create_masked_store", "create_load", "create_store")}
    orig_rmw = getattr(Builder, "create_atomic_rmw", None)      # guarded: present in triton 3.6 and 3.9
    orig_call = Grid.__call__

    def wrap(name, kind, mask_pos, implicit_mask):
        fn = orig[name]

        def hooked(self, *a, **kw):
            if state["depth"] == 0:
                ptrs = a[0] if a else kw.get("ptrs", kw.get("ptr"))
                if implicit_mask:
                    mask = None
                else:
                    mask = a[mask_pos] if len(a) > mask_pos else kw.get("mask")
                record(kind, ptrs, mask)
            state["depth"] += 1
            try:
                return fn(self, *a, **kw)
            finally:
                state["depth"] -= 1
        return hooked

    def hooked_rmw(self, rmwOp, ptr, val, mask, *a, **kw):
        if state["depth"] == 0:          # a read-modify-write: its elements are read and written
            record("load", ptr, mask)
            record("store", ptr, mask)
        state["depth"] += 1
        try:
            return orig_rmw(self, rmwOp, ptr, val, mask, *a, **kw)
        finally:
            state["depth"] -= 1

    def hooked_call(self, *args_dev, **kw):
        names = list(self.arg_names)
        bound = dict(zip(names, args_dev))
        bound.update(kw)
        ranges = []
        for name, t in bound.items():
            if hasattr(t, "untyped_storage"):
                st = t.untyped_storage()
                ranges.append((st.data_ptr(), st.data_ptr() + st.nbytes(), name))
        ranges.sort()
        state["ranges"] = (np.array([r[0] for r in ranges], dtype=np.uint64),
                           [r[1] for r in ranges], [r[2] for r in ranges])
        launch = {"name": getattr(self.fn, "__name__", "?"), "loads": {}, "stores": {}}
        state["launch"] = launch
        counts.launches.append(launch)
        try:
            return orig_call(self, *args_dev, **kw)
        finally:
            state["launch"] = None

    try:
        Builder.create_masked_load = wrap("create_masked_load", "load", 1, False)
        Builder.create_masked_store = wrap("create_masked_store", "store", 2, False)
        Builder.create_load = wrap("create_load", "load", 0, True)
        Builder.create_store = wrap("create_store", "store", 0, True)
        if orig_rmw is not None:
            Builder.create_atomic_rmw = hooked_rmw
        Grid.__call__ = hooked_call
        counts.result = kernel_call(*args, **kwargs)
    finally:
        for name, fn in orig.items():
            setattr(Builder, name, fn)
        if orig_rmw is not None:
            Builder.create_atomic_rmw = orig_rmw
        Grid.__call__ = orig_call
    return counts
