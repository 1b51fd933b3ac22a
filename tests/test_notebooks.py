"""Every lesson executes end to end with papermill on the CPU profile, at small parameters.

The executed copies are then checked with nbval in lax mode: it runs them again and compares
the outputs of cells marked ``# NBVAL_CHECK_OUTPUT`` (deterministic ones, such as greedy-output
equality) with what papermill recorded.
"""

import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from speclab.runner import NOTEBOOKS, execute, series

pytestmark = pytest.mark.notebook

# Small settings shared by the lessons; each notebook receives only the names it declares.
SMALL = {"enforce_eager": True, "output_len": 32, "num_prompts": 4, "prompts_per_category": 1,
         "num_samples": 2000, "num_tokens": 500, "requests_per_level": 4, "concurrency": [1, 4],
         "samples": 3, "k_values": [1, 3], "temperatures": [0.0, 1.0]}
# Per-notebook overrides where the shared ones are not enough.
PER_NOTEBOOK = {
    "02_ngram_prompt_lookup": {"categories": ["summarisation", "chat"]},
}
BOOKS = series()


def small_parameters(book: Path) -> dict:
    declared = pm.inspect_notebook(str(book))
    wanted = {**SMALL, **PER_NOTEBOOK.get(book.stem, {})}
    return {name: value for name, value in wanted.items() if name in declared}


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """Executed copies, keyed by notebook stem, filled as the tests run."""
    return {"dir": tmp_path_factory.mktemp("executed"), "books": {}}


def test_series_is_numbered_and_parameterised():
    assert [b.name[:2] for b in BOOKS] == sorted(b.name[:2] for b in BOOKS)
    for book in BOOKS:
        params = pm.inspect_notebook(str(book))
        assert {"profile", "interactive", "output_dir"} <= set(params), book.name
        assert params["interactive"]["default"] == "False", f"{book.name}: headless runs must not build widgets"
        first = nbformat.read(book, as_version=4).cells[0]
        assert "parameters" in first.metadata.get("tags", []), f"{book.name}: the first cell must be the parameters cell"
        cells = nbformat.read(book, as_version=4).cells
        assert not any(c.get("outputs") for c in cells if c.cell_type == "code"), f"{book.name}: commit notebooks without outputs"
        prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
        assert "What you should see" in prose and "WHAT_YOU_SHOULD_SEE" not in prose, f"{book.name}: write what a real run shows"


@pytest.mark.parametrize("book", BOOKS, ids=[b.stem for b in BOOKS])
def test_notebook_executes(book, executed, tmp_path):
    params = {"profile": "cpu-tiny", "output_dir": str(tmp_path), **small_parameters(book)}
    ok, seconds, error = execute(book, executed["dir"], params)
    assert ok, f"{book.name} failed after {seconds:.0f} s: {error}"
    executed["books"][book.stem] = executed["dir"] / book.name
    assert list((tmp_path / "results").glob("*.json")), f"{book.name} saved no results"
    print(f"{book.name}: {seconds:.0f} s")


def test_parameterisation_changes_the_run(tmp_path):
    """Another k and lookup window through papermill: the results must say so."""
    import json

    book = NOTEBOOKS / "02_ngram_prompt_lookup.ipynb"
    params = {"profile": "cpu-tiny", "output_dir": str(tmp_path), "k": 2, "prompt_lookup_max": 3,
              **{k: v for k, v in small_parameters(book).items()}, "categories": ["rag"]}
    ok, _, error = execute(book, tmp_path / "nb", params)
    assert ok, error
    results = json.loads((tmp_path / "results" / "02_ngram_prompt_lookup.json").read_text())
    assert results["k"] == 2 and results["outputs_identical"] is True
    assert set(k for k in results if k.startswith("speedup_")) == {"speedup_rag"}


@pytest.mark.parametrize("book", BOOKS, ids=[b.stem for b in BOOKS])
def test_nbval_lax(book, executed):
    path = executed["books"].get(book.stem)
    if path is None:
        pytest.skip("the notebook did not execute in this session")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--nbval-lax", "-p", "no:cacheprovider", str(path)],
                          capture_output=True, text=True, cwd=path.parent)
    assert proc.returncode == 0, proc.stdout[-3000:]
