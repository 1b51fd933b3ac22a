"""A bounded load generator for a local server, and a live view of its metrics.

Speculative decoding spends spare compute to cut the number of target steps. At batch 1 the
hardware has plenty to spare; as more requests share each step there is less, and the extra
draft and verification work starts to cost more than it saves. This module measures where
that happens: for each concurrency level it sends a fixed number of streamed requests from
that many concurrent clients and records, for every request, success or error, time to first
token (TTFT) and time per output token (TPOT).

Limits keep it harmless: loopback addresses only, a bounded number of requests, a time limit
per request, and every request accounted for (a request that was sent and got no answer is
an error with a reason, never a silent drop).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlparse

from .atomic import write_csv
from .clients import carries_tokens
from .errors import SpeclabError
from .metrics import from_prometheus, metric_values
from .prompts import chat_messages, load_prompts
from .report import save_results
from .server import serve

DEFAULT_LEVELS = (1, 4, 16, 64)
REQUEST_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


# ---------------------------------------------------------------- one request

@dataclass(frozen=True)
class RequestResult:
    """What happened to one request: an answer with its timings, or an error with its reason."""

    index: int
    ok: bool
    output_tokens: int = 0
    ttft: float | None = None  # seconds to the first token
    latency: float = 0.0  # seconds to the last token (or to the failure)
    error: str | None = None

    @property
    def tpot(self) -> float | None:
        """Seconds per output token after the first; None when there is nothing to divide."""
        if not self.ok or self.ttft is None or self.output_tokens < 2:
            return None
        return (self.latency - self.ttft) / (self.output_tokens - 1)


def describe_error(err: BaseException) -> str:
    """A reason a reader understands, with the exception's own words after it."""
    import httpx

    detail = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    if isinstance(err, httpx.ConnectError):
        return f"cannot connect: the server is not running ({detail})"
    if isinstance(err, (httpx.RemoteProtocolError, httpx.ReadError)):
        return f"the server closed the connection mid-answer ({detail})"
    if isinstance(err, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError)):
        return f"timed out ({detail})"
    return detail


def _request_body(model: str, prompt, max_tokens: int, temperature: float) -> tuple[str, dict]:
    """(path, JSON body): chat for a message list, plain completion for a string."""
    body = {"model": model, "max_tokens": max_tokens, "temperature": temperature, "stream": True,
            "stream_options": {"include_usage": True}}
    if isinstance(prompt, str):
        return "/v1/completions", dict(body, prompt=prompt)
    return "/v1/chat/completions", dict(body, messages=prompt)


async def _stream(http, url: str, body: dict, index: int, sent: float) -> RequestResult:
    """Send one streaming request and read server-sent events until ``[DONE]``."""
    chat = "messages" in body
    first = last = None
    tokens, done = 0, False
    async with http.stream("POST", url, json=body) as response:
        if response.status_code != 200:
            text = (await response.aread()).decode(errors="replace")[:300]
            return RequestResult(index, False, latency=time.perf_counter() - sent,
                                 error=f"HTTP {response.status_code}: {text}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                return RequestResult(index, False, latency=time.perf_counter() - sent,
                                     error=f"server error: {chunk['error']}")
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices") or []:
                if carries_tokens(choice, chat):
                    last = time.perf_counter()
                    first = first if first is not None else last
    if not done:
        return RequestResult(index, False, latency=time.perf_counter() - sent,
                             error="the stream ended before [DONE]: the server stopped mid-answer")
    if first is None:
        return RequestResult(index, False, latency=time.perf_counter() - sent, error="the answer held no token")
    return RequestResult(index, True, tokens, first - sent, last - sent)


