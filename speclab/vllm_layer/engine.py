"""The one place that opens a vLLM engine for a profile, and closes it without leftovers.

``open_engine`` is a context manager: it checks the speculative config before anything
starts, picks defaults that suit the device, turns stats logging on (so that metrics can be
read), and on exit shuts the engine core down and reaps every child process it left. It works
from a notebook kernel and from a script; a script must guard its entry point with
``if __name__ == "__main__":`` because vLLM's CPU platform starts its workers with ``spawn``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import sys
import time
from pathlib import Path

from ..errors import SpeclabError
from ..models import random_weights
from ..models.model_config import read_config
from ..models.model_refs import resolve_model
from ..models.profiles import Profile, require_device
from ..models.provision import fetch_smollm2
from . import ipc, logs, start_watch, validation

# CPU: bf16 weights, a small KV cache (VLLM_CPU_KVCACHE_SPACE, GiB) and short contexts suit a
# 135M model on a 2-core machine. GPU: leave room for a draft model beside the target; contexts
# up to 8k tokens, or the model's own limit where that is shorter.
# CPU engines run eager (no torch.compile): on the 2-core machine a compiled engine spent about 100 s
# compiling before its first token, 136 s with an empty compile cache, where an eager one started in
# 3-5 s and ran 8 prompts (96 tokens, greedy) about a fifth slower one at a time and as fast batched
# (``python -m speclab.measure.cpu_speed`` with and without --no-enforce-eager).
# The lessons start about 30 engines, so compiling was most of the main job. Pass
# enforce_eager=False for a compiled CPU engine; GPU engines compile (and capture CUDA graphs).
CPU_DEFAULTS = {"dtype": "bfloat16", "max_model_len": 2048, "max_num_seqs": 32, "enforce_eager": True}
GPU_DEFAULTS = {"gpu_memory_utilization": 0.85, "max_model_len": 8192}
CPU_KVCACHE_GIB = "2"

# vLLM's CPU backend keeps one core for its scheduler process on x86 (VLLM_CPU_NUM_OF_RESERVED_CPU).
# On a 2-core machine the model then computes on one core. Measured side by side there
# (``python -m speclab.measure.cpu_speed --reserved-cpus 1,0``, SmolLM2, 8 prompts): both cores computing
# gave the baseline 17% more throughput with the prompts batched and the same one at a time, and
# n-gram and EAGLE-3 kept their batch-1 speedups (1.6x, 1.4x). So small machines compute on every core.
SMALL_MACHINE_CPUS = 2
RESERVED_CPUS_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"

# A CPU engine is three processes by default: the caller, vLLM's EngineCore and its worker, and each
# spawned one imports vLLM again (about 13 s apiece on the 2-core machine). SPECLAB_ENGINE_IN_PROCESS=1
# runs the engine core and its worker inside the caller (vLLM's VLLM_ENABLE_V1_MULTIPROCESSING=0): an
# eager start took 5-7 s there against 29-31 s, and on 2 cores it also ran faster, the steps no longer
# handed between processes (``python -m speclab.measure.cpu_speed --layouts in-process,multiprocess``, two fresh
# eager engines each: baseline 37.5 against 32.1 tok/s one request at a time, n-gram k=3 1.79x against
# 1.65x; batched, n-gram 1.00x against 0.78x).
# The lessons (``make run``'s kernels, ``runner.kernel_env``) and the test suite use it; scripts and
# servers keep vLLM's default layout unless it is set.
IN_PROCESS_ENV = "SPECLAB_ENGINE_IN_PROCESS"


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so that engines and servers are shut down by their finally blocks.

    Every command that opens an engine calls it first: without it a terminated ``speclab bench`` or
    ``python -m speclab.measure.cpu_speed`` dies at once and leaves vLLM's EngineCore orphaned.
    """
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def add_enforce_eager_flag(parser) -> None:
    """``--enforce-eager/--no-enforce-eager`` for a command; left out, the device's default (CPU_DEFAULTS) holds."""
    parser.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction, default=None,
                        help="skip torch.compile: a faster start (default: eager on a CPU, compiled on a GPU)")


def cpu_environment() -> dict[str, str]:
    """The variables a CPU engine (or server) gets unless the user set them: KV-cache space, reserved cores."""
    env = {"VLLM_CPU_KVCACHE_SPACE": CPU_KVCACHE_GIB}
    if (os.cpu_count() or 1) <= SMALL_MACHINE_CPUS:
        env[RESERVED_CPUS_ENV] = "0"
    return env

