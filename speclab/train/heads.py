"""The drafters as ``nn.Module``s, each with one ``loss(batch)``: EAGLE, EAGLE-3, Medusa, a draft model.

EAGLE and EAGLE-3 are trained the way vLLM runs them: at draft step j the head sees its own
previous output, and its attention reads the keys of the first pass (made from the target's
features) plus its own earlier steps at the same place ("training-time test", :func:`ttt_loss`).
Every loss is computed over the tokens that occur in the training text only (a vocabulary
subset), which makes the lm_head product ~6x cheaper on a CPU; the lm_head itself is the
target's, frozen. ``export()`` gives the tensors in the layout vLLM loads, ``config()`` its config.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import SpeclabError
from ..models import drafter_layouts
from .hidden_states import Features, vocab_subset
from .layers import LlamaLayer, linear, norm_weight, rms_norm
from .recipes import TRAIN_METHODS, recipe

DRAFT_INIT_LAYERS = (0, 29)  # target layers that initialise the 2-layer draft model


class Head(nn.Module):
    """Common parts: the target's frozen embedding/lm_head restricted to a vocabulary subset."""

    def __init__(self, embed, subset):
        super().__init__()
        # buffers: they move with .to(device) and stay out of the state dict (the target holds them)
        self.register_buffer("embed", embed, persistent=False)  # [V, h] float32, frozen
        self.register_buffer("subset", subset, persistent=False)
        self.register_buffer("lm_rows", embed[subset], persistent=False)  # [V_sub, h]
        lookup = torch.full((embed.shape[0],), -100, dtype=torch.long)
        lookup[subset] = torch.arange(len(subset))
        self.register_buffer("lookup", lookup, persistent=False)

    def ce(self, hidden, labels, mask):
        """Cross-entropy and top-1 accuracy over the masked places (zero when there are none)."""
        if not bool(mask.any()):  # e.g. a prompt longer than max_len: no answer token to learn here
            return hidden.sum() * 0.0, 0.0
        logits = hidden[mask] @ self.lm_rows.T
        target = self.lookup[labels[mask]]
        loss = F.cross_entropy(logits.float(), target, ignore_index=-100)
        acc = (logits.argmax(-1) == target).float().mean()
        return loss, acc

    def export(self) -> dict:
        return {name: t.detach() for name, t in self.state_dict().items()}


class EagleHead(Head):
    """EAGLE (vLLM's llama_eagle): fc([embedding; feature]) -> one decoder layer (no input norm)."""

    method = "eagle"

    def __init__(self, cfg, embed, subset, ttt_steps: int = 3):
        super().__init__(embed, subset)
        h = cfg["hidden_size"]
        self.eps, self.ttt_steps = cfg["rms_norm_eps"], ttt_steps
        layer = LlamaLayer(cfg)  # drawn before fc, and registered after it: the order training has always used
        self.fc = linear((h, 2 * h), std=1.0 / math.sqrt(2 * h))
        with torch.no_grad():  # start as "pass the feature through": fc = [0 | I]
            self.fc.weight.zero_()
            self.fc.weight[:, h:] = torch.eye(h)
        self.layers = nn.ModuleList([layer])

    def inputs(self, batch):
        return batch["final"].float()

    def step(self, tokens, hidden, positions, keys, values):
        """One draft step over all places: returns (logit feature, next hidden, k, v)."""
        layer = self.layers[0]
        x = torch.cat([self.embed[tokens], hidden], dim=-1) @ self.fc.weight.T
        q, k, v = layer.qkv(x, positions)
        residual = x + layer.attend(q, keys + [k], values + [v])
        out = residual + layer.feed_forward(residual)
        return out, out, k, v

    def extra_loss(self, out, target_final, mask):
        """EAGLE also regresses the target's next feature (smooth L1)."""
        if not bool(mask.any()):
            return None
        return F.smooth_l1_loss(out[mask], target_final[mask].float())

    def loss(self, batch):
        return ttt_loss(self, batch, self.ttt_steps)

    def config(self):
        return drafter_layouts.llama_config(1)


