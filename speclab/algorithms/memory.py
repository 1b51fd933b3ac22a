"""GPU memory arithmetic for speculative decoding: weights, KV cache, and what is left.

Everything here is computed from a Hugging Face ``config.json`` (a dict), so it runs anywhere,
without weights or a GPU. The numbers follow how vLLM spends memory:

* vLLM takes ``gpu_memory_utilization`` x (GPU memory) for itself and leaves the rest alone.
* From that budget it loads the weights (target, then drafter), measures a forward pass
  (activations), keeps room for CUDA graphs and the runtime, and hands the rest to the KV cache.
* Target and drafter share one paged KV pool: every token a sequence holds costs KV in the
  target's layers *and* in the drafter's layers.

The activation/runtime/graph share is an explicit ``Allowance`` (an estimate, not a
measurement): vLLM measures it at start-up and logs it, so compare with your own log. Reading a
model's config.json is ``speclab.models.model_config``; the stacked-bar figure, ``plots.memory_plans``.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import SpeclabError
from ..models.model_config import Dims, load_config, registered_role, role_of
from ..models.shapes import SHAPES, shape_config

GIB = 1024**3
GB = 1000**3
BLOCK_SIZE = 16  # vLLM's default KV block: tokens are handed out 16 at a time
DEFAULT_GPU_SIZES_GIB = (24, 40, 80, 141)
# What nvidia-smi reports (MiB / 1024), which is less than the name on the box suggests for some
# cards. H200 measured on this project's machine (torch.cuda.mem_get_info total: 139.8 GiB).
GPU_MEMORY_GIB = {
    "A10G": 23028 / 1024, "L4": 23034 / 1024, "A100-40GB": 40960 / 1024, "L40S": 46068 / 1024,
    "A100-80GB": 81920 / 1024, "H100-80GB": 81559 / 1024, "H200": 143771 / 1024,
}

DTYPE_BYTES = {
    "float32": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "float8": 1, "int8": 1,
    "int4": 0.5,
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per value for a dtype name (``bf16``, ``fp8``, ``int4``...)."""
    try:
        return DTYPE_BYTES[str(dtype).lower().removeprefix("torch.")]
    except KeyError:
        raise SpeclabError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}") from None


def _is_quantized(dtype: str) -> bool:
    return dtype_bytes(dtype) < 2




def parameter_counts(config, role: str | None = None) -> dict[str, int]:
    """Parameters by part: embeddings, attention (q/k/v/o), mlp (gate/up/down), norms, lm_head, fc, total.

    For EAGLE heads only what the head adds counts: vLLM shares the target's embedding (and, for
    EAGLE-1, its lm_head). EAGLE-3 brings its own lm_head over a smaller draft vocabulary, and its
    one layer attends over [embedding, hidden state] (twice the width in q/k/v).
    """
    config = load_config(config)
    role = role_of(config, role)
    d = Dims.of(config)
    q_out, kv_out = d.heads * d.head_dim, d.kv_heads * d.head_dim
    attn_in = 2 * d.hidden if role == "eagle3" else d.hidden
    attention = attn_in * q_out + 2 * attn_in * kv_out + q_out * d.hidden
    if d.attention_bias:
        attention += q_out + 2 * kv_out + d.hidden
    mlp = 3 * d.hidden * d.intermediate + ((2 * d.intermediate + d.hidden) if d.mlp_bias else 0)
    counts = {"embeddings": d.vocab * d.hidden, "attention": d.layers * attention, "mlp": d.layers * mlp,
              "norms": (2 * d.layers + 1) * d.hidden, "lm_head": 0 if d.tied else d.vocab * d.hidden, "fc": 0}
    if role == "eagle":  # fc(2h -> h); first layer has no input norm, no final norm; embedding and lm_head shared
        counts.update(embeddings=0, lm_head=0, fc=2 * d.hidden * d.hidden,
                      norms=(2 * d.layers - 1) * d.hidden)
    elif role == "eagle3":  # fc(3h -> h); an extra hidden_norm per layer; own lm_head over draft_vocab
        counts.update(embeddings=0, lm_head=d.hidden * d.draft_vocab, fc=3 * d.hidden * d.hidden,
                      norms=(3 * d.layers + 1) * d.hidden)
    counts["total"] = sum(counts.values())
    return counts


def parameter_count(config, role: str | None = None) -> int:
    return parameter_counts(config, role)["total"]


