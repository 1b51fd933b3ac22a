"""How the trained drafters are stored in ``data/drafters/`` (int8 rows), and read back.

Training (:mod:`speclab.train`) writes a bf16 ``model.safetensors`` that vLLM loads.
``data/drafters/<method>/`` keeps them smaller, in ``model.int8.safetensors`` (written by ``pack``):

- each weight matrix as int8 with one float32 scale per output row (the row's largest
  magnitude / 127, in ``<name>.scale``): half the bytes of bf16, and each weight within half a
  step (row max / 254) of the trained one; norms and ``d2t`` stay as they are;
- without what the target supplies: the draft model's embedding and Medusa's lm_head (SmolLM2's
  embedding, which is also its lm_head), and EAGLE-3's lm_head (the target's rows ``i + d2t[i]``:
  its draft vocabulary's rows were frozen in training).

:func:`speclab.models.drafters.loadable` turns such a folder back into one vLLM loads, once, in the
cache: weights dequantized to bf16 (``read_weights``), the target's matrices added. A packed
drafter's ``card.json`` says so (``storage``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import SpeclabError
from ..files import COMPLETE, atomic_folder
from .drafter_layouts import CARD, WEIGHTS, read_card, target_matrix

PACKED = "model.int8.safetensors"  # how data/drafters stores trained weights (``pack``); vLLM cannot load it
# Bump when the packed layout or the assembly changes: folders speclab.models.drafters.loadable assembled are
# then rebuilt.
PACK_VERSION = 1


def quantize(w):
    """int8 rows and one float32 scale per row: w ~ q * scale[:, None], within scale / 2 per weight."""
    import torch

    w = w.float()
    scale = w.abs().amax(dim=1) / 127
    q = torch.round(w / torch.where(scale > 0, scale, 1.0)[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def dequantize(q, scale):
    import torch

    return (q.float() * scale[:, None]).to(torch.bfloat16)


# Measured side by side on the 24 held-out prompts (k=3, 64 tokens, CPU, one baseline): int8 rows moved
# acceptance length by +0.000 (draft_model), +0.023 (eagle3), +0.006 (medusa) and -0.028 (eagle). A method
# here keeps its bf16 weights as trained, for the reason given (written into its card).
KEEP_BF16 = {"eagle": "stored as int8 rows, its acceptance length fell by 0.028 (2.042 -> 2.014)"}


def pack(folder: str | Path, out: str | Path) -> Path:
    """Store a trained bf16 drafter as ``data/drafters`` ships it: ``PACKED`` + config.json + card.json.

    Every 2-D float tensor becomes int8 rows with a float32 scale each (``quantize``; the scale under
    ``<name>.scale``), about half of bf16's bytes; 1-D tensors (norms) and integer ones (``d2t``) stay
    as they are. A matrix equal to what the target supplies (``target_matrix``) is left out. A method
    in ``KEEP_BF16`` keeps its ``model.safetensors`` as trained. :func:`speclab.models.drafters.loadable` makes
    a folder vLLM loads out of either. ``out`` may be ``folder`` itself.
    """
    import torch
    from safetensors.torch import load_file, save_file

    folder, out = Path(folder), Path(out)
    if not (folder / WEIGHTS).is_file():
        raise SpeclabError(f"nothing to pack: {folder} has no {WEIGHTS} (a packed folder holds {PACKED})")
    card, config = read_card(folder), (folder / "config.json").read_text()
    method = card["method"]
    if method in KEEP_BF16:
        card["storage"] = f"{WEIGHTS} in bf16 as trained ({KEEP_BF16[method]})"
        weights = open(folder / WEIGHTS, "rb").read()

        def save(scratch):
            (scratch / WEIGHTS).write_bytes(weights)
    else:
        tensors = load_file(str(folder / WEIGHTS))
        derived = target_matrix(method, tensors)
        packed = {}
        for name, t in tensors.items():
            if name in derived and torch.equal(t, derived[name]):
                continue
            if t.is_floating_point() and t.dim() == 2:
                packed[name], packed[f"{name}.scale"] = quantize(t)
            else:
                packed[name] = t
        how = "rebuilt from the target's embedding and d2t" if method == "eagle3" else "the target's embedding"
        card["storage"] = (f"{PACKED}: int8 with one float32 scale per output row (row absmax / 127), 1-D and "
                           "integer tensors as trained; speclab.models.drafters.loadable dequantizes it to bf16"
                           + "".join(f" and adds {name}, {how}" for name in derived if name not in packed))

        def save(scratch):
            save_file({k: v.contiguous() for k, v in packed.items()}, str(scratch / PACKED),
                      metadata={"format": "pt", "speclab_pack_version": str(PACK_VERSION)})
    with atomic_folder(out) as scratch:
        save(scratch)
        (scratch / "config.json").write_text(config)
        (scratch / CARD).write_text(json.dumps(card, indent=2) + "\n")
    (out / COMPLETE).unlink(missing_ok=True)  # a shipped folder needs no cache marker
    return out


def read_weights(folder: str | Path) -> dict:
    """A saved drafter's tensors in bf16: its ``model.safetensors``, or its packed file dequantized."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / PACKED).is_file():
        return load_file(str(folder / WEIGHTS))
    packed = load_file(str(folder / PACKED))
    return {name: dequantize(t, packed[f"{name}.scale"]) if f"{name}.scale" in packed else t
            for name, t in packed.items() if not name.endswith(".scale")}
