"""Writing results: whole or not at all.

Every file speclab writes (results JSON/CSV, figures, summaries) goes through ``write_atomic``:
the bytes land in a temporary file beside the target and are renamed into place, so a crash
leaves the old file or none, never half of a new one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from . import weights


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; results are for everyone
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, obj) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, default=_jsonable) + "\n")


def write_csv(path: str | Path, rows: list[dict]) -> Path:
    buf = io.StringIO()
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
    return write_atomic(path, buf.getvalue())


def _jsonable(obj):
    if hasattr(obj, "summary"):
        return obj.summary()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def save_figure(fig, name: str, output_dir: str | Path = ".") -> Path:
    """Save a matplotlib figure as ``<output_dir>/figures/<name>.png``, atomically.

    A figure measured on random weights says so in its corner (``speclab.weights``)."""
    if weights.label():
        fig.text(0.995, 0.005, "random weights: timings only", ha="right", va="bottom", fontsize=7, color="tab:red")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return write_atomic(Path(output_dir) / "figures" / f"{name}.png", buf.getvalue())


def save_results(name: str, data: dict, output_dir: str | Path = ".") -> Path:
    """Save a notebook's headline numbers as ``<output_dir>/results/<name>.json`` for the run summary.

    Results measured on random weights carry ``"weights": speclab.weights.LABEL``."""
    if weights.label():
        data = {"weights": weights.label(), **data}
    return write_json(Path(output_dir) / "results" / f"{name}.json", data)
