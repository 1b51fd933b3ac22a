"""Every lesson executes end to end on the CPU profile, at small parameters, under nbval.

Each notebook gets papermill's parameter injection (the same mechanism the main job and
``papermill -p`` use) and is then executed once by nbval in lax mode: every cell must run, and
cells marked ``# NBVAL_CHECK_OUTPUT`` must reproduce the outputs committed with them (recorded
at these small parameters by ``python -m tests.record_outputs``). All other cells are committed
without outputs.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
from papermill.iorw import load_notebook_node  # adds the cell metadata parameterize_notebook expects
from papermill.parameterize import parameterize_notebook

from speclab.cli.runner import NOTEBOOKS, execute, run_series, series
from speclab.vllm_layer.engine import IN_PROCESS_ENV

pytestmark = pytest.mark.notebook

# Small settings shared by the lessons; each notebook receives only the names it declares.
SMALL = {"enforce_eager": True, "output_len": 32, "num_prompts": 4, "prompts_per_category": 1,
         "num_samples": 2000, "num_tokens": 500, "requests_per_level": 4, "concurrency": [1, 4],
         "samples": 3, "k_values": [1, 3], "temperatures": [0.0, 1.0]}
# Per-notebook overrides where the shared ones are not enough.
PER_NOTEBOOK = {
    # not the defaults (k=3, lookup max 4): the results must show the run took the injected values
    "02_ngram_prompt_lookup": {"categories": ["summarisation", "chat"], "k": 2, "prompt_lookup_max": 3},
    # one engine per method: two methods still compare lookup with a trained drafter per workload
    # (draft_model's greedy equality and acceptance are lesson 03's, with the same draft and k); the
    # 13-category set, its categories read from the file, one prompt each, each measured alone
    "08_workloads": {"source": "specbench_style", "methods": ["ngram", "eagle"]},
    # five engines (baseline + one per k, then baseline + ngram over the temperatures): two prompts
    # (a code edit and a chat, one per category in turn) instead of four, whose summarisation and
    # RAG prompts made every engine's first pass a long prefill
    "07_tuning": {"num_prompts": 2},
    "10_serving_and_monitoring": {"concurrency": [1, 2], "requests_per_level": 2, "output_len": 16,
                                  "sample_interval": 0.5},
    "11_train_your_own_drafter": {"steps": 4, "num_sequences": 4, "num_prompts": 2},
    "13_token_trees": {"budgets": [1, 4], "vllm_methods": ["eagle3"], "vllm_temperatures": [0.0, 1.0]},
    # three rounds of one request per template: first sight, a new input, the first again
    "14_suffix_decoding": {"first_round": 1, "new_round": 1},
}
BOOKS = series()


def small_parameters(book: Path) -> dict:
    declared = pm.inspect_notebook(str(book))
    wanted = {**SMALL, **PER_NOTEBOOK.get(book.stem, {})}
    return {name: value for name, value in wanted.items() if name in declared}


MARK = "# NBVAL_CHECK_OUTPUT"


def checks_outputs(book: Path) -> bool:
    return MARK in book.read_text()


def nbval(path: Path) -> subprocess.CompletedProcess:
    """Run one notebook under nbval, its CPU engines inside the kernel (speclab.vllm_layer.engine.IN_PROCESS_ENV:
    two process starts fewer per engine, about 25 s on a 2-core machine; the main job's test below keeps
    vLLM's own process layout)."""
    # a cell that opens several engines can take minutes on a 2-core machine: allow an hour per cell
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-cell-timeout", "3600",
                           "-p", "no:cacheprovider", str(path)],
                          capture_output=True, text=True, cwd=path.parent, env={**os.environ, IN_PROCESS_ENV: "1"})


def test_series_is_numbered_and_parameterised():
    assert [b.name[:3] for b in BOOKS] == [f"{n:02d}_" for n in range(len(BOOKS))]  # 00_, 01_, ... no gaps or repeats
    for book in BOOKS:
        params = pm.inspect_notebook(str(book))
        assert {"profile", "interactive", "output_dir"} <= set(params), book.name
        assert params["interactive"]["default"] == "False", f"{book.name}: headless runs must not build widgets"
        cells = nbformat.read(book, as_version=4).cells
        for cell in cells:
            if cell.cell_type == "code":
                ast.parse(cell.source, filename=f"{book.name} cell {cell.get('id')}")  # fails fast, before any kernel
        assert "parameters" in cells[0].metadata.get("tags", []), (
            f"{book.name}: the first cell must be the parameters cell")
        for cell in cells:
            if cell.cell_type == "code" and MARK in cell.source:
                assert cell.get("outputs"), (f"{book.name}: record the checked outputs "
                                             f"(python -m tests.record_outputs {book.name[:2]})")
            elif cell.cell_type == "code":
                assert not cell.get("outputs"), (
                    f"{book.name}: commit cells without outputs (only checked cells keep theirs)")
        prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
        assert "What you should see" in prose and "WHAT_YOU_SHOULD_SEE" not in prose, (
            f"{book.name}: write what a real run shows")


