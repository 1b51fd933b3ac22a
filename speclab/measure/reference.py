"""Reference runs: what each lesson measured on a known machine, printed beside a learner's own run.

A reference run is the main job at a profile's defaults, kept under ``data/reference/<profile>/``:

- ``results/<lesson>.json``: the numbers the lesson saved (``report.save_results``);
- ``notebooks/<lesson>.ipynb``: the executed lesson with its figures, opening with a cell that
  names the hardware, the versions, the date and the lesson's wall time;
- ``run.json``: the same facts per lesson, so that one lesson can be re-recorded alone.

``speclab run --record`` (``make reference PROFILE=...``) makes one. A lesson prints its own numbers
beside the stored ones with ``compare``, so the figures a learner reads come from data, never from
typed prose. Timings move between runs and machines; the table says where each column ran.
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

from ..errors import SpeclabError
from ..files import NOTEBOOKS, REPO_ROOT, write_atomic, write_json
from ..models import random_weights

REFERENCE_DIR = REPO_ROOT / "data" / "reference"
SHOWN = ("cpu-tiny", "gpu-tiny")  # the columns beside "your run": the small model on a CPU and on a GPU
RECORDING_ENV = "SPECLAB_RECORDING"  # set to a profile while its reference is being recorded
OPENING_TAG = "reference-run"  # the cell tag of a recorded notebook's opening cell


def folder(profile: str) -> Path:
    return REFERENCE_DIR / profile


def run_info(profile: str) -> dict:
    """``run.json`` of a profile's reference: {"profile", "lessons": {lesson: {seconds, date, hardware,
    environment}}}."""
    path = folder(profile) / "run.json"
    return json.loads(path.read_text()) if path.is_file() else {"profile": profile, "lessons": {}}


def results(lesson: str, profile: str) -> dict | None:
    """A lesson's stored results on a profile's reference run, or None where none is stored."""
    path = folder(profile) / "results" / f"{lesson}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def where(lesson: str, profile: str) -> str:
    """One line: the hardware, vLLM and date a stored lesson result comes from (a lesson's second results
    file, such as ``10_dynamic_k``, comes from the run of the lesson it shares its number with)."""
    lessons = run_info(profile)["lessons"]
    entry = lessons.get(lesson) or next((e for name, e in lessons.items() if name[:3] == lesson[:3]), None)
    if not entry:
        return f"{profile}: no stored reference"
    env = entry.get("environment", {})
    return (f"{profile}: {entry.get('hardware', '?')}, vLLM {env.get('vllm', '?')} ({env.get('vllm_build', '?')}), "
            f"{str(entry.get('date', '?'))[:10]}")


def recorded(lesson: str, profile: str = "gpu-tiny") -> dict:
    """A lesson's stored results with where they ran: what a lesson shows for a part its device cannot run."""
    found = results(lesson, profile)
    if found is None:
        raise SpeclabError(f"no stored {profile} results for {lesson!r} in {folder(profile)}: "
                           f"record them with `speclab run --record --profile {profile} --only {lesson[:2]}`")
    entry = run_info(profile)["lessons"].get(lesson, {})
    return {**found, "recorded_on": entry.get("hardware", "?"),
            "recorded_with": f"vLLM {entry.get('environment', {}).get('vllm', '?')}"}


def value(data: dict | None, key):
    """``key`` read from a results dict: a dotted path ("per_position_rates.0", "by_category.code.speedup")
    or a function of the dict; None where anything along the way is missing."""
    if data is None:
        return None
    if callable(key):
        try:
            return key(data)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
            return None
    for part in str(key).split("."):
        if isinstance(data, list) and part.lstrip("-").isdigit() and -len(data) <= int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return None
    return data


def _cell(v, fmt: str) -> str:
    if v is None:
        return "-"
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def columns() -> list[str]:
    """The stored references shown beside a run: every one in SHOWN but the one being recorded right now."""
    recording = os.environ.get(RECORDING_ENV)
    return [p for p in SHOWN if p != recording]