async def one_request(http, base_url: str, model: str, prompt, index: int = 0, max_tokens: int = 64,
                      temperature: float = 0.0, timeout: float = REQUEST_TIMEOUT_S) -> RequestResult:
    """One streamed request that always returns a result, never raises (except cancellation)."""
    path, body = _request_body(model, prompt, max_tokens, temperature)
    sent = time.perf_counter()
    try:
        return await asyncio.wait_for(_stream(http, base_url + path, body, index, sent), timeout)
    except (asyncio.TimeoutError, TimeoutError):
        return RequestResult(index, False, latency=time.perf_counter() - sent,
                             error=f"timed out: no complete answer within {timeout:g} s")
    except Exception as err:  # every failure becomes a counted error with its reason
        return RequestResult(index, False, latency=time.perf_counter() - sent, error=describe_error(err))


# ---------------------------------------------------------------- one concurrency level

def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation between order statistics (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass
class LevelResult:
    """All requests of one concurrency level and the figures derived from them."""

    concurrency: int
    requests: list[RequestResult]
    seconds: float  # wall time from the first request sent to the last one finished

    @property
    def succeeded(self) -> int:
        return sum(r.ok for r in self.requests)

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.requests)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests if r.ok)

    @property
    def throughput(self) -> float:
        """Output tokens per second of wall time, over all clients together."""
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0

    def _stat(self, attr: str, q: float) -> float | None:
        return percentile([v for r in self.requests if r.ok and (v := getattr(r, attr)) is not None], q)

    def errors(self) -> dict[str, int]:
        """Error reasons with how many requests each."""
        counts: dict[str, int] = {}
        for r in self.requests:
            if not r.ok:
                counts[r.error] = counts.get(r.error, 0) + 1
        return counts

    def row(self) -> dict:
        ms = lambda v: None if v is None else round(v * 1000, 1)  # noqa: E731
        return {"concurrency": self.concurrency, "requests": len(self.requests), "succeeded": self.succeeded,
                "failed": self.failed, "seconds": round(self.seconds, 2), "output_tokens": self.output_tokens,
                "throughput_tok_s": round(self.throughput, 2),
                "ttft_p50_ms": ms(self._stat("ttft", 50)), "ttft_p95_ms": ms(self._stat("ttft", 95)),
                "tpot_p50_ms": ms(self._stat("tpot", 50)), "tpot_p95_ms": ms(self._stat("tpot", 95))}


def _check_loopback(base_url: str) -> None:
    host = urlparse(base_url).hostname
    if host not in LOOPBACK_HOSTS:
        raise SpeclabError(f"the load generator only targets this machine (127.0.0.1), not {host!r}: "
                           "start the server with speclab.server.serve")


async def run_level_async(base_url: str, model: str, prompts: list, concurrency: int, num_requests: int,
                          max_tokens: int = 64, temperature: float = 0.0,
                          timeout: float = REQUEST_TIMEOUT_S) -> LevelResult:
    """``num_requests`` requests from ``concurrency`` clients; each client sends its next request
    as soon as its previous one finished (a closed loop, as in a chat front-end)."""
    import httpx

    _check_loopback(base_url)
    if concurrency < 1 or num_requests < 1:
        raise SpeclabError("concurrency and the number of requests must be >= 1")
    pending = list(range(num_requests))
    results: list[RequestResult | None] = [None] * num_requests
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    http_timeout = httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S)

    async with httpx.AsyncClient(timeout=http_timeout, limits=limits, trust_env=False) as http:
        async def client():
            while pending:
                i = pending.pop(0)
                results[i] = await one_request(http, base_url, model, prompts[i % len(prompts)], i,
                                               max_tokens, temperature, timeout)

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(min(concurrency, num_requests))))
        seconds = time.perf_counter() - started
    lost = [i for i, r in enumerate(results) if r is None]
    if lost:  # cannot happen unless the code above is wrong: fail loudly rather than drop
        raise RuntimeError(f"requests {lost} were neither answered nor counted as errors")
    return LevelResult(concurrency, results, seconds)


