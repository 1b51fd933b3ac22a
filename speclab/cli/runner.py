"""The main job: execute the notebook series headlessly and leave a run folder behind.

``run_series`` executes every ``notebooks/NN_*.ipynb`` in order with papermill, passing the
profile and the run folder as parameters. Each executed notebook is written under a temporary
name and renamed when complete; a failed one is kept as ``NN_x.failed.ipynb`` for reading.
The figures and per-notebook results the lessons save land in the same folder, vLLM's start-up
output in ``logs/NN_x.log`` (``speclab.vllm_layer.logs``), and the run ends with ``summary.json`` and a short
``report.md``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

from ..errors import SpeclabError
from ..files import NOTEBOOKS, REPO_ROOT, write_atomic, write_json
from ..measure import reference
from ..models import random_weights
from ..vllm_layer import logs
from ..vllm_layer.engine import IN_PROCESS_ENV, environment
from ..vllm_layer.envcheck import device_name, versions


def series(notebook_dir: Path = NOTEBOOKS, only: list[str] | None = None) -> list[Path]:
    """The numbered notebooks, in order; ``only`` keeps those whose name starts with a given prefix."""
    books = sorted(p for p in Path(notebook_dir).glob("[0-9][0-9]_*.ipynb"))
    if only:
        books = [b for b in books if any(b.name.startswith(o) for o in only)]
    return books


def execute(notebook: Path, out_dir: Path, parameters: dict, kernel: str = "python3",
            timeout: int | None = None, env: dict | None = None,
            stderr_log: Path | None = None) -> tuple[bool, float, str | None]:
    """Run one notebook with papermill into ``out_dir``; returns (ok, seconds, error line).

    ``env``: variables the notebook's kernel gets on top of ours (it inherits our environment).
    ``stderr_log``: where the kernel's own stderr goes (its start-up warnings), instead of the console."""
    import papermill as pm

    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / notebook.name
    partial = out_dir / f".{notebook.stem}.partial.ipynb"
    started = time.perf_counter()
    try:
        with environment(env or {}), logs.to_log(stderr_log, stdout=False) if stderr_log else contextlib.nullcontext():
            pm.execute_notebook(str(notebook), str(partial), parameters=parameters, kernel_name=kernel,
                                cwd=str(notebook.parent), progress_bar=False, execution_timeout=timeout)
    except Exception as err:  # papermill's error names the failing cell; keep the notebook to read
        if partial.exists():
            partial.replace(out_dir / f"{notebook.stem}.failed.ipynb")
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[-1]
        return False, time.perf_counter() - started, first_line[:300]
    except BaseException:  # Ctrl-C: a half-written notebook is no record; leave none behind
        partial.unlink(missing_ok=True)
        raise
    partial.replace(final)
    return True, time.perf_counter() - started, None


