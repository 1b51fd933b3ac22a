"""Named model sets ("profiles") and device detection.

A profile says which target model a lesson runs, which drafters pair with it, and on which
device. Notebooks take a profile name as a papermill parameter, so that the same lesson runs
on a laptop CPU (``cpu-tiny``) and on a GPU (``gpu-llama8b``) by changing one value.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from ..errors import SpeclabError


@dataclass(frozen=True)
class Profile:
    name: str
    device: str  # "cpu" or "cuda"
    target: str  # a Hugging Face id, or "local:<name>" for a model speclab provisions
    description: str
    # drafters by method; "local:<name>" entries are built or provisioned by speclab
    drafters: dict = field(default_factory=dict)
    # synthetic acceptance: dummy weights, acceptance imposed by vLLM (GPU timing studies)
    synthetic: bool = False
    gated: bool = False

    def drafter(self, method: str) -> str | None:
        return self.drafters.get(method)

    def has(self, method: str) -> bool:
        """True when the profile can run ``method``: n-gram and suffix need no drafter, MTP brings its own model."""
        return method in ("ngram", "ngram_gpu", "suffix", "mtp") or method in self.drafters

    def by_device(self, cpu, gpu):
        """A lesson default that depends on the device: ``cpu`` on a CPU profile, ``gpu`` on a GPU one."""
        return cpu if self.device == "cpu" else gpu

    @property
    def offline(self) -> bool:
        """True when speclab provisions every model itself (no Hugging Face download)."""
        return self.target.startswith("local:")


# SmolLM2's drafters, trained by speclab and shipped in data/drafters (tiny-mtp: a random stand-in)
TINY_DRAFTERS = {
    "draft_model": "local:drafter-draft_model",
    "eagle": "local:drafter-eagle",
    "eagle3": "local:drafter-eagle3",
    "medusa": "local:drafter-medusa",
    "mtp": "local:tiny-mtp",
}

# lesson 05 on a GPU profile: a published model with an MTP layer of its own (a target, not a drafter)
MTP_MODEL = "XiaomiMiMo/MiMo-7B-RL"

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        Profile(
            name="cpu-tiny",
            device="cpu",
            target="local:smollm2-135m-instruct",
            description="SmolLM2-135M-Instruct on the CPU, offline (from PyPI); drafters built for it by speclab",
            drafters=TINY_DRAFTERS,
        ),
        Profile(
            name="gpu-tiny",
            device="cuda",
            target="local:smollm2-135m-instruct",
            description="SmolLM2-135M-Instruct on a GPU with the same drafters as cpu-tiny: offline, no token",
            drafters=TINY_DRAFTERS,
        ),
        Profile(
            name="gpu-llama8b",
            device="cuda",
            target="meta-llama/Llama-3.1-8B-Instruct",
            description="Llama-3.1-8B-Instruct with its EAGLE / EAGLE-3 heads and a Llama-3.2-1B draft (gated: needs a "
                        "Hugging Face token)",
            drafters={
                "draft_model": "meta-llama/Llama-3.2-1B-Instruct",
                "eagle": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
                "eagle3": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                "mtp": MTP_MODEL,
            },
            gated=True,
        ),
        Profile(
            name="gpu-qwen3-8b",
            device="cuda",
            target="Qwen/Qwen3-8B",
            description="Qwen3-8B with a Qwen3-0.6B draft and an EAGLE-3 head; no gated access needed",
            drafters={
                "draft_model": "Qwen/Qwen3-0.6B",
                "eagle3": "AngelSlim/Qwen3-8B_eagle3",
                "dflash": "z-lab/Qwen3-8B-DFlash-b16",
                "mtp": MTP_MODEL,
            },
        ),
        Profile(
            name="gpu-synthetic",
            device="cuda",
            target="shape:llama-3.1-8b",
            description="Llama-3.1-8B / 3.2-1B shapes with dummy weights; acceptance imposed by hand (timings only)",
            drafters={"draft_model": "shape:llama-3.2-1b"},
            synthetic=True,
        ),
    ]
}

DEFAULT_CPU_PROFILE = "cpu-tiny"
DEFAULT_GPU_PROFILE = "gpu-llama8b"  # what `speclab bench` measures on a GPU machine without --profile


def check_name(name: str) -> str:
    """A profile's name, refused in one line when there is no such profile (a check, not a lookup)."""
    if name not in PROFILES:
        raise SpeclabError(f"unknown profile {name!r}: choose one of {', '.join(PROFILES)} (see `speclab models list`)")
    return name


def get_profile(name: str | None = None) -> Profile:
    """Look a profile up by name, once, at an edge (a command, a lesson's parameter cell, a driver's main);
    ``None`` picks the default for this machine. Everything past the edge takes the ``Profile``."""
    if isinstance(name, Profile):
        raise TypeError(f"get_profile takes a profile's name; {name.name!r} is already a Profile: pass it on")
    return PROFILES[check_name(default_profile_name() if name is None else name)]


def cuda_available() -> bool:
    """True when an NVIDIA GPU is usable. Asks torch when it is importable, else nvidia-smi."""
    override = os.environ.get("SPECLAB_DEVICE")
    if override in ("cpu", "cuda"):
        return override == "cuda"
    if not shutil.which("nvidia-smi") and not any(os.path.exists(d) for d in ("/dev/nvidiactl", "/dev/dxg")):
        return False  # no NVIDIA driver (nor WSL's /dev/dxg), so no CUDA: skip importing torch (seconds)
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        pass
    if shutil.which("nvidia-smi"):
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    return False


def default_profile_name() -> str:
    """``SPECLAB_PROFILE`` if set, else the CPU profile (the offline default).

    GPU profiles need model downloads, so a GPU user picks one on purpose.
    """
    return os.environ.get("SPECLAB_PROFILE", DEFAULT_CPU_PROFILE)


def require_device(profile: Profile) -> None:
    """Fail with one clear line when a GPU profile is asked for on a machine without a GPU."""
    if profile.device == "cuda" and not cuda_available():
        raise SpeclabError(
            f"profile {profile.name!r} needs an NVIDIA GPU and none was found: "
            f"use --profile {DEFAULT_CPU_PROFILE} (or set SPECLAB_PROFILE={DEFAULT_CPU_PROFILE})"
        )


def list_profiles(weights_gb=lambda ref: None) -> str:
    """A human-readable table of profiles and what each needs; ``weights_gb(ref)`` (``memory.weights_gb``)
    adds each model's size where it is known."""
    lines = []
    for p in PROFILES.values():
        flags = ", ".join(f for f in ["synthetic" if p.synthetic else "", "gated" if p.gated else ""] if f)
        lines.append(f"{p.name:14s} {p.device:5s} {p.description}" + (f" [{flags}]" if flags else ""))
        refs = {"target": p.target, **p.drafters}
        sizes = {ref: None if p.synthetic else weights_gb(ref) for ref in refs.values()}
        for role, ref in refs.items():
            size = f"  ({sizes[ref]:.1f} GB)" if sizes[ref] else ""
            lines.append(f"{'':20s} {role + ':':12s} {ref}{size}")
        if any(sizes.values()):
            lines.append(f"{'':20s} {'weights:':12s} about {sum(x for x in sizes.values() if x):.0f} GB to download "
                         "for those sized above (bf16, counted from their published config.json)")
    return "\n".join(lines)
