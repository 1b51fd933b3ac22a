"""An engine start that one Ctrl-C ends, and that notices when the engine's process died.

While ``vllm.LLM()`` starts a multiprocess engine, the main thread waits for the engine's ready
message in a C-level poll (up to ``VLLM_ENGINE_READY_TIMEOUT_S``, 10 minutes). A Ctrl-C that the
kernel delivers to another of the process's threads does not interrupt that poll, and an engine
process that died (of that same Ctrl-C, or a crash) never answers: the command hung for minutes.

``watched`` runs a small thread beside the start. Python's wakeup fd tells it, from whichever
thread got the signal, that SIGINT arrived; if the main thread has not reacted within a moment,
the thread re-sends SIGINT to the main thread itself, whose poll then returns. A child process of
the engine that exits during the start is reported the same way, and ``watched`` turns that
interrupt into an error naming the exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from ..errors import SpeclabError

POLL_S = 0.2
GRACE_S = 1.0  # let the main thread raise KeyboardInterrupt itself before re-sending it


class EngineDied(SpeclabError):
    """An engine's process exited while the engine was starting."""


def _engine_processes(before: set[int], seen: dict) -> list:
    """Track the engine's processes (vLLM titles them VLLM::EngineCore, ...); return those that died.

    Only those: a start also runs short helpers (compile workers) that exit as they should."""
    import psutil

    for p in psutil.Process().children(recursive=True):
        if p.pid not in before and p.pid not in seen:
            with contextlib.suppress(psutil.Error):
                if any(w in " ".join(p.cmdline()) + p.name() for w in ("VLLM", "EngineCore")):
                    seen[p.pid] = p
    dead = []
    for p in seen.values():
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                dead.append(p)
        except psutil.NoSuchProcess:
            dead.append(p)
        except psutil.Error:
            continue
    return dead


@contextlib.contextmanager
def watched(before: set[int], what: str = "vLLM's engine"):
    """Guard a start: SIGINT always reaches the main thread, and a dead child process ends the wait.

    ``before``: pids of this process's children before the start (they are not the engine's)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    main = threading.get_ident()
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    try:
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter's main thread
        os.close(read_end)
        os.close(write_end)
        yield
        return
    done = threading.Event()
    died: list = []
    signalled = threading.Event()
    seen: dict = {}

    def watch() -> None:
        interrupted_at = None
        while not done.wait(POLL_S):
            with contextlib.suppress(BlockingIOError):
                data = os.read(read_end, 512)
                if previous >= 0:  # an event loop's own wakeup fd still hears of every signal
                    with contextlib.suppress(OSError):
                        os.write(previous, data)
                if signal.SIGINT in data and interrupted_at is None:
                    signalled.set()
                    interrupted_at = time.monotonic()
            if not died:
                died.extend(_engine_processes(before, seen))
                if died and interrupted_at is None:
                    interrupted_at = time.monotonic() - GRACE_S
            if interrupted_at is not None and time.monotonic() - interrupted_at >= GRACE_S:
                signal.pthread_kill(main, signal.SIGINT)  # the main thread's poll returns; Python raises
                interrupted_at = time.monotonic() + 60  # once; again only if that did not end the start

    thread = threading.Thread(target=watch, name="speclab-start-watch", daemon=True)
    thread.start()
    try:
        yield
    except KeyboardInterrupt:
        if died and not signalled.is_set():
            codes = ", ".join(str(_exit_code(p)) for p in died)
            raise EngineDied(f"{what} exited while starting (exit code {codes}); its log names the cause") from None
        raise
    finally:
        done.set()
        thread.join()
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)


def _exit_code(process) -> int | str:
    import psutil

    try:
        return process.wait(timeout=0)
    except (psutil.Error, psutil.TimeoutExpired):
        return "unknown"
