"""A bounded load generator for a local server.

Speculative decoding spends spare compute to cut the number of target steps. At batch 1 the
hardware has plenty to spare; as more requests share each step there is less, and the extra
draft and verification work starts to cost more than it saves. This module measures where
that happens: for each concurrency level it sends a fixed number of streamed requests from
that many concurrent clients and records, for every request, success or error, time to first
token (TTFT) and time per output token (TPOT). The same sweep with and without speculation is
``speclab.serving.loadtest``; watching ``/metrics`` while it runs, ``speclab.serving.metrics_watch``.

Limits keep it harmless: loopback addresses only, a bounded number of requests, a time limit
per request, and every request accounted for (a request that was sent and got no answer is
an error with a reason, never a silent drop).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlparse

from ..errors import SpeclabError
from .clients import carries_tokens

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
                           "start the server with speclab.serving.server.serve")


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
