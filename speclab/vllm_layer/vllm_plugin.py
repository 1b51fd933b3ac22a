"""speclab's vLLM plugin: engine processes that exit at once, and a correct CPU sampler.

In every vLLM process it first installs ``speclab.vllm_layer.vllm_cpu_fixes`` (vLLM's CPU build spreads a
request's temperature over its draft tokens wrongly, which breaks speculative sampling there).

vLLM's EngineCore and its workers are processes of their own, and each holds torch.compile's
whole object graph. When one exits, the interpreter's last garbage collection walks all of it:
on the 2-core CPU machine a worker spent 3-4 s there, while vLLM waits up to 5 s before it
force-kills an engine's processes, so every engine close took 5.5-5.9 s. Freezing the heap at
exit (``gc.freeze``) skips that walk; the memory goes back with the process anyway. Measured on
that machine, one engine at a time: a close took 2.2-2.3 s, and /dev/shm kept no new segments.
What stays unfreed is reported by nanobind (Triton's bindings) as "leaked instances" in the
engine's log: the process is exiting, so the memory goes back to the system all the same.

vLLM runs every ``vllm.general_plugins`` entry point in each of its processes; the heap freeze acts
only in processes that multiprocessing started (EngineCore, workers), never in the notebook kernel
or script that opened the engine. ``VLLM_PLUGINS`` naming other plugins only leaves it out.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing

from . import vllm_cpu_fixes

_registered = False


def register() -> None:
    """vLLM's entry point: correct the CPU sampler; in a vLLM child process, freeze the heap at exit
    (once per process)."""
    global _registered
    vllm_cpu_fixes.install()
    vllm_cpu_fixes.register_kernels_once()
    if _registered or multiprocessing.parent_process() is None:
        return
    _registered = True
    atexit.register(gc.freeze)
