"""vLLM's start-up output goes to a log file, not into the lesson.

Importing vLLM and starting an engine print dozens of lines (Triton, NUMA binding, c10d, deprecation
warnings, weight-loading progress bars), from this process and from the engine's own processes, which
inherit our stdout and stderr. ``to_log`` points both file descriptors (and Python's ``sys.stdout`` /
``sys.stderr``) at a log file while that happens: an engine process started inside keeps writing there
for as long as it lives. ``SPECLAB_LOG`` names the file (the main job sets one per lesson); otherwise it
is ``<cache>/logs/vllm-<pid>.log``. An error keeps its message and gains a note: the log's last error
line and its path.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TextIO

from ..files import cache_dir

ENV = "SPECLAB_LOG"
TAIL_LINES = 12
LOG_NOTE = "vLLM's output is in"  # how an error that passed through ``to_log`` names the log


def log_path() -> Path:
    """Where vLLM's output goes: ``SPECLAB_LOG``, or one file per process in speclab's cache."""
    path = os.environ.get(ENV)
    return Path(path) if path else cache_dir() / "logs" / f"vllm-{os.getpid()}.log"


@contextlib.contextmanager
def to_log(path: str | Path | None = None, stdout: bool = True):
    """Send this process's output, and that of every process started inside, to ``path``.

    ``stdout=False`` sends only stderr (the main job keeps its progress lines on stdout)."""
    path = Path(path or log_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    fds = (1, 2) if stdout else (2,)
    saved = [os.dup(fd) for fd in fds]
    log = _log_file(path)
    for fd in fds:
        os.dup2(log.fileno(), fd)
    try:
        with contextlib.redirect_stdout(log) if stdout else contextlib.nullcontext(), contextlib.redirect_stderr(log):
            yield path
    except Exception as err:
        log.flush()
        if not any(note.startswith(LOG_NOTE) for note in getattr(err, "__notes__", ())):  # an inner log named it
            found = error_line(log_tail(path))
            err.add_note(f"{LOG_NOTE} {path}" + (f"; its last error line: {found}" if found else ""))
        raise
    finally:
        log.flush()
        for fd, copy in zip(fds, saved):
            os.dup2(copy, fd)
            os.close(copy)


_OPEN: dict[Path, TextIO] = {}


def _log_file(path: Path) -> TextIO:
    """The log file, opened once per process and never closed.

    vLLM's logging handler takes ``sys.stdout`` as it is when vLLM is imported, which inside ``to_log``
    is this file. Lines it logs later (an engine's shutdown logs some) must still land here; a closed
    file would turn each into a "Logging error" traceback in the lesson."""
    key = path.resolve()
    if key not in _OPEN or _OPEN[key].closed:
        _OPEN[key] = open(path, "a", buffering=1, errors="replace")  # noqa: SIM115 (kept open on purpose)
    return _OPEN[key]


def import_vllm():
    """``import vllm`` with its import-time lines sent to the log (a lesson's first vLLM import prints them)."""
    if "vllm.entrypoints.llm" not in sys.modules:  # `import vllm` alone is lazy: LLM pulls in the rest
        with to_log():
            import vllm

            vllm.LLM, vllm.SamplingParams  # noqa: B018
    return sys.modules["vllm"]


def log_tail(path: str | Path, lines: int = TAIL_LINES) -> list[str]:
    """The last non-empty lines of a log file (progress bars, blank lines and traceback frames dropped)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    kept, after_frame = [], False
    for line in text.replace("\r", "\n").splitlines():
        bare = line.strip()
        if bare.startswith('File "'):  # a traceback frame and its source line say little to a user
            after_frame = True
            continue
        if after_frame or not bare or set(bare) <= set("^~ "):
            after_frame = False
            continue
        kept.append(line.rstrip())
    return kept[-lines:]


def error_line(lines: list[str]) -> str | None:
    """The last line that names an error, or None: a warning that merely came last (vLLM's CPU build ends
    many a log with "Triton is installed, but doesn't include CPU backend") must not pass for the cause."""
    for line in reversed(lines):
        if any(word in line for word in ("Error", "error:", "Exception", "Value error")):
            return line.strip()
    return None


def headline(lines: list[str]) -> str:
    """The line that best says what went wrong: the last one that names an error, else the last line."""
    return error_line(lines) or (lines[-1].strip() if lines else "no output")
