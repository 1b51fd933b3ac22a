"""The load generator without a model: percentiles, accounting, and failures that must not hang.

The real server's success path is tested in test_server.py (one shared server there).
"""

import asyncio
import json
import math
import socket
import threading
import time

import pytest

from speclab.algorithms.counters import SpecCounters
from speclab.models.profiles import SpeclabError
from speclab.serving import loadgen, loadtest
from speclab.serving.loadgen import LevelResult, RequestResult
from speclab.serving.loadtest import LoadComparison, LoadRun
from speclab.serving.metrics_watch import MetricsSample, MetricsTrace
from speclab.serving.server import free_port


def test_percentile_interpolates_like_numpy():
    assert loadgen.percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert loadgen.percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)  # 1 + 0.95 * 3 -> 3 + 0.85
    assert loadgen.percentile([7.0], 95) == 7.0
    assert loadgen.percentile([], 50) is None


def test_level_figures_by_hand():
    requests = [
        RequestResult(0, True, output_tokens=11, ttft=0.5, latency=1.5),  # tpot (1.5-0.5)/10 = 0.1
        RequestResult(1, True, output_tokens=21, ttft=1.0, latency=5.0),  # tpot 4/20 = 0.2
        RequestResult(2, False, latency=0.2, error="cannot connect"),
    ]
    level = LevelResult(concurrency=2, requests=requests, seconds=4.0)
    row = level.row()
    assert (row["succeeded"], row["failed"], row["output_tokens"]) == (2, 1, 32)
    assert row["throughput_tok_s"] == pytest.approx(8.0)  # 32 tokens / 4 s
    assert row["ttft_p50_ms"] == pytest.approx(750.0)
    assert row["tpot_p50_ms"] == pytest.approx(150.0)
    assert row["tpot_p95_ms"] == pytest.approx(195.0)
    assert level.errors() == {"cannot connect": 1}
    assert RequestResult(3, True, output_tokens=1, ttft=0.3, latency=0.3).tpot is None


def test_requests_per_level_never_below_concurrency():
    assert loadgen.requests_for(1, 8) == 8
    assert loadgen.requests_for(64, 8) == 64


def test_only_loopback_targets():
    with pytest.raises(SpeclabError, match="127.0.0.1"):
        loadgen.run_load("http://10.1.2.3:8000", "m", ["hi"], [1], 1)


def test_connection_refused_every_request_is_an_error_and_counted():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    [level] = loadgen.run_load(url, "m", ["a", "b"], [3], 7, timeout=30)
    # each refusal is reported at once, not after the 30 s timeout (a request's own clock, so a
    # loaded machine's stalls between requests do not count)
    assert max(r.latency for r in level.requests) < 10
    assert len(level.requests) == 7 and level.failed == 7 and level.succeeded == 0
    assert sorted(r.index for r in level.requests) == list(range(7))
    assert all(r.error.startswith("cannot connect") for r in level.requests)
    assert level.row()["throughput_tok_s"] == 0.0 and level.row()["ttft_p50_ms"] is None


