"""environment.yml and pyproject.toml describe the same environment; the CLI is installed."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r): r for r in project["dependencies"]}
    for extra in ("cpu", "test"):
        wanted.update({_name(r): r for r in project["optional-dependencies"][extra]})
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {_name(r): r for r in pip if not r.startswith("-")}
    assert listed == wanted, "environment.yml and pyproject.toml list different packages or versions"


def test_console_command_installed():
    exe = shutil.which("speclab") or str(Path(sys.executable).parent / "speclab")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "bench" in out.stdout and "migrate" in out.stdout


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make run" in readme
    assert re.search(r"^make test$", ci, re.M)
