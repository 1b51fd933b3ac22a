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

from .models import cache_dir

ENV = "SPECLAB_LOG"
TAIL_LINES = 12


def log_path() -> Path:
    """Where vLLM's output goes: ``SPECLAB_LOG``, or one file per process in speclab's cache."""
    path = os.environ.get(ENV)
    return Path(path) if path else cache_dir() / "logs" / f"vllm-{os.getpid()}.log"


@contextlib.contextmanager
def to_log(path: str | Path | None = None):
    """Send this process's output, and that of every process started inside, to ``path``."""
    path = Path(path or log_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "a", buffering=1, errors="replace") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield path
        except Exception as err:
            log.flush()
            err.add_note(f"vLLM's output is in {path}; its last error line: {headline(log_tail(path))}")
            raise
        finally:
            log.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


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


def headline(lines: list[str]) -> str:
    """The line that best says what went wrong: the last one that names an error."""
    for line in reversed(lines):
        if any(word in line for word in ("Error", "error:", "Exception", "Value error")):
            return line.strip()
    return lines[-1].strip() if lines else "no output"
