"""The pieces of a Llama decoder layer, in plain torch: RMS norm, rotary embedding, and the layer.

Its parameters carry Hugging Face's names (``self_attn.q_proj.weight``...; the list is
``drafter_layouts.LAYER_TENSORS``), so a layer's ``state_dict`` is what vLLM loads.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..models import drafter_layouts


def rms_norm(x, weight, eps: float = 1e-5):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)) * weight


def rotary(x, positions, theta: float):
    """Rotate-half rotary embedding (vLLM's neox style for Llama). x: [..., T, d]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    ang = positions.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def rope_theta(cfg: dict) -> float:
    return float((cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta") or 10000.0)


def linear(shape: tuple[int, int], std: float | None = 0.02) -> nn.Linear:
    """A bias-free linear layer (weight ``shape``: out x in) drawn as N(0, std²); ``std=None``: zeros.

    Nothing else is drawn (``nn.Linear``'s own initialisation would draw too), so a seed gives the
    same weights whatever else a model holds.
    """
    layer = nn.utils.skip_init(nn.Linear, shape[1], shape[0], bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(*shape) * std if std is not None else torch.zeros(*shape))
    return layer


def norm_weight(h: int) -> nn.Parameter:
    return nn.Parameter(torch.ones(h))


class LlamaLayer(nn.Module):
    """One Llama decoder layer. ``qkv_in``: the width the attention reads, when it is not the hidden
    size (EAGLE-3 reads [embedding; feature]); ``input_norm``: whether the layer norms its input
    (EAGLE's layer does not). Parameters are made in ``drafter_layouts.LAYER_TENSORS`` order."""

    def __init__(self, cfg: dict, qkv_in: int | None = None, input_norm: bool = False):
        super().__init__()
        shapes = drafter_layouts.layer_shapes(cfg, qkv_in, input_norm)
        self.heads, self.kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.head_dim = shapes["self_attn.q_proj.weight"][0] // self.heads
        self.theta, self.eps = rope_theta(cfg), cfg["rms_norm_eps"]
        self.self_attn = nn.Module()
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self.self_attn, name, linear(shapes[f"self_attn.{name}.weight"]))
        self.mlp = nn.Module()
        for name in ("gate_proj", "up_proj", "down_proj"):
            setattr(self.mlp, name, linear(shapes[f"mlp.{name}.weight"]))
        self.post_attention_layernorm = nn.Module()
        self.post_attention_layernorm.weight = norm_weight(shapes["post_attention_layernorm.weight"][0])
        if input_norm:
            self.input_layernorm = nn.Module()
            self.input_layernorm.weight = norm_weight(shapes["input_layernorm.weight"][0])

    def qkv(self, x, positions):
        """x: [B, T, in] -> q [B, H, T, d], k, v [B, H, T, d] (kv heads repeated)."""
        B, T, _ = x.shape
        a = self.self_attn
        q = (x @ a.q_proj.weight.T).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = (x @ a.k_proj.weight.T).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = (x @ a.v_proj.weight.T).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotary(q, positions, self.theta), rotary(k, positions, self.theta)
        rep = self.heads // self.kv_heads
        return q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)

    def attend(self, q, keys, values):
        """Causal attention over the first pass's keys plus this place's own earlier steps.

        ``keys[0]``/``values[0]`` come from draft step 0 (all positions, causal); ``keys[m]``
        (m >= 1) from step m at the same place only: what vLLM's KV cache holds at step j.
        """
        B, H, T, d = q.shape
        scale = 1.0 / math.sqrt(d)
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        s0 = (q @ keys[0].transpose(-1, -2)) * scale
        s0 = s0.masked_fill(~causal, float("-inf"))
        diag = [(q * k).sum(-1, keepdim=True) * scale for k in keys[1:]]
        p = torch.softmax(torch.cat([s0, *diag], -1), -1)
        out = p[..., :T] @ values[0]
        for m, v in enumerate(values[1:]):
            out = out + p[..., T + m:T + m + 1] * v
        return out.transpose(1, 2).reshape(B, T, H * d) @ self.self_attn.o_proj.weight.T

    def feed_forward(self, x):
        """The MLP after the post-attention norm (the residual is the caller's)."""
        m = self.mlp
        x = rms_norm(x, self.post_attention_layernorm.weight, self.eps)
        return (F.silu(x @ m.gate_proj.weight.T) * (x @ m.up_proj.weight.T)) @ m.down_proj.weight.T

    def forward(self, x, positions):
        """The plain causal layer over [B, T, h] (a draft model's): norm, attention, MLP, residuals."""
        q, k, v = self.qkv(rms_norm(x, self.input_layernorm.weight, self.eps), positions)
        x = x + self.attend(q, [k], [v])
        return x + self.feed_forward(x)

    def load(self, tensors: dict, prefix: str):
        """Copy in the tensors named ``prefix.<name>`` that ``tensors`` holds (e.g. a target layer's)."""
        with torch.no_grad():
            for name, param in self.named_parameters():
                if f"{prefix}.{name}" in tensors:
                    param.copy_(tensors[f"{prefix}.{name}"].float())