def table(lesson: str, yours: dict | None, rows: list[tuple], label: str = "your run") -> str:
    """A text table: one row per (name, key[, format]), a column for ``yours`` and one per stored reference."""
    refs = columns()
    stored = {p: results(lesson, p) for p in refs}
    head = [label, *(f"{p} reference" for p in refs)]
    body = []
    for row in rows:
        name, key, fmt = (*row, "{:.3g}")[:3]
        body.append([name, _cell(value(yours, key), fmt), *(_cell(value(stored[p], key), fmt) for p in refs)])
    widths = [max(len(r[i]) for r in [["", *head], *body]) for i in range(len(head) + 1)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [["", *head], *body]]
    notes = [f"  {where(lesson, p)}" for p in refs]
    return "\n".join([*lines, "references at each lesson's default parameters:", *notes])


def compare(lesson: str, yours: dict | None, rows: list[tuple]) -> None:
    """Print ``table``: the learner's numbers beside the stored CPU and GPU references (while a reference
    is being recorded, its own run's numbers beside the other reference)."""
    recording = os.environ.get(RECORDING_ENV)
    print(table(lesson, yours, rows, label=f"this run ({recording} reference)" if recording else "your run"))


# ---- recording a reference run -------------------------------------------------------------------

FIGURE_COLOURS = 96  # palette PNGs: a line plot needs few colours, and a third of the bytes


def compact_png(data: bytes) -> bytes:
    """A PNG re-encoded with a small palette (smaller files, the same picture); the original if not smaller."""
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB").quantize(colors=FIGURE_COLOURS)
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return buf.getvalue() if buf.tell() < len(data) else data


def _compact_outputs(nb: dict) -> None:
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                raw = base64.b64decode("".join(png) if isinstance(png, list) else png)
                out["data"]["image/png"] = base64.b64encode(compact_png(raw)).decode()


def opening_cell(profile: str, entry: dict) -> dict:
    """The markdown cell a recorded notebook opens with: where, with what and how long it ran."""
    env = entry.get("environment", {})
    text = (f"> **Reference run**, profile `{profile}` at this lesson's default parameters: "
            f"{entry.get('hardware', '?')}; vLLM {env.get('vllm', '?')} ({env.get('vllm_build', '?')} build), "
            f"torch {env.get('torch', '?')}, transformers {env.get('transformers', '?')}, "
            f"Python {env.get('python', '?')}; "
            f"{str(entry.get('date', '?'))[:10]}; the lesson took {entry.get('seconds', 0):.0f} s. "
            f"Regenerate with `speclab run --record --profile {profile}`.")
    return {"cell_type": "markdown", "metadata": {"tags": [OPENING_TAG]}, "source": text}


def _lesson_cells(nb: dict) -> list[dict]:
    """A notebook's own cells: without papermill's injected parameters and the reference-run opening."""
    skip = {"injected-parameters", OPENING_TAG}
    return [c for c in nb["cells"] if not skip & set(c.get("metadata", {}).get("tags", []))]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def stale(profile: str, notebook_dir: Path) -> dict[str, str]:
    """{lesson: what differs} for the stored notebooks that no longer match their lesson's cells.

    Code that changed means the reference must be recorded again; prose that changed is mended by
    ``sync_prose`` (markdown is not a measurement)."""
    found = {}
    for stored in sorted((folder(profile) / "notebooks").glob("*.ipynb")):
        lesson = Path(notebook_dir) / stored.name
        if not lesson.is_file():
            found[stored.stem] = "no such lesson"
            continue
        mine = _lesson_cells(json.loads(stored.read_text()))
        theirs = _lesson_cells(json.loads(lesson.read_text()))
        if [c["cell_type"] for c in mine] != [c["cell_type"] for c in theirs]:
            found[stored.stem] = "cells added or removed"
        elif any(_source(a) != _source(b) for a, b in zip(mine, theirs) if a["cell_type"] == "code"):
            found[stored.stem] = "code changed"
        elif any(_source(a) != _source(b) for a, b in zip(mine, theirs)):
            found[stored.stem] = "prose changed"
    return found


def sync_prose(profile: str, notebook_dir: Path) -> list[str]:
    """Copy each lesson's current markdown into its stored notebook where only the prose differs."""
    mended = []
    for lesson, why in stale(profile, notebook_dir).items():
        if why != "prose changed":
            continue
        path = folder(profile) / "notebooks" / f"{lesson}.ipynb"
        nb = json.loads(path.read_text())
        current = _lesson_cells(json.loads((Path(notebook_dir) / path.name).read_text()))
        for cell, now in zip(_lesson_cells(nb), current):
            if cell["cell_type"] == "markdown":
                cell["source"] = now["source"]
        write_atomic(path, json.dumps(nb, indent=1) + "\n")
        mended.append(lesson)
    return mended


