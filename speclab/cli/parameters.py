"""The lessons' papermill parameters, read and checked once, whichever way a lesson is run.

``speclab run -p name value`` reads each value as YAML and checks it against the defaults in the
selected lessons' ``parameters`` cells before any notebook starts. A lesson run directly by papermill
(``papermill 08_workloads.ipynb out.ipynb -p methods ngram``) gets ``-p`` values as papermill guesses
them, a list as plain text; so each lesson's first code cell calls :func:`check_lesson`, which reads
such text the same way and refuses a value of the wrong kind there, in one line, before any engine.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from ..errors import SpeclabError, require
from ..files import NOTEBOOKS
from ..models.profiles import Profile, get_profile
from ..vllm_layer.configs import METHODS, did_you_mean

FLAG_PARAMETERS = ("enforce_eager",)  # true or false, where a lesson's default None means "the device's own"
COUNT_PARAMETERS = ("k", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "num_prompts",
                    "output_len", "prompts_per_category", "k_for_temperature", "steps", "num_sequences")
RUNNER_PARAMETERS = ("profile", "output_dir")  # speclab run sets these from --profile and --out
EMPTY_ALLOWED = ("vllm_methods",)  # lesson 13 with no vLLM methods runs its torch sections only


def parse_value(name: str, value: str):
    """One ``-p`` value read as YAML: ``3`` is a number, ``[ngram, eagle]`` a list, ``true`` a flag."""
    import yaml

    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or type(err).__name__
        raise SpeclabError(f"-p {name} {value!r} is not a YAML value ({problem}): "
                           "quote text, write lists as [a, b]") from None


def parse(pairs: list[list[str]]) -> dict:
    """``speclab run``'s ``-p name value`` pairs, each value read as YAML."""
    return {name: parse_value(name, value) for name, value in pairs or []}


def defaults(books) -> dict:
    """Each notebook parameter's default, read from the ``parameters`` cells (papermill's)."""
    found = {}
    for book in books:
        for cell in json.loads(Path(book).read_text())["cells"]:
            if "parameters" not in cell.get("metadata", {}).get("tags", []):
                continue
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    try:
                        found.setdefault(node.targets[0].id, ast.literal_eval(node.value))
                    except ValueError:
                        found.setdefault(node.targets[0].id, None)
    return found


def check(params: dict, books) -> None:
    """Names the selected notebooks take, with values of their defaults' kind, before anything runs.

    papermill would inject an unknown name silently, and a wrong value fails hours into a run.
    """
    known = defaults(books)
    for name, value in params.items():
        if name in RUNNER_PARAMETERS:
            raise SpeclabError(f"-p {name}: use --{'profile' if name == 'profile' else 'out'} instead")
        if name not in known:
            raise SpeclabError(f"-p {name}: no selected notebook takes it{did_you_mean(name, known)}; "
                               f"they take {', '.join(sorted(set(known) - set(RUNNER_PARAMETERS)))}")
        default, shown = known[name], f"-p {name} {value!r}"
        if isinstance(default, bool) or name in FLAG_PARAMETERS:
            require(isinstance(value, bool), f"{shown}: expected true or false")
        elif isinstance(default, int):
            require(isinstance(value, int) and not isinstance(value, bool), f"{shown}: expected a whole number")
        elif isinstance(default, float):
            require(isinstance(value, (int, float)) and not isinstance(value, bool), f"{shown}: expected a number")
        elif isinstance(default, list):
            require(isinstance(value, list) and (value or name in EMPTY_ALLOWED), f"{shown}: expected a list such as "
                                                        f"{json.dumps(default[:2])} (write it as [a, b])")
        elif isinstance(default, str):
            require(isinstance(value, str), f"{shown}: expected text")
        if name in COUNT_PARAMETERS:
            require(value >= 1, f"{shown}: must be >= 1")
        if name == "temperature":
            require(0 <= value <= 2, f"{shown}: must be in [0, 2]")
        for method in (value if name == "methods" else [value] if name == "method" else []):
            require(method in METHODS, f"{shown}: unknown method {method!r}{did_you_mean(method, METHODS)}; "
                                        f"choose from {', '.join(METHODS)}")


def check_lesson(namespace: dict, lesson: str, notebook_dir: Path = NOTEBOOKS) -> Profile:
    """A lesson's parameters as it holds them now (its ``globals()``), read and checked as ``speclab run -p``
    reads and checks them: text where the default is not text is read as YAML, in place, then every value
    that differs from its default is checked. Returns the lesson's profile, looked up here once: the lesson
    passes that ``Profile`` on, and a wrong name fails here."""

    books = sorted(Path(notebook_dir).glob(f"{lesson}_*.ipynb"))
    if not books:
        raise SpeclabError(f"no lesson {lesson!r} in {notebook_dir}")
    given = {}
    for name, default in defaults(books).items():
        if name in RUNNER_PARAMETERS or name not in namespace:
            continue
        value = namespace[name]
        if isinstance(value, str) and default is not None and not isinstance(default, str):
            value = namespace[name] = parse_value(name, value)
        if value != default:
            given[name] = value
    check(given, books)
    return get_profile(namespace["profile"])
