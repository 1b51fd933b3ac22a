"""The conclusions the lessons draw from measurements hold on every stored reference run.

A lesson's prose keeps reasons and conclusions, never typed figures (a cell prints those from
``data/reference/``). Each conclusion about measured results is listed in ``tests/conclusions/NN.py``
as (results file, a fragment that stands verbatim in the lesson's markdown, a predicate over that
results file; a predicate of two arguments also gets the reference's profile, to read another of its
files with ``speclab.measure.reference.results``). This test fails when the fragment is no longer in the
lesson (the prose changed: update the entry with it) or when a reference run no longer bears the
conclusion out (the data changed: change the conclusion, not the data).
"""

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

from speclab.cli.runner import NOTEBOOKS
from speclab.measure import reference

HERE = Path(__file__).resolve().parent / "conclusions"


def _load(path: Path) -> list[tuple]:
    spec = importlib.util.spec_from_file_location(f"conclusions_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CONCLUSIONS


ENTRIES = [(path.stem, *entry) for path in sorted(HERE.glob("[0-9][0-9].py")) for entry in _load(path)]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("**", "")).strip()


def markdown(lesson_number: str) -> str:
    book = next(NOTEBOOKS.glob(f"{lesson_number}_*.ipynb"))
    return _flat("\n".join(c.source for c in nbformat.read(book, as_version=4).cells if c.cell_type == "markdown"))


def test_every_lesson_that_draws_conclusions_has_a_file_and_entries():
    assert ENTRIES and {e[0] for e in ENTRIES} >= {"02", "04", "08", "16"}


@pytest.mark.parametrize("lesson, stem, fragment, check", ENTRIES,
                         ids=[f"{e[0]}-{e[2][:40]}" for e in ENTRIES])
def test_conclusion_is_stated_and_holds_on_every_reference(lesson, stem, fragment, check):
    assert _flat(fragment) in markdown(lesson), f"lesson {lesson} no longer says {fragment!r}"
    for profile in reference.SHOWN:
        found = reference.results(stem, profile)
        assert found is not None, f"no {profile} reference stores {stem}: record it (speclab run --record)"
        holds = check(found, profile) if check.__code__.co_argcount == 2 else check(found)
        assert holds, f"{profile} reference: {fragment!r} does not hold for {stem}"