class _SilentServer:
    """Accepts connections and reads, never answers: a server that hangs."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


def test_a_hanging_server_costs_one_timeout_per_request_not_a_hang():
    server = _SilentServer()
    try:
        started = time.perf_counter()
        [level] = loadgen.run_load(f"http://127.0.0.1:{server.port}", "m", ["x"], [2], 4, timeout=1.0)
        elapsed = time.perf_counter() - started
    finally:
        server.close()
    assert level.failed == 4 and len(level.requests) == 4
    assert all(r.error.startswith("timed out") for r in level.requests)
    waited = {r.index: r.latency for r in level.requests}
    assert all(1.0 <= w < 4.0 for w in waited.values()), waited  # each request its own 1 s timeout, not a hang
    # two clients: requests 0 and 1, then 2 and 3; the level lasts the two rounds, not more
    assert 1.9 < elapsed <= max(waited[0], waited[1]) + max(waited[2], waited[3]) + 1.0


def test_run_sync_works_inside_a_running_event_loop():
    async def inner():
        return loadgen.run_sync(lambda: asyncio.sleep(0, result=42))  # as in a Jupyter cell

    assert asyncio.run(inner()) == 42


def _run(label, throughputs, config=None):
    levels = []
    for c, tps in zip([1, 4], throughputs):
        r = RequestResult(0, True, output_tokens=int(tps * 10), ttft=0.1, latency=1.0)
        levels.append(LevelResult(c, [r], seconds=10.0))
    return LoadRun(label, config, levels, SpecCounters(10, 30, 15, (8, 5, 2)))


def test_comparison_speedup_break_even_and_files(tmp_path):
    cmp = LoadComparison(_run("baseline", [20, 80]), _run("ngram", [30, 60], {"method": "ngram"}), {"x": 1})
    assert cmp.speedups() == pytest.approx([1.5, 0.75])
    assert cmp.break_even() == 4
    rows = cmp.rows()
    assert [r["mode"] for r in rows] == ["baseline", "baseline", "ngram", "ngram"]
    assert rows[2]["speedup"] == 1.5 and "speedup" not in rows[0]
    table = cmp.table()
    assert "throughput_tok_s" in table and len(table.splitlines()) == 5
    paths = cmp.save("10_load", tmp_path)
    saved = json.loads(paths["json"].read_text())
    assert saved["break_even_concurrency"] == 4 and saved["counters"]["acceptance_length"] == 2.5
    assert paths["csv"].read_text().splitlines()[0].startswith("mode,concurrency")
    assert not list((tmp_path / "results").glob(".*"))  # no temporary files left behind
    assert cmp.figure() is not None


def _speedups(*values):
    base = LoadRun("baseline", None, [LevelResult(c, [RequestResult(0, True, output_tokens=100, ttft=0.1, latency=1.0)],
                                                  seconds=10.0) for c in (1, 4, 16)], None)
    spec = LoadRun("ngram", {"method": "ngram"}, [
        LevelResult(c, [RequestResult(0, True, output_tokens=round(100 * x), ttft=0.1, latency=1.0)], seconds=10.0)
        for c, x in zip((1, 4, 16), values)], None)
    return LoadComparison(base, spec)


def test_batch_size_schedule_from_a_sweep():
    """k where a level paid, 0 where it lost; borders at the geometric middle of two levels (1|4 -> 2, 4|16 -> 8)."""
    assert loadtest.batch_size_schedule(_speedups(1.3, 1.1, 0.7), 3) == [[1, 8, 3], [9, 16, 0]]
    assert loadtest.batch_size_schedule(_speedups(1.3, 0.9, 1.2), 3) == [[1, 2, 3], [3, 8, 0], [9, 16, 3]]
    assert loadtest.batch_size_schedule(_speedups(1.3, 1.1, 1.05), 2) == [[1, 16, 2]]
    assert loadtest.batch_size_schedule(_speedups(0.8, 0.7, 1.6), 3) == [[1, 8, 0], [9, 16, 3]]  # a GPU's small model
    assert loadtest.batch_size_schedule(_speedups(0.8, 0.7, 0.6), 3) == [[1, 16, 0]]  # never paid: never draft


def test_metrics_trace_rates_between_samples():
    trace = MetricsTrace([
        MetricsSample(0.0, 100, 0, 0, SpecCounters(10, 30, 10, (6, 3, 1))),
        MetricsSample(2.0, 160, 4, 1, SpecCounters(20, 60, 30, (14, 10, 6))),
        MetricsSample(4.0, 160, 0, 0, SpecCounters(20, 60, 30, (14, 10, 6))),
    ])
    s = trace.series()
    assert s["t"] == [2.0, 4.0]
    assert s["tokens_per_s"] == [30.0, 0.0]
    assert s["acceptance_length"][0] == 3.0  # 1 + 20 accepted / 10 drafts
    assert math.isnan(s["acceptance_length"][1])  # nothing drafted: no value, a gap in the plot
    assert s["running"] == [4, 0]
    assert trace.total().num_accepted_tokens == 20


def test_chat_prompts_are_message_lists():
    prompts = loadtest.chat_prompts("workloads", 4)
    assert len(prompts) == 4
    assert all(p[-1]["role"] == "user" and p[-1]["content"] for p in prompts)
