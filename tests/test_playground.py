"""The warm playground behind lesson 07's controls: two real engines on the CPU profile."""

import pytest

from speclab.measure.playground import Playground
from speclab.vllm_layer.configs import ConfigError
from speclab.vllm_layer.engine import engine_processes
from speclab.models.profiles import PROFILES

pytestmark = pytest.mark.engine


def test_knobs_rerun_on_warm_engines_and_k_reopens_only_the_speculative_one():
    with Playground(PROFILES["cpu-tiny"], "ngram", 2, source="workloads", prompts_per_category=1) as play:
        baseline = play.baseline
        greedy = play.run("code", temperature=0.0, max_tokens=24)
        assert (greedy.method, greedy.k, greedy.max_tokens) == ("ngram", 2, 24)
        assert greedy.acceptance_length > 1.0  # a code edit repeats its prompt
        assert greedy.baseline_tokens_per_s > 0 and greedy.tokens_per_s > 0
        greedy.greedy.require("the playground")
        assert "code, T=0, 24 tokens, ngram k=2: acceptance length" in repr(greedy)

        sampled = play.run("chat", temperature=1.0, max_tokens=16, k=3)
        assert play.k == 3 and sampled.k == 3 and sampled.greedy is None
        assert play.baseline is baseline  # the baseline engine stayed warm
        with pytest.raises(ConfigError, match="no category 'poetry' here"):
            play.run("poetry")
    assert engine_processes() == []


def test_a_bad_method_stops_before_any_engine():
    with pytest.raises(ConfigError):
        Playground(PROFILES["cpu-tiny"], "no-such-method", 2)
    assert engine_processes() == []