# One GPU shared by several engines (a workshop room on one card, lessons run side by side): vLLM
# sizes its KV cache from the memory that becomes free while it profiles, so another engine starting
# at the same moment shrinks it or fails the start. SPECLAB_KV_CACHE_GIB gives each engine a fixed KV
# cache instead (vLLM's kv_cache_memory_bytes); gpu_memory_utilization is then only vLLM's check of
# free memory at start, so it drops to SHARED_GPU_UTILIZATION.
SHARED_GPU_ENV = "SPECLAB_KV_CACHE_GIB"
SHARED_GPU_UTILIZATION = 0.05


def kv_cache_gib(value: str) -> float | None:
    """``SPECLAB_KV_CACHE_GIB``'s value as GiB, or None when it is not a size in (0, 1024)."""
    try:
        gib = float(value)
    except ValueError:
        return None
    return gib if 0 < gib < 1024 else None


def shared_gpu_kwargs() -> dict:
    """The engine settings for a shared GPU, from ``SPECLAB_KV_CACHE_GIB``; empty when it is unset."""
    value = os.environ.get(SHARED_GPU_ENV, "").strip()
    if not value:
        return {}
    gib = kv_cache_gib(value)
    if gib is None:
        raise SpeclabError(f"{SHARED_GPU_ENV} must be the KV cache size per engine in GiB (e.g. 8), got {value!r}")
    return {"kv_cache_memory_bytes": int(gib * 2**30), "gpu_memory_utilization": SHARED_GPU_UTILIZATION}


def engine_device() -> str:
    """The device the installed vLLM runs on ("cpu" or "cuda"), whatever a profile says.

    vLLM's CPU build and its CUDA build are different distributions; the settings an engine
    needs (spawned workers, memory utilisation, KV-cache space) follow the build that is installed.
    """
    logs.import_vllm()
    from vllm.platforms import current_platform

    return "cpu" if current_platform.is_cpu() else "cuda"


def model_max_len(model: str) -> int | None:
    """``max_position_embeddings`` of a local model folder; None for a Hugging Face id."""
    if not Path(model).is_dir():
        return None
    return (read_config(model) or {}).get("max_position_embeddings")


def engine_kwargs(profile: Profile, speculative_config: dict | None = None, *, device: str | None = None,
                  **overrides) -> dict:
    """The keyword arguments ``vllm.LLM`` gets for this profile, overrides applied last."""
    device = device or profile.device
    kwargs = dict(CPU_DEFAULTS) if device == "cpu" else {**GPU_DEFAULTS, **shared_gpu_kwargs()}
    kwargs["model"] = overrides.pop("model", None) or resolve_model(profile.target)
    limit = model_max_len(kwargs["model"])
    if limit:
        kwargs["max_model_len"] = min(kwargs["max_model_len"], limit)
    kwargs["disable_log_stats"] = False  # LLM() defaults to True, and get_metrics() then fails
    if random_weights.is_weightless(kwargs["model"]):  # a shape: random weights, SmolLM2's tokenizer
        kwargs["load_format"] = "dummy"
        random_weights.note_loaded()
        if not overrides.get("skip_tokenizer_init"):
            kwargs["tokenizer"] = str(fetch_smollm2())
    if speculative_config is not None:
        kwargs["speculative_config"] = resolve_drafter(speculative_config)
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    return kwargs


def resolve_drafter(config: dict | None) -> dict | None:
    """Replace a ``local:`` drafter reference by the folder speclab provisions for it (or, with random
    weights, a Hugging Face id by its shape)."""
    if config and config.get("model"):
        config = dict(config, model=resolve_model(str(config["model"])))
    return config


def checked_runs(profile: Profile, runs: dict[str, dict | None], **engine_overrides) -> dict[str, dict | None]:
    """Every config of a run, its ``local:`` drafter resolved and checked against the target, before the first
    engine starts: a bad third config costs a second, not the two engines before it. ``open_engine`` does not
    check them again."""
    target = engine_overrides.get("model") or resolve_model(profile.target)
    tp = engine_overrides.get("tensor_parallel_size") or 1
    checked = {}
    for label, config in runs.items():
        if config is not None and not validation.is_checked(config, target, tp):
            validation.validate(resolve_drafter(config), target=target, tensor_parallel_size=tp)
            config = validation.CheckedConfig(config, target, tp)
        checked[label] = config
    return checked


def _children() -> list:
    import psutil

    return psutil.Process().children(recursive=True)


def _reap(before: set[int], timeout: float = 10.0) -> None:
    """Terminate child processes that appeared since ``before`` and are still alive."""
    import psutil

    leftovers = [p for p in _children() if p.pid not in before]
    for p in leftovers:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(leftovers, timeout=timeout)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


