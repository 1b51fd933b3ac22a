"""The ``speclab`` commands: bench, models, env, migrate, run, serve.

Each ``cmd_*`` takes the parsed arguments (``speclab.cli.main``), passes them through the gate
(``speclab.cli.gate``) and only then loads models or opens an engine; vLLM and torch are imported by the
modules that start engines, inside the functions that do.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from .. import files
from ..algorithms.memory import weights_gb
from ..errors import ServerError, SpeclabError, require
from ..measure import bench, reference
from ..measure.prompts import apply_chat_template, chat_messages, load_prompts
from ..models import random_weights
from ..models.model_refs import resolve_model, tokenizer_path
from ..models.profiles import (DEFAULT_CPU_PROFILE, DEFAULT_GPU_PROFILE, Profile, cuda_available, get_profile,
                               list_profiles, require_device)
from ..models.provision import fetch_smollm2, load_tokenizer
from ..serving.clients import curl_command
from ..serving.server import HOST, config_for, serve
from ..vllm_layer import configs
from ..vllm_layer.engine import CPU_DEFAULTS, checked_runs, model_max_len
from ..vllm_layer.envcheck import check, format_check
from ..vllm_layer.logs import headline
from ..vllm_layer.migration import format_migration
from . import parameters
from .gate import (CPU_REFERENCE_RTOL, GPU_REFERENCE_RTOL, check_bench_args, check_lengths, check_serve_args,
                   check_test_flags)
from .runner import NOTEBOOKS, main_job, require_free, series


def _pick_profile(args) -> str:
    if args.profile:
        return args.profile
    if os.environ.get("SPECLAB_PROFILE"):
        return os.environ["SPECLAB_PROFILE"]
    return DEFAULT_GPU_PROFILE if cuda_available() else DEFAULT_CPU_PROFILE


def bench_config(args, profile) -> dict:
    k = args.num_spec_tokens
    if args.method in configs.LOOKUP_METHODS:
        return configs.build(args.method, k, prompt_lookup_max=args.prompt_lookup_max,
                             prompt_lookup_min=args.prompt_lookup_min)
    options = {}
    if args.method in ("eagle", "eagle3"):
        if args.eagle_dir:
            options.update(model=args.eagle_dir, target=args.model_dir or profile.target)
        options.update(disable_padded_drafter_batch=args.disable_padded_drafter_batch,
                       parallel_drafting=args.parallel_drafting)
    elif args.method == "draft_model":
        if args.draft_model:
            options["model"] = args.draft_model
        options.update(enforce_eager=args.enforce_eager or None, max_model_len=args.max_model_len,
                       parallel_drafting=args.parallel_drafting, use_heterogeneous_vocab=args.use_heterogeneous_vocab)
    return configs.for_profile(profile, args.method, k, **options)


def _bench_prompts(args):
    """The prompt set: read before any model is resolved, so that a bad file fails at once."""
    if args.custom_mm_prompts:
        raise SpeclabError("--custom-mm-prompts needs a multimodal target: pass --model-dir <a vision-language model>")
    if args.dataset_name == "hf":
        source = args.dataset_path or "philschmid/mt-bench"
    elif args.dataset_name == "custom":
        source = args.dataset_path
    else:
        source = args.dataset_path or "mtbench_style"
    return load_prompts(source, category=args.category, num_prompts=args.num_prompts), source


def _bench_inputs(args, prompts, tokenizer):
    if args.backend == "openai-chat":
        return [chat_messages(p) for p in prompts]
    return apply_chat_template(tokenizer, prompts)


def cmd_bench(args) -> int:
    check_bench_args(args)

    profile = get_profile(_pick_profile(args))
    require_device(profile)
    expected = check_test_flags(args, profile) if args.test else None
    prompts, source = _bench_prompts(args)
    target = args.model_dir or resolve_model(profile.target)
    config = bench_config(args, profile)
    config = checked_runs(profile, {"bench": config}, model=args.model_dir, tensor_parallel_size=args.tp)["bench"]
    tokenizer = load_tokenizer(tokenizer_path(profile) if not args.model_dir else target)
    inputs = _bench_inputs(args, prompts, tokenizer)
    if len(prompts) < args.num_prompts:
        print(f"--num-prompts {args.num_prompts}: {source} has {len(prompts)} prompts"
              f"{f' in category {args.category}' if args.category else ''}; running {len(prompts)}", flush=True)
    sampling = bench.greedy(args.output_len, temperature=args.temp, top_p=args.top_p, top_k=args.top_k)
    overrides = dict(enforce_eager=args.enforce_eager, enable_chunked_prefill=args.enable_chunked_prefill or None,
                     max_num_seqs=args.max_num_seqs, tensor_parallel_size=args.tp)
    limit = model_max_len(target)
    if profile.device == "cuda":
        # the benchmark script's 16384, or the model's own limit where shorter
        overrides.update(gpu_memory_utilization=args.gpu_memory_utilization,
                         max_model_len=args.max_model_len or min(16384, limit or 16384))
    elif args.max_model_len:
        overrides["max_model_len"] = args.max_model_len
    context = overrides.get("max_model_len") or min(CPU_DEFAULTS["max_model_len"], limit or 10**9)  # as open_engine
    rendered = inputs if args.backend != "openai-chat" else apply_chat_template(tokenizer, prompts)
    lengths = [len(r["prompt_token_ids"]) for r in rendered]
    check_lengths(lengths, args.output_len, context, limit, args.max_model_len)
    if args.model_dir:
        overrides["model"] = args.model_dir
    if args.allowed_local_media_path:
        overrides["allowed_local_media_path"] = args.allowed_local_media_path
    result = bench.compare(profile, config, inputs, sampling, baseline=args.baseline,
                           chat=args.backend == "openai-chat", dataset=source, **overrides)
    if args.print_output:
        for prompt, text in zip(prompts, result.speculative.texts):
            print("-" * 50)
            print(f"prompt: {prompt.text}")
            print(f"generated text: {text}")
    print(result.report())
    if args.json_path:
        path = result.save_json(args.json_path)
        result.save_csv(Path(args.json_path).with_suffix(".csv"))
        print(f"result record: {path}")
    if expected is not None:
        al, rtol = (result.speculative.counters.acceptance_length,
                    GPU_REFERENCE_RTOL if profile.device == "cuda" else CPU_REFERENCE_RTOL)
        if not (1 - rtol) * expected <= al <= (1 + rtol) * expected:
            print(f"Test FAILED: acceptance_length {al:.3f} is not within {rtol:.0%} of {expected}")
            return 1
        print(f"Test passed! Expected AL: {expected}, got {al:.3f}")
    return 0


def cmd_models(args) -> int:
    if args.action == "fetch":
        print(fetch_smollm2(force=args.force, source=args.source))
    else:
        print(list_profiles(weights_gb))
    return 0


def cmd_env(args) -> int:
    print(format_check(check()))
    return 0


def cmd_migrate(args) -> int:
    if not args.command:
        raise SpeclabError("usage: speclab migrate -- <old vllm command line>")
    print(format_migration(args.command))
    return 0


def cmd_run(args) -> int:
    if args.weights:
        os.environ[random_weights.ENV] = args.weights  # the notebooks' kernels inherit it
    profile = get_profile(args.profile or None)
    only = [o.strip() for o in args.only.split(",")] if args.only is not None else None  # '' is a mistake, not "all"
    books = series(only=only)
    for prefix in only or []:
        require(bool(prefix) and any(b.name.startswith(prefix) for b in books),
                 f"--only {prefix!r} matches no notebook in {NOTEBOOKS}: use prefixes such as 00,02")
    params = parameters.parse(args.parameters)
    parameters.check(params, books)
    require(not (args.record and params), "--record stores a reference run at the lessons' defaults: drop the -p "
             "parameters, or run without --record")
    require_device(profile)
    random_weights.check_profile(profile)
    if args.out is not None:
        files.check_folder("--out", args.out)
        require_free(Path(args.out))
    if profile.offline or random_weights.is_random():  # random weights tokenize with SmolLM2
        fetch_smollm2()
    if args.record:
        os.environ[reference.RECORDING_ENV] = profile.name  # the kernels leave this profile's column out
    return main_job(profile.name, Path(args.out) if args.out else None, only, params, record=args.record)


def config_from_args(args, profile: Profile) -> dict | None:
    return config_for(profile, args.method, args.num_spec_tokens, args.prompt_lookup_max, args.prompt_lookup_min)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def cmd_serve(args) -> int:
    check_serve_args(args)
    # SIGTERM/SIGHUP (kill, a closed terminal) and SIGINT, even where a parent ignored it, all
    # leave through the with-block below, which stops the server's process group.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    profile = get_profile(args.profile)
    config = config_from_args(args, profile)
    print(f"speclab: starting vLLM for {profile.name} ({args.method}); this takes a minute or two on a CPU", flush=True)
    with serve(profile, config, port=args.port, log_path=args.log_path, startup_timeout=args.startup_timeout,
               enforce_eager=args.enforce_eager, host=args.host) as server:
        if args.host != HOST:
            print(f"listening on every interface ({args.host}): other machines reach it at this machine's address, "
                  f"port {server.port}", flush=True)
        print(f"serving {server.model} at {server.base_url}/v1 (ready after {server.start_seconds:.0f} s)")
        print(f"speculative config: {json.dumps(config)}")
        print(f"log: {server.log_path}")
        print("check it:")
        print(f"  {curl_command(server)}")
        print(f"metrics: curl -s {server.base_url}/metrics | grep spec_decode")
        print("Ctrl-C stops the server (and every process it started).", flush=True)
        while server.alive():
            time.sleep(1.0)
        lines = server.log_tail()
        raise ServerError(f"the server exited on its own: {headline(lines)} [log: {server.log_path}]")
