"""vLLM's OpenAI-compatible server for a profile: start it, talk to it, stop all of it.

``serve`` is a context manager. It checks the speculative config, starts
``python -m vllm.entrypoints.openai.api_server`` (the module entry point: the ``vllm`` command
of the CPU build is broken) on a free port of 127.0.0.1 in a process group of its own, sends
its log to a file and waits until ``/health`` answers. If the server dies or the wait times
out, the error carries the server's own last log lines. On leaving the block, however it is
left (normally, by an exception, by Ctrl-C), the whole process group is stopped: stopping the
API server alone can leave its EngineCore and worker processes running. Talking to a running
server is ``speclab.serving.clients``; the ``speclab serve`` command is ``speclab.cli.main``'s.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ServerError, SpeclabError
from ..files import cache_dir
from ..measure.metrics import from_prometheus
from ..models.model_refs import resolve_model
from ..models.profiles import Profile, require_device
from ..vllm_layer import configs, ipc, validation
from ..vllm_layer.engine import cpu_environment, engine_device, engine_kwargs
from ..vllm_layer.logs import TAIL_LINES, headline, log_tail
from ..vllm_layer.vllm_features import has_per_request_spec_metrics

HOST = "127.0.0.1"
LISTEN_HOSTS = ("127.0.0.1", "0.0.0.0")  # both answer on 127.0.0.1, where speclab checks and measures
ENTRY_POINT = "vllm.entrypoints.openai.api_server"
STARTUP_TIMEOUT_S = 900.0  # CPU starts took 60-280 s here; a torch.compile warm-up on a busy machine, over 10 min
STOP_TIMEOUT_S = 20.0


def free_port(host: str = HOST) -> int:
    """A port that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def served_name(profile: Profile) -> str:
    """The model name clients send: the profile's target, without the ``local:`` prefix."""
    return profile.target.split(":", 1)[1] if profile.target.startswith("local:") else profile.target


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def check_host(host: str) -> None:
    """The server must answer on 127.0.0.1, where speclab checks its health and measures it."""
    if host not in LISTEN_HOSTS:
        raise SpeclabError(f"--host {host}: speclab checks the server on 127.0.0.1, so it listens on 127.0.0.1 "
                           "(this machine only) or 0.0.0.0 (every interface, for other machines in the room)")


def server_argv(profile: Profile, speculative_config: dict | None = None, *,
                port: int, enforce_eager: bool | None = None, extra_args=(), host: str = HOST) -> list[str]:
    """The command line that starts the server (the same defaults as ``speclab.vllm_layer.engine``).

    ``enforce_eager``: None takes the engine's default for the device (eager on a CPU, compiled on a GPU).

    ``host``: where it listens, 127.0.0.1 (this machine) or 0.0.0.0 (every interface: a workshop room).
    """
    check_host(host)
    kwargs = engine_kwargs(profile, speculative_config, device=engine_device(), enforce_eager=enforce_eager)
    argv = [sys.executable, "-m", ENTRY_POINT, "--model", kwargs.pop("model"),
            "--served-model-name", served_name(profile), "--host", host, "--port", str(port)]
    kwargs.pop("disable_log_stats")  # a server logs stats unless told otherwise
    speculative = kwargs.pop("speculative_config", None)
    for key, value in kwargs.items():
        if isinstance(value, bool):  # vLLM's boolean options are bare flags: --x / --no-x
            argv.append(_flag(key) if value else _flag("no_" + key))
        else:
            argv += [_flag(key), str(value)]
    if speculative is not None:
        argv += ["--speculative-config", json.dumps(speculative)]
        if has_per_request_spec_metrics():  # each reply carries its own acceptance (clients.request_acceptance)
            argv += ["--per-request-spec-decode-metrics", "summary"]
    return argv + [str(a) for a in extra_args]  # last: vLLM's parser lets a later flag win