def decode_parameters(config, role: str | None = None) -> int:
    """Parameters one decoding step multiplies with: every layer and the lm_head, not the embedding.

    The embedding is a row lookup (nearly free); the lm_head is a full matrix product even when it
    is tied to the embedding or borrowed from the target (EAGLE), so it always counts.
    """
    role, config = role or registered_role(config), load_config(config)
    role = role_of(config, role)
    c, d = parameter_counts(config, role), Dims.of(config)
    head = d.hidden * (d.draft_vocab if role == "eagle3" else d.vocab)
    return c["attention"] + c["mlp"] + c["norms"] + c["fc"] + head


def cost_ratio(draft, target, draft_role: str | None = None) -> float:
    """The theory's c estimated from sizes: a draft step's decode parameters over a target step's.

    Right when both steps are bound by reading weights (GPU, small batch); fixed per-step costs
    (scheduling, kernel launches) make the measured c larger, most of all for tiny models.
    """
    return decode_parameters(draft, draft_role) / decode_parameters(target)


def weight_bytes(config, dtype: str | None = None, role: str | None = None,
                 embeddings_dtype: str | None = None) -> float:
    """Bytes the weights take on the GPU.

    ``dtype`` is what the linear layers are stored in (default: the config's ``torch_dtype``).
    Quantizing (fp8/int8/int4) touches the linear layers only: vLLM keeps the embedding, the
    lm_head and the norms in 16 bit, so ``embeddings_dtype`` defaults to bf16 then. That is
    why a quantized small model saves less than the dtype ratio suggests. (int4 is counted at
    0.5 byte flat; real checkpoints add ~3% of group scales.)
    """
    config = load_config(config)
    dtype = dtype or config.get("torch_dtype") or "bfloat16"
    if embeddings_dtype is None:
        embeddings_dtype = "bfloat16" if _is_quantized(dtype) else dtype
    c = parameter_counts(config, role)
    linear = c["attention"] + c["mlp"] + c["fc"]
    rest = c["embeddings"] + c["lm_head"] + c["norms"]
    return linear * dtype_bytes(dtype) + rest * dtype_bytes(embeddings_dtype)


def weights_gb(ref: str) -> float | None:
    """GB of weights a published model loads (``weight_bytes`` of its ``data/shapes`` config.json): about what it
    downloads. None for a model without a shape, and for a block drafter (its layers are not counted here)."""
    for name, info in SHAPES.items():
        if info.hf_id == ref and info.role != "dflash":
            return weight_bytes(shape_config(name), role=info.role) / 1e9
    return None


# ------------------------------------------------------------------ KV cache


def kv_bytes_per_token(config, kv_dtype: str = "bfloat16") -> int:
    """K and V for one token in every layer: 2 x layers x kv_heads x head_dim x bytes."""
    d = Dims.of(load_config(config))
    return int(2 * d.layers * d.kv_heads * d.head_dim * dtype_bytes(kv_dtype))


def kv_cache_bytes(config, context_len: int, batch: int = 1, kv_dtype: str = "bfloat16") -> int:
    """KV for ``batch`` sequences of ``context_len`` tokens each."""
    return kv_bytes_per_token(config, kv_dtype) * context_len * batch


# ------------------------------------------------------------------ a plan for one GPU


@dataclass(frozen=True)
class Allowance:
    """Memory inside vLLM's budget that is neither weights nor KV cache (GiB; estimates).

    activations: the peak of the profiling forward pass (max_num_batched_tokens, logits in fp32);
    runtime: CUDA context, cuBLAS/NCCL workspaces, other non-torch memory;
    cuda_graphs: captured graphs (set 0 with enforce_eager=True).
    Defaults are round figures for a 7-8B model on one GPU; vLLM logs the measured ones.
    """

    activations_gib: float = 1.5
    runtime_gib: float = 0.5
    cuda_graphs_gib: float = 0.5

    @property
    def total_gib(self) -> float:
        return self.activations_gib + self.runtime_gib + self.cuda_graphs_gib


