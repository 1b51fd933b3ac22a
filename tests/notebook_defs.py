"""The code a lesson teaches, taken from its cells, so tests can check it against the package.

A lesson marks the cells that define what it teaches with the cell tag ``define``. Those cells
hold imports and definitions only (no engine, no long run): executing them in order gives the
lesson's own functions and classes, which a test compares with their twins in ``speclab``.
"""

import ast
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TAG = "define"


def defining_cells(lesson: str) -> list[str]:
    """The sources of ``lesson``'s cells tagged ``define``, in notebook order."""
    path = next(NOTEBOOKS.glob(f"{lesson}*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]


def lesson_definitions(lesson: str) -> dict:
    """Execute ``lesson``'s defining cells in one fresh namespace and return it."""
    cells = defining_cells(lesson)
    if not cells:
        raise LookupError(f"{lesson}: no code cell is tagged {TAG!r}")
    namespace: dict = {"__name__": f"lesson_{lesson}"}
    for source in cells:
        exec(compile(source, f"<{lesson}>", "exec"), namespace)
    return namespace


def not_definitions(lesson: str) -> list[str]:
    """Statements of ``lesson``'s defining cells other than imports, definitions and docstrings: a
    defining cell must hold none, so executing the cells runs no lesson code."""
    allowed = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    found = []
    for source in defining_cells(lesson):
        for node in ast.parse(source).body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            if not (isinstance(node, allowed) or docstring):
                found.append(ast.unparse(node)[:80])
    return found


def not_the_lessons_own(namespace: dict, lesson: str, names) -> list[str]:
    """Which of ``names`` are missing from ``lesson``'s namespace or were defined elsewhere (the
    package's twin imported under the same name would pass every comparison)."""
    return [name for name in names
            if not callable(namespace.get(name)) or namespace[name].__module__ != f"lesson_{lesson}"]


def random_sequences(n: int, vocab: int, max_len: int, seed: int = 0) -> list[list[int]]:
    """Random token lists from a small vocabulary, so that n-grams and suffixes repeat often."""
    import random

    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randrange(1, max_len))] for _ in range(n)]