def run_sync(make_coro: Callable[[], object]):
    """Run a coroutine to completion, also inside Jupyter (whose event loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())
    box: dict = {}

    def target():
        try:
            box["value"] = asyncio.run(make_coro())
        except BaseException as err:  # handed to the caller's thread below
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def requests_for(concurrency: int, requests_per_level: int) -> int:
    """Each level sends at least one request per client, so that every client is busy."""
    return max(requests_per_level, concurrency)


def run_load(base_url: str, model: str, prompts: list, levels=DEFAULT_LEVELS, requests_per_level: int = 8,
             max_tokens: int = 64, temperature: float = 0.0, timeout: float = REQUEST_TIMEOUT_S,
             progress: bool = False) -> list[LevelResult]:
    """One :class:`LevelResult` per concurrency level, the levels run one after the other."""
    out = []
    for c in levels:
        n = requests_for(c, requests_per_level)
        level = run_sync(lambda: run_level_async(base_url, model, prompts, c, n, max_tokens, temperature, timeout))
        if progress:
            row = level.row()
            print(f"  concurrency {c:3d}: {row['succeeded']}/{n} ok, {row['throughput_tok_s']:.1f} tok/s, "
                  f"TTFT p50 {row['ttft_p50_ms']} ms, TPOT p50 {row['tpot_p50_ms']} ms", flush=True)
        out.append(level)
    return out


# ---------------------------------------------------------------- with and without speculation

def chat_prompts(source: str = "workloads", num_prompts: int = 16) -> list[list[dict]]:
    """Chat messages for a bundled prompt set (every category represented)."""

    return [chat_messages(p) for p in load_prompts(source, num_prompts=num_prompts)]


@dataclass
class LoadRun:
    """One server's load sweep: its levels and its speculation counters over the sweep."""

    label: str
    speculative_config: dict | None
    levels: list[LevelResult]
    counters: object = None  # SpecCounters over the sweep (warm-up excluded)
    start_seconds: float | None = None

    def rows(self) -> list[dict]:
        return [dict(mode=self.label, **level.row()) for level in self.levels]


def measure(server, prompts: list, levels=DEFAULT_LEVELS, requests_per_level: int = 8, max_tokens: int = 64,
            label: str | None = None, timeout: float = REQUEST_TIMEOUT_S, progress: bool = False) -> LoadRun:
    """Warm the server up with one request, then sweep the levels; counters cover the sweep only."""
    run_load(server.base_url, server.model, prompts[:1], [1], 1, max_tokens, timeout=timeout)
    before = server.counters()
    levels = run_load(server.base_url, server.model, prompts, levels, requests_per_level, max_tokens,
                      timeout=timeout, progress=progress)
    label = label or (server.speculative_config or {}).get("method", "baseline")
    return LoadRun(label, server.speculative_config, levels, server.counters() - before, server.start_seconds)


