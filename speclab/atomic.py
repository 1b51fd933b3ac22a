"""Files written whole or not at all.

Every file speclab writes (results JSON/CSV, figures, summaries) goes through ``write_atomic``: the
bytes land in a temporary file beside the target and are renamed into place, so a crash leaves
the old file or none, never half of a new one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path


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
