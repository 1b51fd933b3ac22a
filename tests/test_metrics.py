"""Counter arithmetic against hand-computed values, in every spelling vLLM uses."""

import pytest

from speclab.algorithms.counters import SpecCounters
from speclab.measure import metrics


def test_derived_figures_by_hand():
    # 10 drafts of k=3 (30 draft tokens); 12 accepted: per position 6, 4, 2
    c = SpecCounters(10, 30, 12, (6, 4, 2))
    assert c.acceptance_length == pytest.approx(2.2)      # 1 + 12/10
    assert c.draft_acceptance_rate == pytest.approx(0.4)  # 12/30
    assert c.per_position_rates == pytest.approx([0.6, 0.4, 0.2])
    assert SpecCounters().acceptance_length == 1.0 and SpecCounters().draft_acceptance_rate == 0.0


def test_snapshot_difference_separates_runs():
    first = SpecCounters(10, 30, 12, (6, 4, 2))
    later = SpecCounters(25, 75, 40, (20, 12, 8))
    run2 = later - first
    assert run2 == SpecCounters(15, 45, 28, (14, 8, 6))
    assert run2.acceptance_length == pytest.approx(1 + 28 / 15)
    with pytest.raises(ValueError, match="went backwards"):
        first - later
    assert SpecCounters(1, 2, 1, (1, 0)) - SpecCounters() == SpecCounters(1, 2, 1, (1, 0))


class _M:  # the shape of vllm.v1.metrics.reader Counter / Vector
    def __init__(self, name, value=None, values=None, labels=None):
        self.name, self.value, self.values, self.labels = name, value, values, labels or {}


def test_from_llm_metrics_sums_engines():
    ms = [_M("vllm:spec_decode_num_drafts", 4, labels={"engine": "0"}),
          _M("vllm:spec_decode_num_drafts", 6, labels={"engine": "1"}),
          _M("vllm:spec_decode_num_draft_tokens", 30), _M("vllm:spec_decode_num_accepted_tokens", 12),
          _M("vllm:spec_decode_num_accepted_tokens_per_pos", values=[6, 4, 2]), _M("vllm:num_requests_running", 3)]
    assert metrics.from_llm_metrics(ms) == SpecCounters(10, 30, 12, (6, 4, 2))


PROM = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 12.0
vllm:spec_decode_num_accepted_tokens_created{engine="0",model_name="m"} 1.7e9
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 4.0
# HELP vllm:generation_tokens_total Generated tokens.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 999.0
"""


def test_a_requests_own_histogram_gives_the_engine_counters():
    # a real n-gram request (k=3, 96 tokens): vLLM's engine counters for it read 24 drafts, 72 draft tokens,
    # 62 accepted, per position (22, 20, 20); its own histogram of accepted drafts per step was [2, 2, 0, 20]
    own = {"acceptance_histogram": [2, 2, 0, 20], "num_draft_tokens": 72, "num_spec_tokens": 3}
    assert metrics.from_request(own) == SpecCounters(24, 72, 62, (22, 20, 20))
    assert metrics.from_request(None) == SpecCounters()

    from vllm.v1.metrics.stats import RequestSpecDecodeMetrics  # the object an offline engine returns

    request = RequestSpecDecodeMetrics.new(num_spec_tokens=2)
    for drafted, accepted in [(2, 2), (2, 0), (1, 1), (2, 1)]:
        request.observe(num_draft_tokens=drafted, num_accepted=accepted)
    counters = metrics.from_request(request)
    assert counters == SpecCounters(4, 7, 4, (3, 1))
    assert counters.acceptance_length == request.to_dict()["mean_acceptance_length"] == 2.0


def test_from_prometheus_both_spellings():
    assert metrics.from_prometheus(PROM) == SpecCounters(10, 30, 12, (6, 4, 2))
    underscore = PROM.replace("vllm:", "vllm_")
    assert metrics.from_prometheus(underscore) == SpecCounters(10, 30, 12, (6, 4, 2))
    no_total = "\n".join(line.replace("_total", "") for line in PROM.splitlines()
                         if "TYPE" not in line and "HELP" not in line)
    assert metrics.from_prometheus(no_total + "\n") == SpecCounters(10, 30, 12, (6, 4, 2))


LOG = ("INFO 11-29 18:37:40 [metrics.py:121] SpecDecoding metrics: Mean acceptance length: 2.20, Accepted throughput: "
       "3.50 tokens/s, Drafted throughput: 8.75 tokens/s, Accepted: 12 tokens, Drafted: 30 tokens, "
       "Per-position acceptance rate: 0.600, 0.400, 0.200, Avg Draft acceptance rate: 40.0%")


def test_parse_log_line():
    got = metrics.parse_log_line(LOG)
    assert got == {"acceptance_length": 2.2, "accepted_throughput": 3.5, "drafted_throughput": 8.75,
                   "num_accepted_tokens": 12, "num_draft_tokens": 30, "per_position_rates": [0.6, 0.4, 0.2],
                   "draft_acceptance_rate": pytest.approx(0.4)}
    assert metrics.parse_log_line("INFO engine started") is None


def test_a_speedup_above_the_acceptance_length_is_called_impossible():
    # acceptance length 2.50 bounds the speedup; 10% slack for a short run's timing
    assert metrics.impossible_speedup(1.60, 2.50) is None
    assert metrics.impossible_speedup(2.75, 2.50) is None  # 2.50 x 1.10 = 2.75: still within the slack
    reason = metrics.impossible_speedup(27.16, 2.50)  # the figure a busy machine printed
    assert reason.startswith("speedup 27.16x is above the acceptance length 2.50") and "quiet machine" in reason
    assert metrics.impossible_speedup(1.20, 0.0) is not None  # no drafts at all: the bound is 1.0
    assert metrics.impossible_speedup(1.05, 1.0) is None


def test_throughput_and_speedup():
    assert metrics.tokens_per_second(300, 2.0) == 150.0
    assert metrics.speedup(150.0, 100.0) == 1.5
    with pytest.raises(ValueError):
        metrics.speedup(1.0, 0.0)
