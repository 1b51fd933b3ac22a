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


PACKAGES = {d.name for d in (ROOT / "speclab").iterdir() if (d / "__init__.py").is_file()}  # e.g. train/


def _map_name(parts: list[str]) -> str:
    """speclab.train.loop.x -> "train.loop"; speclab.bench -> "bench"."""
    return ".".join(parts[:2]) if parts[0] in PACKAGES and len(parts) > 1 else parts[0]


def _relative_imports(path: Path, package: str = "") -> set[str]:
    """The speclab modules a module imports, at the top or inside a function. ``package``: the
    subpackage a module belongs to ("train" for speclab/train/), where ``.x`` means ``train.x``."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = [package] if package and node.level == 1 else []
        if node.module:
            found.add(_map_name(base + node.module.split(".")))
        else:
            found |= {_map_name(base + [a.name]) for a in node.names}
    return found


def speclab_modules() -> dict[str, tuple[Path, str]]:
    """Every module of speclab by its map name (``bench``, ``train``, ``train.loop``...), with its package."""
    modules = {p.stem: (p, "") for p in (ROOT / "speclab").glob("*.py") if p.stem not in ("__init__", "__main__")}
    for name in PACKAGES:
        modules[name] = (ROOT / "speclab" / name / "__init__.py", name)
        modules.update({f"{name}.{p.stem}": (p, name) for p in (ROOT / "speclab" / name).glob("*.py")
                        if p.stem not in ("__init__", "__main__")})
    return modules


def test_no_import_cycles_and_every_module_in_the_readme_map():
    modules = speclab_modules()
    graph = {name: _relative_imports(path, package) & set(modules) for name, (path, package) in modules.items()}
    done, on_path = set(), []

    def visit(name):  # depth-first: a module met again on the current path closes a cycle
        assert name not in on_path, "import cycle: " + " -> ".join(on_path[on_path.index(name):] + [name])
        if name in done:
            return
        on_path.append(name)
        for dep in sorted(graph[name]):
            visit(dep)
        on_path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)
    readme = (ROOT / "README.md").read_text()
    mapped = {m for row in re.findall(r"^\| (`[a-z_.]+`(?:, `[a-z_.]+`)*) \|", readme, re.M)
              for m in re.findall(r"`([a-z_.]+)`", row)}
    assert set(modules) - mapped == set(), "modules missing from the README's module map"
