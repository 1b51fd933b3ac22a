"""A server's ``/metrics`` watched while a load runs: tokens/s, acceptance length, queue, per interval.

``watch`` samples the Prometheus text every few seconds in the caller's thread while the work (a
load from ``speclab.serving.loadgen`` or ``speclab.serving.loadtest``) runs in another; in an interactive notebook
it redraws a live figure as it goes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ..measure.metrics import from_prometheus, metric_values
from ..measure.plots import live_metrics


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
