"""Shared fixtures: the real CPU profile, with engine runs done once per test session."""

import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

NGRAM_K = 3
OUTPUT_LEN = 64


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` run only where an NVIDIA GPU is usable (`make test-gpu`)."""
    from speclab.models.profiles import cuda_available

    if any("gpu" in item.keywords for item in items) and not cuda_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU (make test-gpu on a GPU machine)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def target_dir():
    from speclab.models.provision import fetch_smollm2

    return fetch_smollm2()


@pytest.fixture(scope="session")
def lesson_prompts(target_dir):
    """Four workload prompts (two where lookup shines, two where it should not), chat-templated."""
    from speclab.measure.bench import prompt_inputs
    from speclab.models.profiles import PROFILES

    prompts, inputs = prompt_inputs(PROFILES["cpu-tiny"], "workloads", num_prompts=4)
    return prompts, inputs


@pytest.fixture(scope="session")
def greedy_runs(lesson_prompts):
    """Baseline and ngram runs of the same prompts on the real engine, shared by the e2e tests.

    The ngram engine measures the prompt set twice, so that tests can check that snapshot
    differences separate two runs on one engine.
    """
    from speclab.measure import metrics
    from speclab.measure.bench import greedy, measure, run_one
    from speclab.models.profiles import PROFILES
    from speclab.vllm_layer import configs
    from speclab.vllm_layer.engine import open_engine

    _, inputs = lesson_prompts
    sampling = greedy(OUTPUT_LEN)
    base, _ = run_one(PROFILES["cpu-tiny"], None, inputs, sampling, "baseline", enforce_eager=True)
    with open_engine(PROFILES["cpu-tiny"], configs.ngram(NGRAM_K), enforce_eager=True) as llm:
        before = metrics.snapshot(llm)
        first = measure(llm, inputs, sampling, "ngram")
        second = measure(llm, inputs, sampling, "ngram again")
        both = metrics.snapshot(llm) - before
        from speclab.train import self_written_prompts  # the same engine writes a few training prompts

        written = self_written_prompts(llm, llm.get_tokenizer(), 6, max_tokens=32)
    return {"baseline": base, "ngram": first, "ngram_again": second, "ngram_both": both, "self_written": written}


@pytest.fixture(scope="module")
def lesson(request) -> dict:
    """The functions a lesson defines in its own cells, for a test module that names its ``LESSON``."""
    from notebook_defs import lesson_definitions

    return lesson_definitions(request.module.LESSON)
