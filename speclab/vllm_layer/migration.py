"""Old vLLM command lines rewritten for today's vLLM: the removed speculative flags become one JSON value.

Older releases configured speculation with separate flags (``--speculative-model``,
``--num-speculative-tokens``, ``--ngram-prompt-lookup-max``, ...); today's vLLM stops at them with
``unrecognized arguments``. ``migrate_command`` rewrites such a command line into
``--speculative-config '<json>'`` with one note per change, and refuses what today's vLLM would.
"""

from __future__ import annotations

import json
import shlex

from ..errors import ConfigError
from .configs import check_fields

# old flag -> (key in --speculative-config, type) ; None key = dropped
REMOVED_FLAGS = {
    "--speculative-model": ("model", str),
    "--num-speculative-tokens": ("num_speculative_tokens", int),
    "--ngram-prompt-lookup-max": ("prompt_lookup_max", int),
    "--ngram-prompt-lookup-min": ("prompt_lookup_min", int),
    "--speculative-draft-tensor-parallel-size": ("draft_tensor_parallel_size", int),
    "--draft-model-tp-size": ("draft_tensor_parallel_size", int),
    "--speculative-model-quantization": ("quantization", str),
    "--speculative-max-model-len": ("max_model_len", int),
    "--speculative-disable-by-batch-size": ("disable_by_batch_size", int),
}
DROPPED_SWITCHES = {
    "--use-v2-block-manager": "dropped: the V2 block manager became the only one (then the V1 engine replaced both)",
    "--speculative-disable-mqa-scorer": "dropped: the MQA scorer went with the V0 engine",
}
RENAMED_FLAGS = {"--target-model-tp-size": "--tensor-parallel-size"}
ENTRYPOINTS = {
    "vllm.entrypoints.api_server": ("vllm.entrypoints.openai.api_server",
                                    "the plain api_server is a demo; "
                                    "the OpenAI-compatible server is the supported one"),
}


def _method_for_model(model: str) -> str:
    name = model.lower()
    if model == "[ngram]":
        return "ngram"
    if "eagle3" in name or "eagle-3" in name:
        return "eagle3"
    if "eagle" in name:
        return "eagle"
    if "medusa" in name:
        return "medusa"
    return "draft_model"


def migrate_command(argv: list[str] | str) -> tuple[list[str], list[str]]:
    """Rewrite an old vLLM command line; returns (new argv, one note per change).

    Flags speclab does not know pass through untouched. A command given as one string, or as a list
    holding one string (``speclab migrate "vllm serve ..."``), is split the way a shell would.
    """
    if isinstance(argv, str):
        argv = [argv]
    if len(argv) == 1:
        try:
            argv = shlex.split(argv[0])
        except ValueError as err:  # an unclosed quote
            raise ConfigError(f"cannot split the command ({err}): close its quotes") from None
    out: list[str] = []
    notes: list[str] = []
    spec: dict = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, eq, inline = token.partition("=")
        if flag in REMOVED_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise ConfigError(f"{flag} needs a value")
            key, kind = REMOVED_FLAGS[flag]
            try:
                spec[key] = kind(value)
            except ValueError:
                raise ConfigError(f"{flag} {value}: expected a whole number") from None
            if key == "quantization" and value == "int8":  # not a method today's vLLM knows
                spec[key] = "fp8"
                notes.append(f"{flag} int8 -> \"quantization\": \"fp8\" (vLLM rejects \"int8\"; fp8 is the 8-bit "
                             "on-the-fly scheme it has; or point the drafter at a pre-quantized checkpoint)")
                i += 1
                continue
            if key not in ("model", "disable_by_batch_size"):  # those two get notes of their own, below
                notes.append(f"{flag} {value} -> speculative_config[{key!r}]")
        elif flag in DROPPED_SWITCHES:
            notes.append(f"{flag} {DROPPED_SWITCHES[flag]}")
        elif flag in RENAMED_FLAGS:
            out.append(RENAMED_FLAGS[flag] + (eq + inline if eq else ""))
            notes.append(f"{flag} -> {RENAMED_FLAGS[flag]}")
        elif token in ENTRYPOINTS:
            new, why = ENTRYPOINTS[token]
            out.append(new)
            notes.append(f"{token} -> {new}: {why}")
        else:
            out.append(token)
        i += 1
    if spec:
        model = spec.pop("model", None)
        if model is None:
            raise ConfigError("the old flags set speculative options but no --speculative-model: add the drafter (or "
                              "\"[ngram]\")")
        method = _method_for_model(model)
        config = {"method": method}
        if method != "ngram":
            config["model"] = model
        config.update(spec)
        if "num_speculative_tokens" not in config:
            raise ConfigError("--speculative-model without --num-speculative-tokens: vLLM needs k, e.g. 3")
        limit = config.pop("disable_by_batch_size", None)
        if limit is not None:  # today's vLLM has a batch-size schedule instead
            if limit < 1:
                raise ConfigError(f"--speculative-disable-by-batch-size {limit}: expected a whole number >= 1")
            schedule = [[1, limit, config["num_speculative_tokens"]], [limit + 1, limit + 1, 0]]
            config["num_speculative_tokens_per_batch_size"] = schedule
            notes.append(f"--speculative-disable-by-batch-size {limit} -> speculative_config"
                         f"['num_speculative_tokens_per_batch_size'] {schedule}: k drafts while at most {limit} "
                         "requests run, none above")
        if method == "ngram" and "prompt_lookup_max" not in config:
            notes.append("ngram without --ngram-prompt-lookup-max: today's default lookup window applies")
        check_fields(config)  # what today's vLLM would refuse (k=0, min > max) is refused here
        notes.insert(0, f"--speculative-model {model} -> method {method!r}" + ("" if method == "ngram"
                                                                               else f", model {model!r}"))
        out += ["--speculative-config", json.dumps(config)]
    return out, notes


NOTHING_MIGRATED = "nothing to migrate: the command has none of the removed flags, so it is unchanged"


def format_migration(argv: list[str] | str) -> str:
    new, notes = migrate_command(argv)
    lines = [shlex.join(new), ""] + [f"# {n}" for n in notes or [NOTHING_MIGRATED]]
    return "\n".join(lines)
