"""environment.yml and pyproject.toml describe the same environment; the CLI is installed."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
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


WINGS = {d.name for d in (ROOT / "speclab").iterdir() if (d / "__init__.py").is_file()}  # measure/, train/...


def _module_name(path: Path) -> str:
    """speclab/measure/bench.py -> "measure.bench"; speclab/errors.py -> "errors"; a wing's __init__ -> "measure"."""
    parts = list(path.relative_to(ROOT / "speclab").with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The speclab modules a module imports, at the top or inside a function, by module name."""
    import ast

    package = _module_name(path).split(".")[:-1] if path.name != "__init__.py" else _module_name(path).split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        for alias in node.names:  # `from ..measure import bench` names a module; `from .bench import x` does not
            as_module = ".".join(base + [alias.name])
            found.add(as_module if as_module in MODULES else ".".join(base))
    return {m for m in found if m}


MODULES = {_module_name(p): p for p in (ROOT / "speclab").rglob("*.py")
           if p.stem != "__main__" and p != ROOT / "speclab" / "__init__.py"}


def _wing(module: str) -> str:
    return module.split(".")[0] if module.split(".")[0] in WINGS else "speclab"


def _no_cycle(graph: dict[str, set[str]]) -> None:
    done, on_path = set(), []

    def visit(name):  # depth-first: a node met again on the current path closes a cycle
        assert name not in on_path, "import cycle: " + " -> ".join(on_path[on_path.index(name):] + [name])
        if name in done:
            return
        on_path.append(name)
        for dep in sorted(graph.get(name, ())):
            visit(dep)
        on_path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_the_package_is_a_few_wings_each_with_its_responsibility():
    top = sorted(p.name for p in (ROOT / "speclab").iterdir() if p.name != "__pycache__")
    assert len(top) <= 11, top
    for wing in WINGS:
        doc = ast_docstring(ROOT / "speclab" / wing / "__init__.py")
        assert doc and len(doc.split()) >= 12, f"{wing}/__init__.py says what the wing is for"


def ast_docstring(path: Path) -> str | None:
    import ast

    return ast.get_docstring(ast.parse(path.read_text()))


def test_no_import_cycles_between_modules_or_wings_and_every_module_in_the_readme_map():
    graph = {name: _imports(path) - {name} for name, path in MODULES.items()}
    unknown = {m for deps in graph.values() for m in deps} - set(MODULES)
    assert not unknown, f"imports of modules that do not exist: {unknown}"
    _no_cycle(graph)
    # wing by wing: the README's order of wings is an order of imports (a wing uses only those above it)
    readme = (ROOT / "README.md").read_text()
    order = re.findall(r"^\| `([a-z_]+)/` \| ", readme, re.M)
    assert order[0] == "speclab" and set(order[1:]) == WINGS, order
    rank = {w: i for i, w in enumerate(order)}
    for name, deps in graph.items():
        for dep in deps:
            assert rank[_wing(dep)] <= rank[_wing(name)], f"{name} imports {dep}, a wing below its own"
    # the module map: a row per module under its wing's row
    mapped, wing = set(), None
    for row in re.findall(r"^\| (.+?) \| .*\|$", readme[readme.index("The modules, wing by wing"):], re.M):
        header = re.fullmatch(r"\*\*`([a-z_]+)/`\*\*", row)
        if header:
            wing = header.group(1)
            continue
        for m in re.findall(r"`([a-z_]+)`", row):
            mapped.add(m if wing == "speclab" else f"{wing}.{m}")
    assert set(MODULES) - WINGS - mapped == set(), "modules missing from the README's module map"


# Where a profile's name becomes a Profile: once on each path, where the name arrives (a command, a
# lesson's parameter check, a driver's command line). Everything past the edge takes the Profile.
PROFILE_EDGES = {
    "speclab/cli/commands.py": {"cmd_bench", "cmd_run", "cmd_serve"},
    "speclab/cli/parameters.py": {"check_lesson"},
    "speclab/measure/cpu_speed.py": {"main"},
    "speclab/measure/step_time.py": {"main"},
    "speclab/train/speculators_trainer.py": {"<module>"},  # its __main__ block
}


def _lookups(path: Path) -> dict[str, int]:
    """{function (or <module>): how many get_profile calls it makes} for one source file."""
    import ast

    tree, found = ast.parse(path.read_text()), {}

    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and owner == "<module>" \
                else owner
            if isinstance(child, ast.Call) and getattr(child.func, "id", getattr(child.func, "attr", None)) \
                    == "get_profile":
                found[inner] = found.get(inner, 0) + 1
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_a_profile_is_looked_up_once_at_the_edge_and_passed_on():
    from speclab.models.profiles import PROFILES, get_profile

    found = {str(p.relative_to(ROOT)): _lookups(p) for p in sorted((ROOT / "speclab").rglob("*.py"))
             if p.name != "profiles.py"}
    found = {path: calls for path, calls in found.items() if calls}
    assert {path: set(calls) for path, calls in found.items()} == PROFILE_EDGES
    assert all(n == 1 for calls in found.values() for n in calls.values()), found  # once on each path
    with pytest.raises(TypeError, match="already a Profile"):  # a second lookup of a Profile is a mistake
        get_profile(PROFILES["cpu-tiny"])
    for book in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):  # a lesson takes the one its check returns
        code = "".join("".join(c["source"]) for c in json.loads(book.read_text())["cells"] if c["cell_type"] == "code")
        assert "get_profile(profile)" not in code and f'prof = parameters.check_lesson(globals(), "{book.name[:2]}")' \
            in code, book.name