@dataclass
class LoadComparison:
    """A baseline sweep and a speculative sweep over the same levels and prompts."""

    baseline: LoadRun
    speculative: LoadRun
    settings: dict = field(default_factory=dict)

    @property
    def concurrency(self) -> list[int]:
        return [lv.concurrency for lv in self.baseline.levels]

    def speedups(self) -> list[float | None]:
        """Speculative over baseline throughput, per level."""
        return [s.throughput / b.throughput if b.throughput > 0 else None
                for b, s in zip(self.baseline.levels, self.speculative.levels)]

    def break_even(self) -> int | None:
        """The lowest concurrency at which speculation no longer pays (speedup < 1), if any."""
        for c, x in zip(self.concurrency, self.speedups()):
            if x is not None and x < 1.0:
                return c
        return None

    def rows(self) -> list[dict]:
        spec = self.speculative.rows()
        for row, x in zip(spec, self.speedups()):
            row["speedup"] = None if x is None else round(x, 3)
        return self.baseline.rows() + spec

    def table(self) -> str:
        cols = ["mode", "concurrency", "succeeded", "failed", "throughput_tok_s", "ttft_p50_ms", "ttft_p95_ms",
                "tpot_p50_ms", "tpot_p95_ms", "speedup"]
        rows = self.rows()
        widths = {c: max(len(c), *(len(_cell(r.get(c))) for r in rows)) for c in cols}
        lines = ["  ".join(c.rjust(widths[c]) for c in cols)]
        lines += ["  ".join(_cell(r.get(c)).rjust(widths[c]) for c in cols) for r in rows]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"settings": self.settings, "rows": self.rows(), "break_even_concurrency": self.break_even(),
                "speculative_config": self.speculative.speculative_config,
                "counters": self.speculative.counters.summary() if self.speculative.counters else None,
                "errors": {run.label: {lv.concurrency: lv.errors() for lv in run.levels if lv.failed}
                           for run in (self.baseline, self.speculative)}}

    def save(self, name: str, output_dir=".") -> dict:
        """results/<name>.json (everything) and results/<name>.csv (the table), both atomic."""
        from pathlib import Path

        json_path = save_results(name, self.to_dict(), output_dir)
        csv_path = write_csv(Path(output_dir) / "results" / f"{name}.csv", self.rows())
        return {"json": json_path, "csv": csv_path}

    def figure(self):
        from .plots import speculation_under_load

        return speculation_under_load(
            self.concurrency, {self.baseline.label: [lv.throughput for lv in self.baseline.levels],
                               self.speculative.label: [lv.throughput for lv in self.speculative.levels]},
            self.speedups())


def batch_size_schedule(comparison: LoadComparison, k: int) -> list[list[int]]:
    """vLLM's ``num_speculative_tokens_per_batch_size`` from a measured sweep: k where speculation
    paid, 0 drafts where it lost.

    Running requests stand in for the batch size (at c clients a server runs about c requests per
    step). Each batch size takes the decision of the nearest measured level on a log scale, so the
    border between levels 4 and 16 lies at 8; vLLM carries the last entry's k to larger batches.
    """
    levels, speedups = comparison.concurrency, comparison.speedups()
    schedule, first = [], 1
    for i, (c, x) in enumerate(zip(levels, speedups)):
        last = int(math.sqrt(c * levels[i + 1])) if i + 1 < len(levels) else c
        k_here = k if x is not None and x >= 1.0 else 0
        if schedule and schedule[-1][2] == k_here:
            schedule[-1][1] = last
        else:
            schedule.append([first, last, k_here])
        first = last + 1
    return schedule


def _cell(value) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def compare(profile, speculative_config: dict, prompts: list | None = None, levels=DEFAULT_LEVELS,
            requests_per_level: int = 8, max_tokens: int = 64, enforce_eager: bool = False,
            timeout: float = REQUEST_TIMEOUT_S, progress: bool = True) -> LoadComparison:
    """Start a baseline server, sweep, stop it; then the same with speculation."""
    prompts = prompts or chat_prompts()
    runs = []
    for config in (None, speculative_config):
        with serve(profile, config, enforce_eager=enforce_eager) as server:
            if progress:
                print(f"{(config or {}).get('method', 'baseline')}: server ready after {server.start_seconds:.0f} s",
                      flush=True)
            runs.append(measure(server, prompts, levels, requests_per_level, max_tokens, timeout=timeout,
                                progress=progress))
    settings = {"levels": list(levels), "requests_per_level": requests_per_level, "max_tokens": max_tokens,
                "num_prompts": len(prompts), "enforce_eager": enforce_eager}
    return LoadComparison(runs[0], runs[1], settings)


# ---------------------------------------------------------------- watching /metrics while a load runs

@dataclass(frozen=True)
class MetricsSample:
    t: float  # seconds since watching began
    generation_tokens: float
    running: float
    waiting: float
    counters: object  # SpecCounters, cumulative