def run_under_nbval(book: Path, profile: str, tmp_path: Path, check_outputs: bool = True) -> list[dict]:
    """Inject the small parameters, run nbval once, check what the lesson saved; returns its results."""
    params = {"profile": profile, "output_dir": str(tmp_path), **small_parameters(book)}
    node = parameterize_notebook(load_notebook_node(str(book)), params)  # keeps the recorded outputs
    if not check_outputs:  # the recorded outputs are cpu-tiny's: other profiles print other numbers
        for cell in node.cells:
            cell.source = cell.source.replace(MARK, "# checked on cpu-tiny")
    path = tmp_path / book.name
    nbformat.write(node, path)
    proc = nbval(path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    saved = [json.loads(f.read_text()) for f in (tmp_path / "results").glob("*.json")]
    assert saved, f"{book.name} saved no results"
    for results in saved:  # what a lesson records is what it was given (papermill -p reaches the run)
        for name in ("k", "method", "output_len", "num_prompts"):
            if name in params and name in results:
                assert results[name] == params[name], f"{book.name}: {name} {results[name]!r} != {params[name]!r}"
    return saved


@pytest.mark.parametrize("book", BOOKS, ids=[b.stem for b in BOOKS])
def test_notebook_executes_under_nbval(book, tmp_path):
    saved = run_under_nbval(book, "cpu-tiny", tmp_path)
    if book.stem == "02_ngram_prompt_lookup":
        results = saved[0]
        assert results["k"] == 2 and results["greedy_ok"] is True
        assert {k for k in results if k.startswith("speedup_")} == {"speedup_summarisation", "speedup_chat"}
    if book.stem == "08_workloads":
        results = saved[0]
        assert results["source"] == "specbench_style" and len(results["categories"]) == 13
        for m in ("ngram", "eagle"):
            assert list(results["speedup"][m]) == results["categories"]
            assert all(len(each) == 1 for each in results["prompt_speedups"][m].values())  # one prompt apiece
        assert set(results["winners"]) == set(results["categories"])


GPU_PROFILES = ("gpu-tiny", "gpu-llama8b", "gpu-qwen3-8b")
# lessons whose every result comes from the profile's own models (the others run none, or SmolLM2)
ENGINE_LESSONS = ("00", "02", "03", "04", "07", "08", "10")


@pytest.mark.gpu
@pytest.mark.parametrize("profile", GPU_PROFILES)
@pytest.mark.parametrize("book", BOOKS, ids=[b.stem for b in BOOKS])
def test_notebook_executes_on_a_gpu_profile(book, profile, tmp_path, monkeypatch):
    """`make test-gpu`: the same lessons at the same small parameters on each GPU profile.

    The big profiles run on random weights (their published shapes) unless SPECLAB_WEIGHTS=real
    says the checkpoints are there; then every result of a lesson that ran their models says so.
    """
    from speclab.models import random_weights

    random = profile != "gpu-tiny" and os.environ.get(random_weights.ENV, "random") == "random"
    monkeypatch.setenv(random_weights.ENV, "random" if random else "real")
    saved = run_under_nbval(book, profile, tmp_path, check_outputs=False)
    if random and book.name[:2] in ENGINE_LESSONS:
        assert all(r.get("weights") == random_weights.LABEL for r in saved), f"{book.name}: a result without its label"


def test_main_job_writes_run_folder(tmp_path, capfd):
    """The runner behind `make run`: executed notebooks, figures, results, summary and report; vLLM's
    start-up output and the kernel's own warnings in the lesson's log file, none of it in the executed
    notebook or on the console."""
    summary = run_series("cpu-tiny", tmp_path, only=["00"], extra={}, per_notebook={}, log=lambda m: None)
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), (out, err)
    assert summary["notebooks"] and all(e["ok"] for e in summary["notebooks"])
    executed = nbformat.read(tmp_path / "notebooks" / summary["notebooks"][0]["notebook"], as_version=4)
    stderr = [o.text for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.get("name") == "stderr"]
    assert not stderr, stderr
    log = (tmp_path / "logs" / "00_setup.log").read_text()
    # the engine's start-up lines, where they belong: its worker binding memory (in the kernel's process,
    # where the weights' progress bar is off) or its weights loading (in a worker process)
    assert "NUMA binding" in log or "Loading safetensors checkpoint shards" in log
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
