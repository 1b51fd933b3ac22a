"""Record the outputs nbval checks: ``python -m tests.record_outputs [NN ...]``.

Cells marked ``# NBVAL_CHECK_OUTPUT`` print deterministic things (tables, one-line errors,
reference arithmetic). Their outputs are stored in the committed notebooks, recorded from a run
with the test suite's small parameters, so that ``make test`` compares a fresh run against
them: a change in speclab that alters what a lesson prints fails the test until the outputs are
recorded again on purpose. Every other cell is committed without outputs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat

from speclab.cli.runner import execute, series
from tests.test_notebooks import MARK, checks_outputs, small_parameters


def record(book: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="speclab-record-") as tmp:
        params = {"profile": "cpu-tiny", "output_dir": tmp, **small_parameters(book)}
        ok, seconds, error = execute(book, Path(tmp) / "executed", params)
        if not ok:
            raise SystemExit(f"{book.name} failed after {seconds:.0f} s: {error}")
        executed = nbformat.read(Path(tmp) / "executed" / book.name, as_version=4)
    recorded = {c.get("id"): c.outputs for c in executed.cells if c.cell_type == "code" and MARK in c.source}
    nb = nbformat.read(book, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = recorded.get(cell.get("id"), []) if MARK in cell.source else []
    number_checked_cells(nb)
    nbformat.write(nb, book)
    print(f"{book.name}: recorded {len(recorded)} checked cells ({seconds:.0f} s)")


def number_checked_cells(nb) -> None:
    """nbval skips a reference cell without an execution count ("Unrun reference cell has
    outputs"): checked cells get their place among the code cells, all others none."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    for n, cell in enumerate(code, start=1):
        cell.execution_count = n if cell.outputs else None
        for output in cell.outputs:
            if "execution_count" in output:
                output["execution_count"] = cell.execution_count


if __name__ == "__main__":
    only = sys.argv[1:] or None
    for book in series(only=only):
        if checks_outputs(book):
            record(book)