@dataclass(frozen=True)
class Plan:
    """Where the memory of one GPU goes, in bytes, and what that leaves for serving."""

    gpu_gib: float
    gpu_memory_utilization: float
    context_len: int
    num_speculative_tokens: int
    target_bytes: float
    draft_bytes: float
    allowance_bytes: float
    kv_bytes_per_token: int  # target + draft
    labels: dict = field(default_factory=dict)
    block_size: int = BLOCK_SIZE

    @property
    def gpu_bytes(self) -> float:
        return self.gpu_gib * GIB

    @property
    def budget_bytes(self) -> float:
        """What vLLM claims: utilization x GPU memory."""
        return self.gpu_memory_utilization * self.gpu_bytes

    @property
    def reserved_bytes(self) -> float:
        """What vLLM leaves to others (1 - utilization)."""
        return self.gpu_bytes - self.budget_bytes

    @property
    def kv_room_bytes(self) -> float:
        """Budget minus weights and allowance; negative means the weights alone do not fit."""
        return self.budget_bytes - self.target_bytes - self.draft_bytes - self.allowance_bytes

    @property
    def kv_blocks(self) -> int:
        return max(0, math.floor(self.kv_room_bytes / (self.kv_bytes_per_token * self.block_size)))

    @property
    def kv_tokens(self) -> int:
        """Tokens of KV cache (target and drafter together), whole blocks only."""
        return self.kv_blocks * self.block_size

    @property
    def max_concurrent(self) -> int:
        """Sequences of ``context_len`` tokens (+ k draft slots) that fit in the cache at once."""
        per_seq = math.ceil((self.context_len + self.num_speculative_tokens) / self.block_size)
        return self.kv_blocks // per_seq

    @property
    def fits(self) -> bool:
        """Weights and allowance fit in the budget, and at least one full-length sequence fits."""
        return self.max_concurrent >= 1

    @property
    def verdict(self) -> str:
        if self.kv_room_bytes <= 0:
            return f"no: weights + allowance exceed the budget by {-self.kv_room_bytes / GIB:.1f} GiB"
        if not self.fits:
            return f"no: KV room for {self.kv_tokens} tokens, one sequence needs {self.context_len}"
        return "yes"

    def row(self) -> dict:
        """One line of the GPU table (GiB, rounded for reading)."""
        return {
            "GPU GiB": f"{self.gpu_gib:g}",
            "budget": f"{self.budget_bytes / GIB:.1f}",
            "target": f"{self.target_bytes / GIB:.2f}",
            "draft": f"{self.draft_bytes / GIB:.2f}",
            "allowance": f"{self.allowance_bytes / GIB:.2f}",
            "KV room": f"{max(self.kv_room_bytes, 0) / GIB:.2f}",
            "KV tokens": f"{self.kv_tokens:,}",
            f"seqs @{self.context_len}": str(self.max_concurrent),
            "fits": "yes" if self.fits else "no",
        }

    def summary(self) -> dict:
        """Plain numbers for ``report.save_results``."""
        out = {k: v for k, v in asdict(self).items() if k != "labels"}
        out.update(labels=dict(self.labels), budget_gib=self.budget_bytes / GIB, kv_room_gib=self.kv_room_bytes / GIB,
                   kv_tokens=self.kv_tokens, max_concurrent=self.max_concurrent, fits=self.fits)
        return out

    def explain(self) -> str:
        """The arithmetic, line by line, in GiB and GB."""
        def both(b):
            return f"{b / GIB:6.2f} GiB  ({b / GB:6.2f} GB)"
        target, draft = self.labels.get("target", "target"), self.labels.get("draft", "draft")
        lines = [
            f"GPU                                  {both(self.gpu_bytes)}",
            f"reserved by 1 - {self.gpu_memory_utilization:g} utilization   {both(self.reserved_bytes)}",
            f"vLLM budget                          {both(self.budget_bytes)}",
            f"  weights {target:<28} {both(self.target_bytes)}",
            f"  weights {draft:<28} {both(self.draft_bytes)}",
            f"  allowance (activations, graphs)    {both(self.allowance_bytes)}",
            f"  KV cache room                      {both(self.kv_room_bytes)}",
            f"KV per token (target + draft)        {self.kv_bytes_per_token / 1024:g} KiB",
            f"KV tokens (blocks of {self.block_size})             {self.kv_tokens:,}",
            f"sequences of {self.context_len} (+{self.num_speculative_tokens}) at once     {self.max_concurrent}",
            f"fits: {self.verdict}",
        ]
        return "\n".join(lines)