def record(run_dir: str | Path, hardware: str) -> list[str]:
    """Store a finished main-job run folder as its profile's reference; returns the lessons stored.

    Only lessons that finished at the defaults are taken; each replaces its earlier reference, the
    others stay. A run on random weights (``<profile>-random``) keeps its results and compacted figures
    but not its notebooks: its timings are real, its text and acceptance are not worth reading cell by cell.
    Files are written whole (``files.write_atomic``), ``run.json`` last."""
    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    if not summary_path.is_file():
        raise SpeclabError(f"{run_dir} has no summary.json: record a finished `speclab run` folder")
    summary = json.loads(summary_path.read_text())
    if summary.get("parameters"):
        raise SpeclabError(f"{run_dir} ran with parameters {summary['parameters']}: a reference runs at the defaults")
    random = summary.get("weights") == "random"
    profile = random_weights.stored_name(summary["profile"], random)
    info = run_info(profile)
    stored = []
    for entry in summary["notebooks"]:
        lesson = entry["notebook"].removesuffix(".ipynb")
        book = run_dir / "notebooks" / entry["notebook"]
        if not entry["ok"] or not book.is_file():
            continue
        meta = {"seconds": entry["seconds"], "date": entry.get("finished", summary["finished"]), "hardware": hardware,
                "environment": summary["environment"]}
        if random:
            for figure in sorted((run_dir / "figures").glob(f"{lesson[:3]}*.png")):
                write_atomic(folder(profile) / "figures" / figure.name, compact_png(figure.read_bytes()))
        else:
            nb = json.loads(book.read_text())
            nb["cells"] = [c for c in nb["cells"] if OPENING_TAG not in c.get("metadata", {}).get("tags", [])]
            nb["cells"].insert(0, opening_cell(profile, meta))
            _compact_outputs(nb)
            write_atomic(folder(profile) / "notebooks" / entry["notebook"], json.dumps(nb, indent=1) + "\n")
        for saved in sorted((run_dir / "results").glob(f"{lesson[:3]}*")):  # 10_dynamic_k.json beside 10_serving...
            write_atomic(folder(profile) / "results" / saved.name, saved.read_bytes())
        info["lessons"][lesson] = meta
        stored.append(lesson)
    info["lessons"] = dict(sorted(info["lessons"].items()))
    write_json(folder(profile) / "run.json", info)
    return stored


def wall_times() -> str:
    """Each lesson's wall time in every stored reference run, and where each run was made: what a lesson
    costs on a GPU before a workshop books one."""
    profiles = sorted(p.name for p in REFERENCE_DIR.iterdir() if (p / "run.json").is_file())
    infos = {p: run_info(p)["lessons"] for p in profiles}
    lessons = sorted({lesson for info in infos.values() for lesson in info})
    width = max(len(p) for p in profiles) + 2
    lines = [f"{'lesson':28s}" + "".join(f"{p:>{width}s}" for p in profiles)]
    for lesson in lessons:
        cells = [infos[p].get(lesson, {}).get("seconds") for p in profiles]
        lines.append(f"{lesson:28s}" + "".join(f"{'-' if s is None else f'{s:.0f} s':>{width}s}" for s in cells))
    totals = [sum(entry.get("seconds") or 0 for entry in infos[p].values()) / 60 for p in profiles]
    lines.append(f"{'total':28s}" + "".join(f"{f'{minutes:.0f} min':>{width}s}" for minutes in totals))
    for p in profiles:
        where = sorted({e.get("hardware", "?") for e in infos[p].values()})
        lines.append(f"{p}: {'; '.join(where)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m speclab.measure.reference``: mend the stored notebooks' prose, list those that need recording again;
    ``--times``: print the lessons' wall times in the stored runs."""
    import sys

    if "--times" in (sys.argv[1:] if argv is None else argv):
        print(wall_times())
        return 0
    status = 0
    for profile in sorted(p.name for p in REFERENCE_DIR.iterdir() if (p / "notebooks").is_dir()):
        for lesson in sync_prose(profile, NOTEBOOKS):
            print(f"{profile}: {lesson}: prose brought in step with the lesson")
        for lesson, why in stale(profile, NOTEBOOKS).items():
            print(f"{profile}: {lesson}: {why}: record it again "
                  f"(speclab run --record --profile {profile} --only {lesson[:2]})")
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
