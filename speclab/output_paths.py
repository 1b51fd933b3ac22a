"""Checks that a place to write to will take the write, made before any work starts.

A benchmark that runs for minutes and then cannot save its record has lost the minutes; so every
output a command names (``--json``, ``--out``, ``--log``, ``SPECLAB_CACHE``) is checked first, in
one line that says what to do. A check leaves nothing behind: it proves a folder takes writes by
creating and removing an empty file there (permissions alone do not tell, e.g. on /proc or a
read-only mount).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import SpeclabError


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
