"""A load test with and without speculation: the same sweep on a baseline server and a speculative one.

Each server is warmed up and swept over the same concurrency levels with the same prompts
(``speclab.serving.loadgen``); the speedup per level says where speculation stops paying, and
``batch_size_schedule`` turns that into vLLM's dynamic k (``num_speculative_tokens_per_batch_size``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..files import write_csv
from ..measure.plots import speculation_under_load
from ..measure.prompts import chat_messages, load_prompts
from ..measure.report import save_results
from ..models.profiles import Profile
from .loadgen import DEFAULT_LEVELS, REQUEST_TIMEOUT_S, LevelResult, run_load
from .server import serve


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
        json_path = save_results(name, self.to_dict(), output_dir)
        csv_path = write_csv(Path(output_dir) / "results" / f"{name}.csv", self.rows())
        return {"json": json_path, "csv": csv_path}

    def figure(self):
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


def compare(profile: Profile, speculative_config: dict, prompts: list | None = None, levels=DEFAULT_LEVELS,
            requests_per_level: int = 8, max_tokens: int = 64, enforce_eager: bool | None = None,
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