def _set_environment(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def environment(values: dict[str, str | None]):
    """Set variables for a block (None unsets one), then put every one back as it was."""
    saved = {name: os.environ.get(name) for name in values}
    _set_environment(values)
    try:
        yield
    finally:
        _set_environment(saved)


@contextlib.contextmanager
def _in_process(wanted: bool):
    """vLLM reads VLLM_ENABLE_V1_MULTIPROCESSING while it builds an engine; set it for that build only,
    so that servers and engines opened later by this process keep vLLM's default."""
    if not wanted:
        yield
        return
    try:
        with environment({"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}):
            yield
    finally:
        from vllm import envs

        # an engine core freezes vLLM's environment reads once it is built (envs.enable_envs_cache);
        # in this process that would also freeze them for every later engine
        with contextlib.suppress(AttributeError):
            envs.disable_envs_cache()


def _torch_threads(count: int | None = None) -> int:
    """torch's intra-op thread count; with ``count``, set it first."""
    import torch

    if count:
        torch.set_num_threads(count)
    return torch.get_num_threads()


def shutdown(llm) -> None:
    """Stop an engine's core process (and its workers)."""
    engine = getattr(llm, "llm_engine", None)
    for obj in (llm, engine, getattr(engine, "engine_core", None)):
        stop = getattr(obj, "shutdown", None)
        if callable(stop):
            with contextlib.suppress(Exception):
                stop()
            break


@contextlib.contextmanager
def open_engine(profile: Profile, speculative_config: dict | None = None,
                *, quiet: bool = True, tensor_parallel_size: int = 1, **overrides):
    """Open ``vllm.LLM`` for a profile with an optional speculative config; always shut it down.

    ``quiet``: vLLM logs errors only, and its start-up output goes to ``speclab.vllm_layer.logs.log_path()``."""
    require_device(profile)
    target = overrides.get("model") or resolve_model(profile.target)
    checked = validation.is_checked(speculative_config, target, tensor_parallel_size)
    speculative_config = resolve_drafter(speculative_config)
    if not checked:
        validation.validate(speculative_config, target=target, tensor_parallel_size=tensor_parallel_size)
    speculative_config = None if speculative_config is None else dict(speculative_config)  # plain, for vLLM
    if quiet:  # vLLM's start-up warnings drown a lesson's output; errors still show
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    device = engine_device()
    if device == "cpu":
        for name, value in cpu_environment().items():
            os.environ.setdefault(name, value)
    else:  # a kernel or script that touched CUDA cannot fork workers ("Cannot re-initialize CUDA")
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    if tensor_parallel_size != 1:
        overrides["tensor_parallel_size"] = tensor_parallel_size
    kwargs = engine_kwargs(profile, speculative_config, device=device, **overrides)
    # vLLM's spawned processes start multiprocessing's resource tracker on first use. It ignores
    # SIGTERM, so reaping it as one of the engine's leftovers cost every close a 10 s timeout (and the
    # next engine started another). Started first, it predates the engine and lives as long as we do.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    before = {p.pid for p in _children()}

    from vllm import LLM

    in_process = device == "cpu" and os.environ.get(IN_PROCESS_ENV) == "1"
    if in_process and quiet:  # in a notebook's kernel tqdm.auto would draw the weights' progress bar as a widget
        kwargs.setdefault("use_tqdm_on_load", False)
    torch_threads = _torch_threads() if in_process else None  # the worker will set them in this process
    started = time.perf_counter()
    llm = None
    sockets = ipc.acquire()
    try:
        with logs.to_log() if quiet else contextlib.nullcontext(), _in_process(in_process), \
                start_watch.watched(before):  # start-up lines: log file; Ctrl-C ends the start
            llm = LLM(**kwargs)
        llm.speclab_start_seconds = time.perf_counter() - started
        llm.speclab_speculative_config = kwargs.get("speculative_config")
        llm.speclab_per_request_counters = kwargs.get("per_request_spec_decode_metrics", "none") != "none"
        yield llm
    finally:
        if llm is not None:
            shutdown(llm)
        del llm
        gc.collect()
        _reap(before)
        if sockets:
            ipc.release()
        if in_process:  # the worker ran in this process and set torch's threads for serving
            _torch_threads(torch_threads)


def vllm_descendants(root=None) -> list:
    """Live vLLM processes (EngineCore, workers) below ``root`` (default: this process); zombies skipped."""
    import psutil

    root = root or psutil.Process()
    found = []
    for p in root.children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and any(w in " ".join(p.cmdline()) for w in ("VLLM", "EngineCore")):
                found.append(p)
        except psutil.Error:  # exited or became a zombie while we looked
            continue
    return found


def engine_processes() -> list[str]:
    """Command lines of this process's live vLLM descendants: empty once every engine is shut down."""
    import psutil

    lines = []
    for p in vllm_descendants():
        try:
            lines.append(" ".join(p.cmdline()))
        except psutil.Error:
            continue
    return lines