def expected_seconds(profile: str, runs_dir: Path | None = None) -> dict[str, float]:
    """How long each lesson should take: the newest finished run of this profile on this machine
    (``runs/*/summary.json``), else the profile's reference run (``data/reference/<profile>/run.json``);
    {} if neither."""
    runs_dir = runs_dir or REPO_ROOT / "runs"
    for summary in sorted(runs_dir.glob("*/summary.json"), reverse=True):
        try:
            done = json.loads(summary.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if done.get("profile") == profile and not done.get("parameters"):  # a run at the defaults
            return {e["notebook"].removesuffix(".ipynb"): e["seconds"]
                    for e in done.get("notebooks", []) if e.get("ok")}
    try:
        lessons = reference.run_info(profile)["lessons"]
    except (OSError, json.JSONDecodeError):
        return {}
    return {lesson: entry["seconds"] for lesson, entry in lessons.items() if entry.get("seconds")}


PACE_PRIOR_S = 120.0  # the pace counts as if this much more had gone at the reference times


def time_left(books: list[Path], done: int, elapsed: float, expected: dict[str, float]) -> float | None:
    """Seconds the remaining lessons should take, scaled by how this run compares so far; None without data.

    The pace is (elapsed + PACE_PRIOR_S) / (expected so far + PACE_PRIOR_S): a first short lesson
    that ran twice as long (a cold start) moves the estimate a little, an hour of lessons moves it
    fully. A lesson with no expected time counts as the median of those that have one."""
    if not expected:
        return None
    typical = statistics.median(expected.values())
    guess = [expected.get(b.stem, typical) for b in books]
    so_far = sum(guess[:done])
    pace = (elapsed + PACE_PRIOR_S) / (so_far + PACE_PRIOR_S) if done else 1.0
    return pace * sum(guess[done:])


def _progress(i: int, books: list[Path], elapsed: float, expected: dict[str, float]) -> str:
    left = time_left(books, i - 1, elapsed, expected)
    about = f", about {max(1, round(left / 60))} min left" if left is not None else ""
    return f"[{i}/{len(books)}] {books[i - 1].name} ... (elapsed {elapsed:.0f} s{about})"


def kernel_env(vllm_log: Path) -> dict[str, str]:
    """What a lesson's kernel gets on top of our environment: its log file, this checkout on the
    import path (the kernel runs in notebooks/, so a checkout that was never pip-installed still
    imports speclab, as on a GPU machine where the tree was copied in), and CPU engines inside the
    kernel (``engine.IN_PROCESS_ENV``; faster to start and to run, see there) unless the caller chose."""
    path = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {logs.ENV: str(vllm_log), "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)),
            IN_PROCESS_ENV: os.environ.get(IN_PROCESS_ENV, "1")}


def _results(run_dir: Path) -> dict:
    found = {}
    for path in sorted((run_dir / "results").glob("*.json")):
        try:
            found[path.stem] = json.loads(path.read_text())
        except json.JSONDecodeError:
            found[path.stem] = {"error": "unreadable results file"}
    return found


def _headline(values: dict, limit: int = 6) -> str:
    """The first few scalar numbers of a notebook's results, for the one-line report."""
    parts = []
    # the measured figures first (acceptance, speedup, throughput), then whatever else is scalar
    ranked = sorted(values.items(), key=lambda kv: not any(w in kv[0] for w in ("acceptance", "speedup", "tok")))
    for key, value in ranked:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            continue
        parts.append(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}")
        if len(parts) == limit:
            break
    return ", ".join(parts)


LOCK = ".speclab-run.pid"


def busy(run_dir: Path) -> int | None:
    """The pid of a live ``speclab run`` writing into ``run_dir``, or None."""
    try:
        pid = int((Path(run_dir) / LOCK).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def require_free(run_dir: Path) -> None:
    """Refuse, in one line, a run folder that another live ``speclab run`` is writing into."""
    other = busy(run_dir)
    if other is not None and other != os.getpid():
        raise SpeclabError(f"--out {run_dir}: another speclab run (pid {other}) is writing there; "
                           "choose another --out or wait for it")


@contextlib.contextmanager
def claimed(run_dir: Path):
    """Mark ``run_dir`` as this process's for the block, so that a second run refuses to write into it."""
    require_free(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir / LOCK
    lock.write_text(str(os.getpid()))
    try:
        yield run_dir
    finally:
        lock.unlink(missing_ok=True)


def run_series(profile: str, run_dir: Path, only: list[str] | None = None, extra: dict | None = None,
               per_notebook: dict[str, dict] | None = None, log=print, after_each=None) -> dict:
    """Execute the series; returns the summary that was written to ``run_dir/summary.json``.

    The summary is written after every lesson (``"complete": false`` until the last one), and
    ``after_each()`` is called then: a run that is stopped keeps what its finished lessons gave."""
    run_dir = Path(run_dir).resolve()
    with claimed(run_dir):
        return _run_series(profile, run_dir, only, extra, per_notebook, log, after_each)


def _run_series(profile: str, run_dir: Path, only: list[str] | None, extra: dict | None,
                per_notebook: dict[str, dict] | None, log, after_each=None) -> dict:
    books = series(only=only)
    if not books:
        raise SystemExit(f"no notebooks matched {only!r} in {NOTEBOOKS}")
    expected = expected_seconds(profile) if not extra and not per_notebook else {}  # defaults only
    started = time.perf_counter()
    entries = []
    log(f"speclab run: {len(books)} notebooks, profile {profile}, output in {run_dir}")
    for i, book in enumerate(books, 1):
        params = {"profile": profile, "output_dir": str(run_dir), **(extra or {})}
        params.update((per_notebook or {}).get(book.stem, {}))
        log(_progress(i, books, time.perf_counter() - started, expected))
        vllm_log = run_dir / "logs" / f"{book.stem}.log"
        ok, seconds, error = execute(book, run_dir / "notebooks", params, env=kernel_env(vllm_log),
                                     stderr_log=vllm_log)
        if error and vllm_log.is_file():
            error += f" (vLLM's output: {vllm_log})"
        log(f"[{i}/{len(books)}] {book.name} {'done' if ok else 'FAILED'} in {seconds:.0f} s"
            + (f": {error}" if error else ""))
        entries.append({"notebook": book.name, "ok": ok, "seconds": round(seconds, 1), "error": error,
                        "finished": _now()})
        summary = _write_summary(run_dir, profile, extra, entries, started, complete=i == len(books))
        if after_each:
            after_each()
    write_atomic(run_dir / "report.md", render_report(summary))
    return summary


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _write_summary(run_dir: Path, profile: str, extra: dict | None, entries: list[dict], started: float,
                   complete: bool) -> dict:
    summary = {
        "profile": profile, "weights": random_weights.mode(), "parameters": extra or {}, "complete": complete,
        "finished": _now(), "total_seconds": round(time.perf_counter() - started, 1), "environment": versions(),
        "notebooks": entries, "results": _results(run_dir),
        "figures": sorted(str(p.relative_to(run_dir)) for p in (run_dir / "figures").glob("*.png")),
    }
    write_json(run_dir / "summary.json", summary)
    return summary


def render_report(summary: dict) -> str:
    random_note = " with random weights (timings only)" if summary.get("weights") == "random" else ""
    lines = [f"# speclab run: profile {summary['profile']}{random_note}", "",
             f"Finished {summary['finished']} in {summary['total_seconds']:.0f} s "
             f"(vLLM {summary['environment'].get('vllm')}, torch {summary['environment'].get('torch')}).", "",
             "| notebook | status | seconds | headline |", "|---|---|---|---|"]
    for e in summary["notebooks"]:
        stem = e["notebook"].removesuffix(".ipynb")
        headline = _headline(summary["results"].get(stem, {})) if e["ok"] else (e["error"] or "")
        lines.append(f"| {e['notebook']} | {'ok' if e['ok'] else 'FAILED'} | {e['seconds']:.0f} | {headline} |")
    lines += ["", f"Figures: {len(summary['figures'])} PNG files under figures/.", ""]
    return "\n".join(lines)


def default_run_dir() -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return REPO_ROOT / "runs" / stamp


def main_job(profile: str, run_dir: Path | None, only: list[str] | None, extra: dict, record: bool = False) -> int:
    """Run the series; with ``record``, store the lessons that passed as the profile's reference run."""
    run_dir = run_dir or default_run_dir()
    stored = []
    if record:  # each lesson is stored as soon as it passed: a run stopped later keeps it
        hardware = device_name()

        def store():
            stored[:] = reference.record(run_dir, hardware)

    summary = run_series(profile, run_dir, only=only, extra=extra,
                         log=lambda m: print(m, flush=True, file=sys.stdout), after_each=store if record else None)
    failed = [e["notebook"] for e in summary["notebooks"] if not e["ok"]]
    print(f"\nexecuted notebooks: {run_dir / 'notebooks'}\nfigures: {run_dir / 'figures'}\n"
          f"summary: {run_dir / 'summary.json'}\nreport: {run_dir / 'report.md'}")
    if record:
        print(f"reference run: {len(stored)} lessons stored in "
              f"{reference.folder(random_weights.stored_name(profile))}")
    if failed:
        print(f"FAILED: {', '.join(failed)} (see the .failed.ipynb files)")
        return 1
    return 0
