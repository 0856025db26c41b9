"""The process ncu profiles: ``python -m flashsim.measure --child SPEC`` runs each config's calls in order."""
from __future__ import annotations

import json

from flashsim.measure.runners import kernel_runner


def run_child(spec_json: str) -> None:
    """Entry point of the ncu child process: each config's calls in order (see :func:`ncu_profile_batch`)."""
    import torch                          # lazily: torch is an optional dependency
    spec = json.loads(spec_json)
    for cfg in spec["configs"]:
        fn = kernel_runner(**cfg)
        for _ in range(spec.get("warmup", 0) + 1):
            fn()
        torch.cuda.synchronize()
        del fn
        torch.cuda.empty_cache()
