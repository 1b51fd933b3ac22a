"""Where vLLM's ZeroMQ sockets go, so that closed engines leave no files in /tmp.

vLLM names the sockets between an engine's processes ``$VLLM_RPC_BASE_PATH/<uuid>`` (default: the
system's temporary folder) and does not remove them: every engine start left a few socket files in
/tmp. Each speclab process gets its own folder under the cache instead. An engine or a server calls
``acquire`` before it starts and ``release`` once it stopped; when the last one is gone the folder is
emptied, at exit it goes, and the next process removes the folders of processes that died without
cleaning up.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from ..files import cache_dir

ENV = "VLLM_RPC_BASE_PATH"
# A Unix socket's path is at most 107 bytes; a socket is named by a 36-character uuid.
_LONGEST_FOLDER = 60
_open = 0


def _root() -> Path:
    root = cache_dir() / "ipc"
    return root if len(str(root)) < _LONGEST_FOLDER - 8 else Path(tempfile.gettempdir()) / "speclab-ipc"


def folder() -> Path:
    """This process's socket folder (made on first use; dead processes' folders removed)."""
    root = _root()
    mine = root / str(os.getpid())
    if not mine.is_dir():
        import psutil

        root.mkdir(parents=True, exist_ok=True)
        for other in root.iterdir():
            if other.name.isdigit() and not psutil.pid_exists(int(other.name)):
                shutil.rmtree(other, ignore_errors=True)
        mine.mkdir(exist_ok=True)
        atexit.register(shutil.rmtree, mine, True)
    return mine


def _empty(path: Path) -> None:
    for entry in path.iterdir() if path.is_dir() else ():
        with contextlib.suppress(OSError):
            entry.unlink()


def acquire() -> bool:
    """Before an engine or a server starts: set ``VLLM_RPC_BASE_PATH`` to this process's folder.

    Returns False (and changes nothing) where the user chose a folder of their own."""
    global _open
    mine = str(folder())
    if os.environ.get(ENV, mine) != mine:
        return False
    os.environ[ENV] = mine  # stays set: vLLM may cache its environment reads for the process
    _open += 1
    return True


def release() -> None:
    """After an engine or a server stopped: when none is left, remove the sockets they left."""
    global _open
    _open = max(0, _open - 1)
    if _open == 0:
        _empty(folder())
