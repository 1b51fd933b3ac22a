"""ruff at the line length of pyproject.toml over the package, the tests and the notebooks."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff_command() -> list[str] | None:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    beside = Path(sys.executable).with_name("ruff")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("ruff")
    return [found] if found else None


def test_ruff_is_clean():
    command = ruff_command()
    if command is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    proc = subprocess.run([*command, "check", "speclab", "tests", "notebooks"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff check failed:\n{proc.stdout}{proc.stderr}"