class Eagle3Head(Head):
    """EAGLE-3 (vLLM's llama_eagle3): fc fuses three target layers; the layer attends over
    [norm(embedding); norm(feature)]; the final norm feeds the lm_head."""

    method = "eagle3"

    def __init__(self, cfg, embed, subset, draft_vocab: int | None = None, ttt_steps: int = 3):
        """``draft_vocab``: own lm_head over the N most frequent tokens of the data (as the published
        heads do, 32k of Llama-3's 128k) instead of the target's full one; a draft step gets cheaper,
        and the tokens left out can never be drafted."""
        if draft_vocab:
            subset = torch.sort(subset[:draft_vocab]).values  # ascending: draft id i -> target id subset[i]
        super().__init__(embed, subset)
        self.draft_vocab, self.ttt_steps = draft_vocab, ttt_steps
        h, n = cfg["hidden_size"], len(drafter_layouts.EAGLE3_AUX_LAYERS)
        self.eps = cfg["rms_norm_eps"]
        midlayer = LlamaLayer(cfg, qkv_in=2 * h, input_norm=True)
        midlayer.hidden_norm = nn.Module()
        midlayer.hidden_norm.weight = norm_weight(h)
        self.fc = linear((h, n * h), std=1.0 / math.sqrt(n * h))
        self.midlayer = midlayer
        self.norm = nn.Module()
        self.norm.weight = norm_weight(h)

    def inputs(self, batch):
        return batch["aux"].float() @ self.fc.weight.T

    def step(self, tokens, hidden, positions, keys, values):
        layer = self.midlayer
        e = rms_norm(self.embed[tokens], layer.input_layernorm.weight, self.eps)
        x = torch.cat([e, rms_norm(hidden, layer.hidden_norm.weight, self.eps)], dim=-1)
        q, k, v = layer.qkv(x, positions)
        residual = hidden + layer.attend(q, keys + [k], values + [v])
        residual = residual + layer.feed_forward(residual)
        return rms_norm(residual, self.norm.weight, self.eps), residual, k, v

    def extra_loss(self, out, target_final, mask):
        return None

    def loss(self, batch):
        return ttt_loss(self, batch, self.ttt_steps)

    def export(self):
        t = super().export()
        if self.draft_vocab:  # vLLM maps draft id i to target id i + d2t[i]
            t["lm_head.weight"] = self.lm_rows.detach()
            t["d2t"] = (self.subset - torch.arange(len(self.subset), device=self.subset.device)).long()
        return t

    def config(self):
        return drafter_layouts.eagle3_config(draft_vocab_size=len(self.subset) if self.draft_vocab else None)


def ttt_loss(head, batch, steps: int):
    """Unrolled draft steps; step j at place i reads token i+1+j and predicts token i+2+j.

    Step j's loss weighs 0.8**j; returns (loss, top-1 accuracy per step).
    """
    ids, lengths, prompt_lens = batch["ids"], batch["lengths"], batch["prompt_lens"]
    B, L = ids.shape
    hidden = head.inputs(batch)
    keys, values, total, accs = [], [], 0.0, []
    for j in range(steps):
        T = L - 2 - j
        if T <= 0:
            break
        place = torch.arange(T, device=ids.device)
        tokens = ids[:, 1 + j:1 + j + T]
        labels = batch["greedy"][:, 1 + j:1 + j + T]  # what the target picks after token i+1+j
        mask = (place[None, :] + 2 + j < lengths[:, None]) & (place[None, :] + 2 + j >= prompt_lens[:, None])
        out, nxt, k, v = head.step(tokens, hidden[:, :T], place + j, [kk[..., :T, :] for kk in keys],
                                   [vv[..., :T, :] for vv in values])
        keys, values = keys + [k], values + [v]
        loss, acc = head.ce(out, labels, mask)
        extra = head.extra_loss(out, batch["final"][:, 1 + j:1 + j + T], mask) if "final" in batch else None
        step_loss = loss + (extra if extra is not None else 0.0)
        total = total + step_loss * (0.8 ** j)
        accs.append(float(acc))
        hidden = nxt
    return total, accs


