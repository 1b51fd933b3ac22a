"""Where speclab's files live, and writing them so that nothing is lost.

- Places: the repository (``REPO_ROOT``, the lessons in ``NOTEBOOKS``) and speclab's cache
  (``cache_dir``; ``SPECLAB_CACHE`` moves it), where converted models, built drafters and vLLM's
  sockets go.
- Checked before any work: a benchmark that runs for minutes and then cannot save its record has
  lost the minutes, so every output a command names (``--json``, ``--out``, ``--log``,
  ``SPECLAB_CACHE``) is checked first (``check_file``, ``check_folder``), in one line that says what
  to do. A check leaves nothing behind: it proves a folder takes writes by creating and removing an
  empty file there (permissions alone do not tell, e.g. on /proc or a read-only mount).
- Written whole or not at all: every file (results JSON/CSV, figures, summaries) goes through
  ``write_atomic``, whose bytes land in a temporary file beside the target and are renamed into
  place, so a crash leaves the old file or none, never half of a new one; a folder (a converted
  model, a drafter) is built in ``atomic_folder`` and counts as done only with its ``.complete``
  marker.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import SpeclabError

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO_ROOT / "notebooks"  # the lessons
COMPLETE = ".complete"


def _named(what: str, path) -> str:
    """'--json out.json' for a flag, 'SPECLAB_CACHE=/x' for an environment variable."""
    return f"{what}={path}" if what.isupper() else f"{what} {path}"


def _writable_folder(folder: Path) -> bool:
    if not folder.is_dir():
        return False
    try:
        fd, probe = tempfile.mkstemp(prefix=".speclab-probe-", dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_file(what: str, path: str | Path, suffix: str | None = None) -> Path:
    """``path`` can be written as a file: not empty, not a folder, in a folder that exists and takes writes.

    ``suffix``: the only extension the file may have (``--json`` writes a ``.csv`` beside it, so a
    ``.csv`` there would be overwritten by its own table)."""
    if not str(path).strip():
        raise SpeclabError(f"{what} is empty: name a file, e.g. {what} result{suffix or '.txt'}")
    target = Path(path).expanduser()
    if target.is_dir():
        example = target / f"result{suffix or '.txt'}"
        raise SpeclabError(f"{_named(what, path)}: that is a folder; name a file in it, e.g. {example}")
    if suffix and target.suffix.lower() != suffix:
        raise SpeclabError(f"{_named(what, path)}: name a {suffix} file (e.g. {target.with_suffix(suffix)}); "
                           f"the record is {suffix[1:].upper()}")
    folder = target.resolve().parent
    if not folder.is_dir():
        raise SpeclabError(f"{_named(what, path)}: folder {folder} does not exist (create it first)")
    if not _writable_folder(folder) or (target.exists() and not os.access(target, os.W_OK)):
        raise SpeclabError(f"{_named(what, path)}: cannot write in that folder; choose one you own")
    return target


def check_folder(what: str, path: str | Path) -> Path:
    """``path`` is a folder that exists and takes writes, or one that can be made in a folder that does."""
    if not str(path).strip():
        raise SpeclabError(f"{what} is empty: name a folder")
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise SpeclabError(f"{_named(what, path)}: that is a file, not a folder; name a folder")
    existing = _nearest_existing(target.resolve())
    if not existing.is_dir():
        raise SpeclabError(f"{_named(what, path)}: {existing} is a file, so no folder can be made there")
    if not _writable_folder(existing):
        raise SpeclabError(f"{_named(what, path)}: cannot write in {existing}; choose a folder you own")
    return target


_checked_caches: set[str] = set()


def check_cache_setting() -> None:
    """``SPECLAB_CACHE``, where set, names a folder speclab can write: one line if not. Checked once per
    value, since every engine, log and model lookup asks for the cache."""
    value = os.environ.get("SPECLAB_CACHE")
    if value is not None and value not in _checked_caches:
        check_folder("SPECLAB_CACHE", value)
        _checked_caches.add(value)


def cache_dir() -> Path:
    """Where speclab keeps converted models and built drafters (``SPECLAB_CACHE`` moves it)."""
    check_cache_setting()
    root = Path(os.environ.get("SPECLAB_CACHE", Path.home() / ".cache" / "speclab"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def is_complete(folder: Path) -> bool:
    return (Path(folder) / COMPLETE).is_file()


@contextmanager
def atomic_folder(final: Path):
    """Yield a scratch folder beside ``final``; on success rename it into place in one step.

    On any error the scratch folder is removed and ``final`` is left as it was.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    scratch.chmod(0o755)  # mkdtemp makes it private; a model cache is for every user of the machine
    try:
        yield scratch
        (scratch / COMPLETE).write_text(json.dumps({"name": final.name}) + "\n")
        if final.exists():  # an incomplete leftover from an interrupted run
            shutil.rmtree(final)
        os.replace(scratch, final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


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