def group_processes(pgid: int) -> list:
    """Live processes of a process group (zombies count as gone: nothing runs in them)."""
    import psutil

    members = []
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p)
    return members


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def stop_group(pgid: int, timeout: float = STOP_TIMEOUT_S, leader: subprocess.Popen | None = None) -> None:
    """SIGTERM the whole group, wait until it is gone, then SIGKILL whatever is left.

    Descendants of the leader that moved to another group are killed too.
    """
    import psutil

    in_group = {p.pid for p in group_processes(pgid)}
    strays = [p for p in (_descendants(leader.pid) if leader else []) if p.pid not in in_group]
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        if not group_processes(pgid):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if leader is not None:
                leader.poll()  # reap our own child, else it lingers as a zombie
            if not group_processes(pgid):
                break
            time.sleep(0.2)
    for p in strays:
        with contextlib.suppress(psutil.Error):
            p.kill()
    if leader is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(timeout=5)


@dataclass
class Server:
    """A running server: where it listens, where it logs, and how to reach it."""

    port: int
    model: str
    log_path: Path
    process: subprocess.Popen = field(repr=False)
    speculative_config: dict | None = None
    start_seconds: float | None = None
    holds_sockets: bool = field(default=False, repr=False)  # ipc.acquire() counted it; stop() releases once

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def healthy(self, timeout: float = 2.0) -> bool:
        import httpx

        try:
            return httpx.get(f"{self.base_url}/health", timeout=timeout, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def metrics_text(self, timeout: float = 10.0) -> str:
        """The raw Prometheus exposition text of ``/metrics``."""
        import httpx

        response = httpx.get(f"{self.base_url}/metrics", timeout=timeout, trust_env=False)  # no proxy for loopback
        response.raise_for_status()
        return response.text

    def counters(self):
        """Speculative-decoding counters (cumulative since start) as a ``SpecCounters``."""

        return from_prometheus(self.metrics_text())

    def client(self, **kwargs):
        """The official ``openai.OpenAI`` client pointed at this server (no retries by default)."""
        import httpx
        import openai

        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 120.0)
        kwargs.setdefault("http_client", httpx.Client(trust_env=False))  # loopback: never through a proxy
        return openai.OpenAI(base_url=f"{self.base_url}/v1", api_key="not-needed", **kwargs)

    def log_tail(self, lines: int = TAIL_LINES) -> list[str]:
        return log_tail(self.log_path, lines)

    def processes(self) -> list:
        """Live processes of the server's group: API server, EngineCore, workers."""
        return group_processes(self.pid)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the whole process group; safe to call twice or after the server died."""
        stop_group(self.pid, timeout, leader=self.process)
        if self.holds_sockets:
            self.holds_sockets = False
            ipc.release()
        with contextlib.suppress(ValueError):
            atexit.unregister(self.stop)


def default_log_path(port: int) -> Path:
    return cache_dir() / "logs" / f"server-{time.strftime('%Y%m%d-%H%M%S')}-{port}.log"


def _server_env(profile: Profile) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", VLLM_LOGGING_COLOR="0")  # a log file, not a terminal
    if engine_device() == "cpu":
        for name, value in cpu_environment().items():
            env.setdefault(name, value)
    return env


# Runs in the server's process before vLLM does. Linux then sends it SIGTERM when the thread that started
# it dies, even by SIGKILL (a restarted Jupyter kernel, a killed test run), and vLLM stops its engine as
# on Ctrl-C. The setting survives exec; a parent already gone by then means: do not start at all.
_STOP_WITH_PARENT = ("import ctypes, os, signal, sys; "
                     "ctypes.CDLL(None).prctl(1, signal.SIGTERM); "  # 1 = PR_SET_PDEATHSIG
                     "os.getppid() == int(sys.argv[1]) or sys.exit(1); "
                     "os.execv(sys.argv[2], sys.argv[2:])")


def _stopped_with_parent(argv: list[str]) -> list[str]:
    """``argv`` (absolute executable first) wrapped so that the server dies with its starter (Linux only)."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-c", _STOP_WITH_PARENT, str(os.getpid()), *argv]


