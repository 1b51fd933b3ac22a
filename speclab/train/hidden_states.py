"""The target's hidden states: one forward pass of SmolLM2 (transformers, float32) over every
prompt + answer gives what the heads read (the last, normed hidden state for EAGLE and Medusa;
three intermediate ones for EAGLE-3) and the label at every place: the token the target itself
would pick next, which is what greedy verification accepts."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..models import drafter_layouts
from ..models.provision import fetch_smollm2

MAX_LEN = 640  # prompt + answer tokens kept per row


@dataclass
class Features:
    """One row of training data with the target's hidden states over it."""

    ids: torch.Tensor  # [L] prompt + answer
    prompt_len: int
    final: torch.Tensor | None  # [L, h] last hidden state after the final norm (what lm_head reads)
    aux: torch.Tensor | None = None  # [L, 3h] outputs of the EAGLE-3 layers, concatenated
    prompt_id: str = ""  # several answers to one prompt are held back together
    sample: int = 0  # 0: the greedy answer (what a greedy run must predict); 1..n: sampled ones
    # [L] the target's argmax after each place: the token greedy verification accepts
    greedy: torch.Tensor | None = None


def load_target(device: str = "cpu"):
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars would land in the lesson's output
    model = AutoModelForCausalLM.from_pretrained(str(fetch_smollm2(quiet=True)), dtype=torch.float32)
    return model.to(device).eval()


def features_for(method: str, rows: list[dict], model=None, **kw) -> list[Features]:
    """:func:`target_features` with what ``method`` reads: EAGLE-3 the three fused layers only (its
    own output feeds its next step), the others the last hidden state; this keeps the full data's
    features within a 24 GB machine (about 13.6 GB for EAGLE-3, 4.5 GB for the others)."""
    eagle3 = method == "eagle3"
    return target_features(rows, model, aux_layers=drafter_layouts.EAGLE3_AUX_LAYERS if eagle3 else (),
                           keep_final=not eagle3, **kw)


def target_features(rows: list[dict], model=None, aux_layers=drafter_layouts.EAGLE3_AUX_LAYERS,
                    max_len: int = MAX_LEN, batch_size: int = 16, keep_final: bool = True,
                    device: str = "cpu", before_final_norm: bool = False) -> list[Features]:
    """Run the target over each prompt + answer; keep the hidden states the drafters read and the
    target's own greedy choice after every place (the label: under greedy verification a draft
    token is accepted exactly when it is that choice, whatever token the text has there).

    Sequences of similar length go through together, right-padded: causal attention never lets a
    real token see the padding after it. ``before_final_norm``: ``final`` is the last layer's output
    before the final norm (what speculators stores; it applies the target's norm itself).
    """
    model = model or load_target(device)
    device = next(model.parameters()).device
    seen = {}  # with before_final_norm: the final norm's input, caught as the forward passes it
    hook = (model.model.norm.register_forward_hook(lambda mod, args, out: seen.update(raw=args[0]))
            if before_final_norm else None)
    try:
        return _features(rows, model, device, aux_layers, max_len, batch_size, keep_final, seen)
    finally:
        if hook is not None:
            hook.remove()


def _features(rows, model, device, aux_layers, max_len, batch_size, keep_final, seen) -> list[Features]:
    ids_of = [torch.tensor((r["prompt_ids"] + r["answer_ids"])[:max_len]) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: len(ids_of[i]))
    out = [None] * len(rows)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            lengths = [len(ids_of[i]) for i in chunk]
            ids = torch.zeros(len(chunk), max(lengths), dtype=torch.long)
            mask = torch.zeros_like(ids)
            for b, i in enumerate(chunk):
                ids[b, :lengths[b]], mask[b, :lengths[b]] = ids_of[i], 1
            res = model.model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
            states = res.hidden_states  # [embeddings, after layer 1, ..., after the final norm]
            for b, i in enumerate(chunk):
                n, row = lengths[b], rows[i]
                final = res.last_hidden_state[b, :n]
                kept = seen["raw"][b, :n] if seen else final
                aux = torch.cat([states[j][b, :n] for j in aux_layers], dim=-1) if aux_layers else None
                out[i] = Features(ids[b, :n].to(device), len(row["prompt_ids"]),
                                  kept.to(torch.bfloat16) if keep_final else None,
                                  aux.to(torch.bfloat16) if aux is not None else None, str(row.get("id", "")),
                                  int(row.get("sample", 0)), model.lm_head(final).argmax(-1))
    return out


def vocab_subset(seqs: list[Features], limit: int | None = None):
    """Token ids that occur in the data, most frequent first (``limit`` keeps the top ones)."""
    counts = torch.bincount(torch.cat([t.cpu() for s in seqs for t in (s.ids, s.greedy) if t is not None]), minlength=1)
    order = torch.argsort(counts, descending=True)
    order = order[counts[order] > 0]
    return order[:limit] if limit else order
