"""Drafters for the CPU profile's target (SmolLM2-135M-Instruct), as folders vLLM 0.32 loads.

``provide(name)`` answers a profile's ``local:<name>`` drafter reference with a folder:

- the trained drafter shipped in ``data/drafters/<method>/`` when there is one (its
  ``card.json`` says how it was trained and what acceptance vLLM measured with it), assembled
  into the cache by ``loadable`` (how it is stored: :mod:`speclab.models.drafter_packing`);
- otherwise a randomly initialised drafter of the same shape (:mod:`speclab.models.random_drafters`),
  built once into the cache (deterministic seed, labelled ``"trained": false`` in its card). It
  loads and runs, so a lesson works end to end, but its acceptance is near zero: an untrained
  drafter is pure cost.

Each method's layout, and what it takes from the target: :mod:`speclab.models.drafter_layouts`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import SpeclabError
from ..files import REPO_ROOT, atomic_folder, cache_dir, is_complete
from .drafter_layouts import (BUILDER_VERSION, CARD, WEIGHTS, copy_tokenizer, read_card, target_matrix,
                              target_matrix_name, write_folder)
from .drafter_packing import PACK_VERSION, PACKED, read_weights
from .random_drafters import BUILDERS

SHIPPED_DIR = REPO_ROOT / "data" / "drafters"
# profile reference name -> method
NAMES = {
    "drafter-draft_model": "draft_model",
    "drafter-eagle": "eagle",
    "drafter-eagle3": "eagle3",
    "drafter-medusa": "medusa",
    "tiny-mtp": "mtp",
}
SOURCE = "speclab-source.json"  # in an assembled folder: what it was made from (``_source_stamp``)


def method_of(name: str) -> str:
    try:
        return NAMES[name]
    except KeyError:
        raise SpeclabError(f"unknown drafter {name!r}: choose one of {', '.join(NAMES)}") from None


def shipped(method: str) -> Path | None:
    """The trained drafter folder in ``data/drafters/<method>/``, if one is shipped (packed or bf16)."""
    folder = SHIPPED_DIR / method
    if all((folder / f).is_file() for f in ("config.json", CARD)) and any(
            (folder / f).is_file() for f in (PACKED, WEIGHTS)):
        return folder
    return None


def provide(name: str, force: bool = False) -> Path:
    """A folder vLLM loads for drafter ``name``: the shipped trained one, else a random one."""
    method = method_of(name)
    trained = shipped(method) if method != "mtp" else None
    if trained is not None:
        return loadable(method, trained, force=force)
    final = cache_dir() / "drafters" / name
    if is_complete(final) and not force and read_card(final).get("builder_version") == BUILDER_VERSION:
        return final
    with atomic_folder(final) as out:
        BUILDERS[method](out)
    return final


def loadable(method: str, folder: str | Path, force: bool = False) -> Path:
    """A folder vLLM loads for a drafter saved by :mod:`speclab.train` or packed by
    :func:`speclab.models.drafter_packing.pack`.

    A bf16 folder with every tensor vLLM needs loads as saved (EAGLE heads, as training writes
    them). Any other is assembled into a cache folder keyed by the source folder: weights
    dequantized to bf16, plus the matrices a drafter takes from the target (``target_matrix``).
    It is rebuilt when the source's files change (``_source_stamp``).
    """
    folder = Path(folder)
    if not (folder / PACKED).is_file() and _has_target_matrix(method, folder):
        return folder
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    final = cache_dir() / "drafters" / f"{method}-{key}"
    stamp = _source_stamp(folder)
    if force or not (is_complete(final) and _read_json(final / SOURCE) == stamp):
        with atomic_folder(final) as out:
            assemble(method, folder, out)
            (out / SOURCE).write_text(json.dumps(stamp, indent=2) + "\n")
    return final


def _has_target_matrix(method: str, folder: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(folder / WEIGHTS), framework="pt") as f:
        names = set(f.keys())
    name = target_matrix_name(method, names)
    return name is None or name in names


def _source_stamp(folder: Path) -> dict:
    """Size and modification time of the source's files: an assembled folder is reused only while they match."""
    files = {}
    for name in ("config.json", CARD, PACKED, WEIGHTS):
        if (folder / name).is_file():
            st = (folder / name).stat()
            files[name] = [st.st_size, st.st_mtime_ns]
    return {"source": str(folder.resolve()), "pack_version": PACK_VERSION, "files": files}


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def assemble(method: str, source: Path, out: Path) -> None:
    """A bf16 folder vLLM loads: the saved weights (dequantized if packed) + the target's matrix."""
    tensors = read_weights(source)
    for name, matrix in target_matrix(method, tensors).items():
        tensors.setdefault(name, matrix)
    config = json.loads((Path(source) / "config.json").read_text())
    if method == "draft_model":
        config["tie_word_embeddings"] = True
    write_folder(out, config, tensors, read_card(source))
    if method == "draft_model":  # a whole model: with the tokenizer it also loads on its own
        copy_tokenizer(out)