def plan(target, draft=None, *, gpu_gib: float, gpu_memory_utilization: float = 0.9, context_len: int = 8192,
         dtype: str | None = None, draft_dtype: str | None = None, kv_dtype: str | None = None,
         num_speculative_tokens: int = 0, allowance: Allowance = Allowance(), draft_role: str | None = None,
         tensor_parallel_size: int = 1) -> Plan:
    """Plan target (+ drafter) on one GPU of ``gpu_gib`` GiB.

    ``target``/``draft``: config dicts, shape names or model folders; ``draft=None`` for no
    drafter (or n-gram, which needs no weights). ``dtype`` defaults to the config's torch_dtype;
    the KV cache defaults to 16 bit (vLLM's ``kv_cache_dtype="auto"``). With tensor parallelism
    each GPU holds 1/tp of the weights and of the KV heads (the drafter follows the target's tp).
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise SpeclabError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    target_cfg = load_config(target)
    draft_cfg = load_config(draft) if draft is not None else None
    dtype = dtype or target_cfg.get("torch_dtype") or "bfloat16"
    kv_dtype = kv_dtype or ("bfloat16" if _is_quantized(dtype) else dtype)
    tp = tensor_parallel_size
    kv_per_token = kv_bytes_per_token(target_cfg, kv_dtype)
    draft_bytes = 0.0
    if draft_cfg is not None:
        draft_role = draft_role or registered_role(draft)
        # a drafter in a checkpoint dtype other than the target's runs in the target's dtype
        draft_bytes = weight_bytes(draft_cfg, draft_dtype or dtype, draft_role)
        kv_per_token += kv_bytes_per_token(draft_cfg, kv_dtype)
    return Plan(
        gpu_gib=gpu_gib, gpu_memory_utilization=gpu_memory_utilization, context_len=context_len,
        num_speculative_tokens=num_speculative_tokens if draft is not None else 0,
        target_bytes=weight_bytes(target_cfg, dtype) / tp, draft_bytes=draft_bytes / tp,
        allowance_bytes=allowance.total_gib * GIB, kv_bytes_per_token=kv_per_token // tp,
        labels={"target": _label(target, target_cfg),
                "draft": _label(draft, draft_cfg) if draft is not None else "none"},
    )


def _label(ref, config: dict | None) -> str:
    if isinstance(ref, (str, Path)):
        return Path(str(ref)).name.removeprefix("shape:")
    return (config or {}).get("_name_or_path", "model")


def gpu_table(target, draft=None, gpu_sizes=DEFAULT_GPU_SIZES_GIB, **plan_options) -> list[Plan]:
    """One plan per GPU size, same models and settings."""
    return [plan(target, draft, gpu_gib=size, **plan_options) for size in gpu_sizes]


# ------------------------------------------------------------------ tables without pandas


def text_table(rows: list[dict]) -> str:
    """Rows of equal keys as aligned plain text (deterministic: fit for nbval)."""
    if not rows:
        return ""
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    line = lambda values: "  ".join(str(v).rjust(widths[c]) for c, v in zip(cols, values))  # noqa: E731
    return "\n".join([line(cols), line("-" * widths[c] for c in cols),
                      *(line(r.get(c, "") for c in cols) for r in rows)])


def html_table(rows: list[dict], caption: str = "") -> str:
    """Rows as a small HTML table (``IPython.display.HTML(html_table(...))``)."""
    if not rows:
        return ""
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td style='text-align:right'>{html.escape(str(r.get(c, '')))}</td>" for c in cols)
                   + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def parameter_rows(refs: dict) -> list[dict]:
    """A table of parameter counts and 16-bit sizes: ``refs`` maps a label to a config (or shape name).

    EAGLE heads named by shape count only what they add to their target.
    """
    rows = []
    for label, ref in refs.items():
        cfg, role = load_config(ref), registered_role(ref)
        c = parameter_counts(cfg, role)
        rows.append({"model": label, "params": f"{c['total'] / 1e9:.3f} B",
                     "embedding+lm_head": f"{100 * (c['embeddings'] + c['lm_head']) / c['total']:.0f}%",
                     "bf16 GiB": f"{weight_bytes(cfg, 'bfloat16', role) / GIB:.2f}",
                     "bf16 GB": f"{weight_bytes(cfg, 'bfloat16', role) / GB:.2f}",
                     "KV KiB/token": f"{kv_bytes_per_token(cfg) / 1024:g}"})
    return rows
