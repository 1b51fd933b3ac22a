"""The lessons' parameters as papermill passes them: each lesson's first code cell reads and checks
them through ``parameters.check_lesson``, the way ``speclab run -p`` does, before any engine."""

import json
import re

import pytest

from speclab.cli import parameters
from speclab.cli.runner import series
from speclab.errors import SpeclabError
from speclab.files import NOTEBOOKS
from speclab.models.profiles import PROFILES

CHECK = 'prof = parameters.check_lesson(globals(), "{}")'


def namespace(lesson: str, **given) -> dict:
    """A lesson's globals after papermill injected ``given`` over its defaults."""
    books = sorted(NOTEBOOKS.glob(f"{lesson}_*.ipynb"))
    return {**parameters.defaults(books), **given}


@pytest.mark.parametrize("book", series(), ids=lambda b: b.stem)
def test_every_lesson_checks_its_own_parameters_right_after_its_title(book):
    cells = json.loads(book.read_text())["cells"]
    assert "parameters" in cells[0]["metadata"]["tags"] and cells[1]["source"][0].startswith("# ")
    assert CHECK.format(book.name[:2]) in "".join(cells[2]["source"])


def test_text_where_a_list_is_expected_is_read_as_speclab_run_reads_it():
    ns = namespace("08", methods="[ngram, eagle]", prompts_per_category="2")
    parameters.check_lesson(ns, "08")
    assert ns["methods"] == ["ngram", "eagle"] and ns["prompts_per_category"] == 2
    gpus = namespace("09", gpu_sizes="[24, 80]")
    parameters.check_lesson(gpus, "09")
    assert gpus["gpu_sizes"] == [24, 80]


@pytest.mark.parametrize("lesson, given, message", [
    ("08", {"methods": "ngram"}, "-p methods 'ngram': expected a list such as [\"ngram\", \"eagle\"]"),
    ("08", {"methods": "[ngram, egale]"}, "unknown method 'egale' (did you mean 'eagle'?)"),
    ("02", {"k": 0}, "-p k 0: must be >= 1"),
    ("02", {"k": "three"}, "-p k 'three': expected a whole number"),
    ("07", {"temperatures": "[0, 5]"}, None),  # a list of numbers: the list is checked, not each temperature
    ("08", {"methods": "[]"}, "-p methods []: expected a list such as"),  # nothing to measure
    ("13", {"vllm_methods": "[]"}, None),  # the torch sections alone
    ("02", {"profile": "cpu-tinyy"}, "cpu-tiny"),
    ("09", {"gpu_sizes": "[24, 80"}, "is not a YAML value"),
])
def test_a_bad_value_is_one_line_that_says_what_to_do(lesson, given, message):
    ns = namespace(lesson, **given)
    if message is None:
        parameters.check_lesson(ns, lesson)
        return
    with pytest.raises(SpeclabError, match=re.escape(message)) as info:
        parameters.check_lesson(ns, lesson)
    assert "\n" not in str(info.value)


def test_the_check_hands_the_lesson_its_profile_looked_up_once():
    assert parameters.check_lesson(namespace("04", profile="gpu-tiny"), "04") is PROFILES["gpu-tiny"]
    assert parameters.check_lesson(namespace("04"), "04") is PROFILES["cpu-tiny"]


def test_an_unknown_lesson_is_refused():
    with pytest.raises(SpeclabError, match="no lesson '99'"):
        parameters.check_lesson({}, "99")


@pytest.mark.notebook
def test_papermill_run_directly_stops_at_the_check_in_one_line(tmp_path):
    import papermill

    book = next(b for b in series() if b.name.startswith("08_"))
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(str(book), str(tmp_path / "out.ipynb"), parameters={"methods": "ngram"},
                                   cwd=str(book.parent), progress_bar=False)
    assert info.value.traceback == ["SpeclabError: -p methods 'ngram': expected a list such as [\"ngram\", \"eagle\"] "
                     "(write it as [a, b])"]
    cells = json.loads((tmp_path / "out.ipynb").read_text())["cells"]
    failed = [i for i, c in enumerate(cells) if any(o["output_type"] == "error" for o in c.get("outputs", []))]
    checks = [i for i, c in enumerate(cells) if "check_lesson" in "".join(c["source"])]
    assert failed == checks  # the check cell, before any engine
