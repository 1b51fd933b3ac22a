"""Every lesson executes end to end on the CPU profile, at small parameters, under nbval.

Each notebook gets papermill's parameter injection (the same mechanism the main job and
``papermill -p`` use) and is then executed by nbval in lax mode: every cell must run, and
cells marked ``# NBVAL_CHECK_OUTPUT`` must reproduce their recorded output. Notebooks with such
cells are first executed by papermill, so nbval has the recorded outputs to compare against;
the others run once, under nbval, to keep the suite inside CI's time.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
from papermill.iorw import load_notebook_node  # adds the cell metadata parameterize_notebook expects
from papermill.parameterize import parameterize_notebook

from speclab.runner import NOTEBOOKS, execute, run_series, series

pytestmark = pytest.mark.notebook

# Small settings shared by the lessons; each notebook receives only the names it declares.
SMALL = {"enforce_eager": True, "output_len": 32, "num_prompts": 4, "prompts_per_category": 1,
         "num_samples": 2000, "num_tokens": 500, "requests_per_level": 4, "concurrency": [1, 4],
         "samples": 3, "k_values": [1, 3], "temperatures": [0.0, 1.0]}
# Per-notebook overrides where the shared ones are not enough.
PER_NOTEBOOK = {
    "02_ngram_prompt_lookup": {"categories": ["summarisation", "chat"]},
    "08_workloads": {"categories": ["summarisation", "chat"]},
    "10_serving_and_monitoring": {"concurrency": [1, 2], "requests_per_level": 2, "output_len": 16,
                                  "sample_interval": 0.5},
    "11_train_your_own_drafter": {"steps": 4, "num_sequences": 4, "num_prompts": 2},
}
BOOKS = series()


def small_parameters(book: Path) -> dict:
    declared = pm.inspect_notebook(str(book))
    wanted = {**SMALL, **PER_NOTEBOOK.get(book.stem, {})}
    return {name: value for name, value in wanted.items() if name in declared}


def checks_outputs(book: Path) -> bool:
    return "NBVAL_CHECK_OUTPUT" in book.read_text()


def nbval(path: Path) -> subprocess.CompletedProcess:
    # a cell that opens several engines can take minutes on a 2-core machine: allow an hour per cell
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-cell-timeout", "3600",
                           "-p", "no:cacheprovider", str(path)],
                          capture_output=True, text=True, cwd=path.parent)


def test_series_is_numbered_and_parameterised():
    assert [b.name[:2] for b in BOOKS] == sorted(b.name[:2] for b in BOOKS)
    for book in BOOKS:
        params = pm.inspect_notebook(str(book))
        assert {"profile", "interactive", "output_dir"} <= set(params), book.name
        assert params["interactive"]["default"] == "False", f"{book.name}: headless runs must not build widgets"
        cells = nbformat.read(book, as_version=4).cells
        for cell in cells:
            if cell.cell_type == "code":
                ast.parse(cell.source, filename=f"{book.name} cell {cell.get('id')}")  # fails fast, before any kernel
        assert "parameters" in cells[0].metadata.get("tags", []), f"{book.name}: the first cell must be the parameters cell"
        assert not any(c.get("outputs") for c in cells if c.cell_type == "code"), f"{book.name}: commit notebooks without outputs"
        prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
        assert "What you should see" in prose and "WHAT_YOU_SHOULD_SEE" not in prose, f"{book.name}: write what a real run shows"


@pytest.mark.parametrize("book", BOOKS, ids=[b.stem for b in BOOKS])
def test_notebook_executes_under_nbval(book, tmp_path):
    params = {"profile": "cpu-tiny", "output_dir": str(tmp_path), **small_parameters(book)}
    if checks_outputs(book):
        ok, seconds, error = execute(book, tmp_path / "executed", params)
        assert ok, f"{book.name} failed after {seconds:.0f} s: {error}"
        path = tmp_path / "executed" / book.name
    else:
        path = tmp_path / book.name
        nbformat.write(parameterize_notebook(load_notebook_node(str(book)), params), path)
    proc = nbval(path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert list((tmp_path / "results").glob("*.json")), f"{book.name} saved no results"


def test_parameterisation_changes_the_run(tmp_path):
    """Another k and lookup window through papermill: the results must say so."""
    book = NOTEBOOKS / "02_ngram_prompt_lookup.ipynb"
    params = {"profile": "cpu-tiny", "output_dir": str(tmp_path), **small_parameters(book),
              "k": 2, "prompt_lookup_max": 3, "categories": ["rag"]}
    ok, _, error = execute(book, tmp_path / "nb", params)
    assert ok, error
    results = json.loads((tmp_path / "results" / "02_ngram_prompt_lookup.json").read_text())
    assert results["k"] == 2 and results["outputs_identical"] is True
    assert {k for k in results if k.startswith("speedup_")} == {"speedup_rag"}


def test_main_job_writes_run_folder(tmp_path):
    """The runner behind `make run`: executed notebooks, figures, results, summary and report."""
    cheap = [b.name[:2] for b in BOOKS if checks_outputs(b)][:1]
    summary = run_series("cpu-tiny", tmp_path, only=cheap, extra={}, per_notebook={}, log=lambda m: None)
    assert summary["notebooks"] and all(e["ok"] for e in summary["notebooks"])
    assert (tmp_path / "notebooks" / summary["notebooks"][0]["notebook"]).is_file()
    assert json.loads((tmp_path / "summary.json").read_text())["profile"] == "cpu-tiny"
    assert "| ok |" in (tmp_path / "report.md").read_text()
    assert not list(tmp_path.glob("notebooks/.*partial*"))


def test_medusa_lesson_reads_as_vllm_033(tmp_path):
    """Lesson 06 on a vLLM without Medusa: no engine starts, the lesson explains and finishes."""
    book = NOTEBOOKS / "06_medusa.ipynb"
    params = {"profile": "cpu-tiny", "output_dir": str(tmp_path), **small_parameters(book), "assume_vllm": "0.33.0"}
    ok, seconds, error = execute(book, tmp_path / "nb", params)
    assert ok, error
    results = json.loads((tmp_path / "results" / "06_medusa.json").read_text())
    assert results["ran"] is False