class MedusaHeads(Head):
    """Medusa (vLLM's medusa.py): head m is ``num_layers`` residual blocks x + SiLU(W x) on the
    target's last hidden state, then the (shared, truncated) lm_head; head m guesses the token
    m+2 places ahead."""

    method = "medusa"

    def __init__(self, cfg, embed, subset, num_heads: int = drafter_layouts.MEDUSA_HEADS, num_layers: int = 1):
        super().__init__(embed, subset)
        h = cfg["hidden_size"]
        self.blocks = nn.ModuleList()
        for _ in range(num_heads):
            block = nn.Module()
            # zero: every block starts as the identity, so each head starts as the next-token head
            block.layers = nn.ModuleList([linear((h, h), std=None) for _ in range(num_layers)])
            self.blocks.append(block)

    def loss(self, batch):
        ids, final = batch["ids"], batch["final"].float()
        L = ids.shape[1]
        total, accs = 0.0, []
        for m, block in enumerate(self.blocks):
            T = L - 2 - m
            if T <= 0:
                break
            place = torch.arange(T, device=ids.device)
            mask = (place[None, :] + 2 + m < batch["lengths"][:, None]) & \
                   (place[None, :] + 2 + m >= batch["prompt_lens"][:, None])
            out = final[:, :T][mask]  # only the places with a label: the blocks act on each place alone
            for w in block.layers:
                out = out + F.silu(out @ w.weight.T)
            labels = batch["greedy"][:, 1 + m:1 + m + T][mask]
            loss, acc = self.ce(out, labels, torch.ones_like(labels, dtype=torch.bool))
            total, accs = total + loss, accs + [float(acc)]
        return total, accs

    # export: the lm_head is the target's; drafters.loadable() adds it back when vLLM needs the folder

    def config(self):
        return drafter_layouts.medusa_config(len(self.blocks), len(self.blocks[0].layers))


class DraftModel(Head):
    """A 2-layer Llama with the target's width and its frozen, tied embedding (vLLM draft_model)."""

    method = "draft_model"

    def __init__(self, cfg, embed, subset, init: dict | None = None):
        super().__init__(embed, subset)
        self.eps = cfg["rms_norm_eps"]
        layers = nn.ModuleList([LlamaLayer(cfg, input_norm=True) for _ in range(drafter_layouts.DRAFT_MODEL_LAYERS)])
        self.model = nn.Module()
        self.model.norm = nn.Module()  # registered before the layers: the order training has always used
        self.model.norm.weight = norm_weight(cfg["hidden_size"])
        self.model.layers = layers
        if init:
            for layer, src in zip(layers, DRAFT_INIT_LAYERS):
                layer.load(init, f"model.layers.{src}")
            with torch.no_grad():
                self.model.norm.weight.copy_(init["model.norm.weight"].float())

    def loss(self, batch):
        ids = batch["ids"]
        B, L = ids.shape
        T = L - 1
        place = torch.arange(T, device=ids.device)
        x = self.embed[ids[:, :T]]
        for layer in self.model.layers:
            x = layer(x, place)
        out = rms_norm(x, self.model.norm.weight, self.eps)
        mask = (place[None, :] + 1 < batch["lengths"][:, None]) & (place[None, :] + 1 >= batch["prompt_lens"][:, None])
        loss, acc = self.ce(out, batch["greedy"][:, :T], mask)
        return loss, [float(acc)]

    def config(self):
        return drafter_layouts.llama_config(drafter_layouts.DRAFT_MODEL_LAYERS)


def build_drafter(method: str, seqs: list[Features], device: str = "cpu", draft_vocab: int | None = None,
                  medusa_layers: int | None = None, ttt_steps: int | None = None) -> Head:
    """The drafter for ``method`` over the vocabulary of ``seqs``, on ``device``; unset sizes are the recipe's."""
    if method not in TRAIN_METHODS:
        raise SpeclabError(f"cannot train method {method!r}: choose one of {', '.join(TRAIN_METHODS)}")
    names = ["model.embed_tokens.weight"]
    if method == "draft_model":
        names += [f"model.layers.{i}.{n}" for i in DRAFT_INIT_LAYERS for n in drafter_layouts.LAYER_TENSORS]
        names.append("model.norm.weight")
    tensors = drafter_layouts.target_weights(*names)
    embed = tensors["model.embed_tokens.weight"].float()
    cfg = drafter_layouts.target_config()
    subset = vocab_subset(seqs)
    ttt_steps = ttt_steps or recipe(method).ttt_steps
    if method == "medusa":
        model = MedusaHeads(cfg, embed, subset, num_layers=medusa_layers or recipe(method).medusa_layers)
    elif method == "eagle":
        model = EagleHead(cfg, embed, subset, ttt_steps=ttt_steps)
    elif method == "eagle3":
        model = Eagle3Head(cfg, embed, subset, draft_vocab=draft_vocab, ttt_steps=ttt_steps)
    else:
        model = DraftModel(cfg, embed, subset, init=tensors)
    return model.to(device)