def start(profile: Profile, speculative_config: dict | None = None, *,
          port: int | None = None, log_path: str | Path | None = None, startup_timeout: float = STARTUP_TIMEOUT_S,
          extra_args=(), enforce_eager: bool | None = None, validate: bool = True, host: str = HOST) -> Server:
    """Start the server and wait until it is healthy; prefer ``serve`` (it always stops it).

    ``validate=False`` skips speclab's own config check, so that vLLM's check answers.
    """
    require_device(profile)
    if validate:
        validation.validate(speculative_config, target=resolve_model(profile.target))
    port = port or free_port()
    log_path = Path(log_path) if log_path else default_log_path(port)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = server_argv(profile, speculative_config, port=port, enforce_eager=enforce_eager, extra_args=extra_args,
                       host=host)
    started = time.perf_counter()
    sockets = ipc.acquire()  # the server's engine puts its sockets in our folder, not in /tmp
    try:
        with open(log_path, "wb") as log:
            log.write(f"$ {shlex.join(argv)}\n".encode())
            log.flush()
            process = subprocess.Popen(_stopped_with_parent(argv), stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=_server_env(profile), start_new_session=True)
    except BaseException:
        if sockets:
            ipc.release()
        raise
    server = Server(port, served_name(profile), log_path, process, speculative_config, holds_sockets=sockets)
    atexit.register(server.stop)  # a kernel that exits without leaving the with-block
    try:
        _wait_healthy(server, startup_timeout)
    except BaseException:
        server.stop()
        raise
    server.start_seconds = time.perf_counter() - started
    return server


def _wait_healthy(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        code = server.process.poll()
        if code is not None:
            lines = server.log_tail()
            raise ServerError(
                f"the vLLM server exited during start-up (code {code}): {headline(lines)} "
                f"[full log: {server.log_path}]\n" + "\n".join("    " + ln for ln in lines))
        if server.healthy():
            return
        if time.monotonic() > deadline:
            lines = server.log_tail()
            raise ServerError(
                f"the vLLM server was not healthy after {timeout:.0f} s: raise startup_timeout or read "
                f"{server.log_path}\n" + "\n".join("    " + ln for ln in lines))
        time.sleep(0.5)


@contextlib.contextmanager
def serve(profile: Profile, speculative_config: dict | None = None, *,
          port: int | None = None, log_path: str | Path | None = None, startup_timeout: float = STARTUP_TIMEOUT_S,
          extra_args=(), enforce_eager: bool | None = None, validate: bool = True, host: str = HOST):
    """Run vLLM's OpenAI-compatible server for the block; yields a :class:`Server`."""
    server = start(profile, speculative_config, port=port, log_path=log_path, startup_timeout=startup_timeout,
                   extra_args=extra_args, enforce_eager=enforce_eager, validate=validate, host=host)
    try:
        yield server
    finally:
        server.stop()


def config_for(profile: Profile, method: str | None, k: int = 3,
               prompt_lookup_max: int = configs.DEFAULT_LOOKUP_MAX,
               prompt_lookup_min: int = configs.DEFAULT_LOOKUP_MIN) -> dict | None:
    """The speculative config for a method on a profile, its drafter taken from the profile."""
    if method in (None, "", "none", "baseline"):
        return None
    if method in configs.LOOKUP_METHODS:
        return configs.build(method, k, prompt_lookup_max=prompt_lookup_max, prompt_lookup_min=prompt_lookup_min)
    if method in ("mtp", "suffix"):
        return configs.build(method, k)
    drafter = profile.drafter(method)
    if drafter is None:
        raise SpeclabError(f"profile {profile.name} has no {method} drafter: pick another method (e.g. ngram)")
    if method in ("eagle", "eagle3"):
        return configs.build(method, k, model=drafter, target=None if drafter.startswith("local:") else profile.target)
    return configs.build(method, k, model=drafter)