@dataclass
class MetricsTrace:
    """Samples of a server's ``/metrics``; rates are computed between consecutive samples."""

    samples: list[MetricsSample] = field(default_factory=list)

    def series(self) -> dict[str, list[float]]:
        """Per interval: output tokens/s, acceptance length (NaN, a gap in a plot, when nothing
        was drafted), requests running and waiting at the interval's end."""
        out = {"t": [], "tokens_per_s": [], "acceptance_length": [], "running": [], "waiting": []}
        for prev, cur in zip(self.samples, self.samples[1:]):
            dt = cur.t - prev.t
            out["t"].append(cur.t)
            out["tokens_per_s"].append((cur.generation_tokens - prev.generation_tokens) / dt if dt > 0 else 0.0)
            step = cur.counters - prev.counters
            out["acceptance_length"].append(step.acceptance_length if step.num_drafts else float("nan"))
            out["running"].append(cur.running)
            out["waiting"].append(cur.waiting)
        return out

    def total(self):
        """Counters between the first and the last sample."""
        return self.samples[-1].counters - self.samples[0].counters if len(self.samples) > 1 else None


def sample_metrics(server, t0: float) -> MetricsSample:

    text = server.metrics_text()
    values = metric_values(text)
    return MetricsSample(time.perf_counter() - t0, values.get("generation_tokens_total", 0.0),
                         values.get("num_requests_running", 0.0), values.get("num_requests_waiting", 0.0),
                         from_prometheus(text))


def watch(server, work: Callable[[], object] | None = None, samples: int = 10, interval: float = 1.0,
          interactive: bool = False, k: int | None = None):
    """Sample ``/metrics`` every ``interval`` s while ``work()`` (e.g. a load) runs in a thread.

    Headless: a sample every ``interval`` while the work runs and one after it ends (at least two),
    at most ``samples``, then wait for the work; without work, exactly ``samples``. Interactive: a
    live plot and a status line (ipywidgets) redrawn at every sample, sampling until the work is done.
    Returns ``(trace, work_result)``.
    """
    box: dict = {}
    thread = None
    if work is not None:
        def target():
            try:
                box["value"] = work()
            except BaseException as err:
                box["error"] = err

        thread = threading.Thread(target=target, daemon=True)
        thread.start()
    view = _LiveView(k) if interactive else None
    trace, t0 = MetricsTrace(), time.perf_counter()
    while True:
        tick = time.perf_counter()
        done = thread is not None and not thread.is_alive()  # asked before sampling: this sample sees its end
        try:
            trace.samples.append(sample_metrics(server, t0))
        except Exception:  # the server went away: stop watching; the work's own result says what failed
            break
        if view:
            view.update(trace)
        if done and len(trace.samples) >= 2:
            break
        busy = thread is not None and thread.is_alive()
        if len(trace.samples) >= samples and not (interactive and busy):
            break
        time.sleep(max(0.0, interval - (time.perf_counter() - tick)))
    if thread is not None:
        thread.join()
    if "error" in box:
        raise box["error"]
    return trace, box.get("value")


class _LiveView:
    """A status line and a redrawn figure in ipywidgets outputs (interactive notebooks only)."""

    def __init__(self, k=None):
        import ipywidgets as w
        from IPython.display import display

        self.k = k
        self.status = w.HTML()
        self.out = w.Output()
        display(w.VBox([self.status, self.out]))

    def update(self, trace: MetricsTrace) -> None:
        import matplotlib.pyplot as plt
        from IPython.display import display

        from .plots import live_metrics

        s = trace.series()
        if not s["t"]:
            return
        length = s["acceptance_length"][-1]
        length = "no drafts" if length != length else f"{length:.2f}"  # NaN: nothing drafted
        self.status.value = (f"<b>t = {s['t'][-1]:.0f} s</b> &nbsp; {s['tokens_per_s'][-1]:.1f} tok/s &nbsp; "
                             f"acceptance length {length} &nbsp; "
                             f"running {s['running'][-1]:.0f}, waiting {s['waiting'][-1]:.0f}")
        fig = live_metrics(s["t"], s["tokens_per_s"], s["acceptance_length"], s["running"], k=self.k)
        with self.out:
            self.out.clear_output(wait=True)
            display(fig)
        plt.close(fig)
