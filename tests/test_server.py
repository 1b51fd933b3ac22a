"""vLLM's OpenAI-compatible server on the CPU profile: start, clients, metrics, failures, cleanup.

Three real servers start here (one to four minutes each on a 2-core CPU): one killed in the
middle of a load, one left by Ctrl-C, and one with n-gram speculation shared by the rest of the
module. A fourth is refused by vLLM itself at start-up. The failure tests come first, so that
no two servers run at once.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from argparse import Namespace

import httpx
import psutil
import pytest

from speclab.cli.commands import config_from_args
from speclab.measure.metrics import from_prometheus, metric_values
from speclab.models.profiles import PROFILES, SpeclabError, get_profile
from speclab.serving import loadgen, loadtest, metrics_watch
from speclab.serving.clients import curl_command, request_acceptance, stream_timed
from speclab.serving.server import ServerError, group_processes, serve, server_argv
from speclab.vllm_layer import configs
from speclab.vllm_layer.configs import ConfigError
from speclab.vllm_layer.vllm_features import has_per_request_spec_metrics

K = 3
TOKENS = 8
# a text whose continuation repeats it: prompt lookup (n-gram) has something to find
REPEAT = "apple, banana, cherry, apple, banana, cherry, apple, banana, cherry, apple, banana,"
FIXED_LENGTH = {"ignore_eos": True}  # vLLM's own field: exactly max_tokens tokens, EOS or not


def _my_vllm_processes():
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "vllm" in " ".join(p.cmdline()).lower() and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            pass
    return found


# ---------------------------------------------------------------- no server needed

def test_argv_uses_the_module_entry_point_and_todays_config_flag():
    cfg = configs.ngram(K)
    argv = server_argv(PROFILES["cpu-tiny"], cfg, port=8123, enforce_eager=True, extra_args=["--max-num-seqs", "8"])
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "8123"
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == cfg
    assert argv[argv.index("--served-model-name") + 1] == "smollm2-135m-instruct"
    assert "--enforce-eager" in argv and argv[-2:] == ["--max-num-seqs", "8"]  # extra args last: they win
    # a bare flag, once: vLLM would read a stray "True" after it as a positional model tag
    assert argv.count("--enforce-eager") == 1 and "True" not in argv
    compiled = server_argv(PROFILES["cpu-tiny"], cfg, port=8123, enforce_eager=False)
    assert "--enforce-eager" not in compiled and "--no-enforce-eager" in compiled
    assert not any(a.startswith("--speculative-model") or a.startswith("--num-speculative") for a in argv)
    room = server_argv(PROFILES["cpu-tiny"], cfg, port=8123, host="0.0.0.0")  # a workshop room reaches it too
    assert room[room.index("--host") + 1] == "0.0.0.0"
    with pytest.raises(SpeclabError, match="listens on 127.0.0.1 .* or 0.0.0.0"):
        server_argv(PROFILES["cpu-tiny"], cfg, port=8123, host="10.1.2.3")  # speclab could not check it on 127.0.0.1


def test_request_acceptance_reads_a_reply_or_says_why_there_is_none(monkeypatch):
    from speclab.serving import clients

    reply = {"metrics": {"speculative_decoding": {
        "mean_acceptance_length": 2.2, "draft_acceptance_rate": 0.4, "acceptance_histogram": [1, 2, 1, 1],
        "num_spec_steps": 5, "num_accepted_draft_tokens": 6, "num_draft_tokens": 15, "num_spec_tokens": 3}}}
    assert request_acceptance(reply) == ("this request: 5 verify steps, 6 of 15 drafted tokens accepted, acceptance "
                                         "length 2.20; steps by drafts accepted {0: 1, 1: 2, 2: 1, 3: 1}")
    assert "does not speculate" in request_acceptance({"choices": []})
    # this vLLM has the flag: a speculative server asks for it, a baseline one cannot (vLLM refuses it there)
    flag, cpu = "--per-request-spec-decode-metrics", PROFILES["cpu-tiny"]
    assert server_argv(cpu, configs.ngram(K), port=8123).count(flag) == 1
    assert flag not in server_argv(cpu, None, port=8123)
    monkeypatch.setattr(clients, "has_per_request_spec_metrics", lambda: False)  # vLLM 0.26, the GPU's
    monkeypatch.setattr(clients, "vllm_version", lambda: (0, 26, 0))
    assert request_acceptance({"choices": []}).startswith("vLLM 0.26.0 reports acceptance only in /metrics")


def test_curl_command_is_the_seeds_check():
    fake = Namespace(base_url="http://127.0.0.1:9", model="smollm2-135m-instruct")
    words = shlex.split(curl_command(fake))
    assert words[:2] == ["curl", "http://127.0.0.1:9/v1/completions"]
    body = json.loads(words[words.index("-d") + 1])
    assert body == {"model": "smollm2-135m-instruct", "prompt": "Write a Python script to read a CSV file:",
                    "max_tokens": 200, "temperature": 0}


def test_serve_flags_build_the_config():
    args = Namespace(method="ngram", num_spec_tokens=4, prompt_lookup_max=5, prompt_lookup_min=2)
    assert config_from_args(args, get_profile("cpu-tiny")) == configs.ngram(4, 5, 2)
    args.method = "none"
    assert config_from_args(args, get_profile("cpu-tiny")) is None


def test_bad_config_caught_by_speclab_starts_nothing():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(ConfigError, match="positive integer"):
        with serve(PROFILES["cpu-tiny"], {"method": "ngram", "num_speculative_tokens": 0}):
            pass
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_prometheus_spelling_variants_parse_alike():
    text = """# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0"} 10.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 2.0
"""
    plain = text.replace("vllm:", "vllm_").replace("_total", "")
    assert from_prometheus(text) == from_prometheus(plain)
    assert from_prometheus(plain).accepted_per_pos == (6, 2)


# ---------------------------------------------------------------- failures (before the shared server starts)

@pytest.mark.server
def test_config_rejected_by_vllm_fails_with_its_own_message():
    before = {p.pid for p in _my_vllm_processes()}
    bad = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 2, "prompt_lookup_min": 5}
    with pytest.raises(ServerError) as info:
        with serve(PROFILES["cpu-tiny"], bad, enforce_eager=True, validate=False):
            pytest.fail("vLLM accepted prompt_lookup_min > prompt_lookup_max")
    message = str(info.value)
    assert "exited during start-up" in message.splitlines()[0]
    assert "prompt_lookup_min=5 must be <= prompt_lookup_max=2" in message  # pydantic's words, from the log
    assert {p.pid for p in _my_vllm_processes()} <= before


@pytest.mark.server
def test_killing_the_server_mid_load_fails_every_client_clearly():
    prompts = loadtest.chat_prompts("workloads", 4)
    box = {}
    with serve(PROFILES["cpu-tiny"], None, enforce_eager=True) as s:
        assert s.counters().num_drafts == 0  # no speculation: the counters stay at zero
        worker = threading.Thread(target=lambda: box.update(levels=loadgen.run_load(
            s.base_url, s.model, prompts, [2], 6, max_tokens=512, timeout=300)))
        worker.start()
        deadline = time.monotonic() + 120
        while metric_values(s.metrics_text()).get("num_requests_running", 0) < 1:
            assert time.monotonic() < deadline, "the load never reached the engine"
            time.sleep(0.2)
        os.killpg(s.pid, signal.SIGKILL)  # a crash: API server, EngineCore and worker at once
        killed = time.monotonic()
        worker.join(timeout=60)
        assert not worker.is_alive(), "a client hung after the server died"
        assert time.monotonic() - killed < 30
    [level] = box["levels"]
    assert len(level.requests) == 6 and level.succeeded + level.failed == 6
    assert sorted(r.index for r in level.requests) == list(range(6))
    assert level.failed >= 4  # the kill lands while the first two are in flight; the rest cannot connect
    clear = ("cannot connect", "the server closed the connection", "the stream ended before")
    assert all(r.error.startswith(clear) for r in level.requests if not r.ok), level.errors()
    assert group_processes(s.pid) == []


@pytest.mark.server
def test_ctrl_c_inside_the_block_stops_the_whole_group():
    # Python's own Ctrl-C handler with SIGINT unblocked, as a script or a terminal has them. In one
    # full-suite run a SIGINT sent to the process (os.kill) interrupted nothing, though the test passed
    # alone: a process-directed signal may be taken by any thread, so the block gets it as
    # signal.raise_signal sends it, to the main thread itself.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        _interrupt_a_served_block()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)


def _interrupt_a_served_block():
    with pytest.raises(KeyboardInterrupt):
        with serve(PROFILES["cpu-tiny"], None, enforce_eager=True) as s:
            members = s.processes()
            assert any("EngineCore" in " ".join(p.cmdline()) for p in members)
            signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends
            time.sleep(30)
            pytest.fail("SIGINT did not interrupt the block")
    assert group_processes(s.pid) == []
    assert not [p for p in members if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


STARTER = """
import sys, time
from speclab.models.profiles import PROFILES
from speclab.serving.server import start
s = start(PROFILES["cpu-tiny"], None, enforce_eager=True)
print(s.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.server
def test_a_server_dies_with_the_process_that_started_it():
    """A starter killed by SIGKILL (a restarted Jupyter kernel) runs no atexit or finally: the server must
    still go, engine included, instead of holding memory and its port."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        pid = int(starter.stdout.readline())
        members = group_processes(pid)
        assert any("EngineCore" in " ".join(p.cmdline()) for p in members)
    finally:
        starter.kill()
        starter.wait()
    deadline = time.monotonic() + 60
    while group_processes(pid) and time.monotonic() < deadline:
        time.sleep(1)
    left = group_processes(pid)
    for p in left:  # leave nothing behind, even when the test fails
        p.kill()
    assert left == [], f"still running after the starter died: {[p.cmdline()[:3] for p in left]}"


# ---------------------------------------------------------------- one shared n-gram server

@pytest.fixture(scope="module")
def server():
    with serve(PROFILES["cpu-tiny"], configs.ngram(K), enforce_eager=True) as s:
        yield s
    assert group_processes(s.pid) == [], "processes of the server's group outlived it"


@pytest.mark.server
def test_health_and_model_list(server):
    assert httpx.get(f"{server.base_url}/health", timeout=5).status_code == 200
    assert [m.id for m in server.client().models.list()] == [server.model]
    names = " ".join(" ".join(p.cmdline()) for p in server.processes())
    assert "EngineCore" in names  # the engine runs in the server's own process group


@pytest.mark.server
def test_completion_chat_and_streaming_agree(server):
    client = server.client()
    plain = client.completions.create(model=server.model, prompt=REPEAT, max_tokens=TOKENS, temperature=0,
                                      extra_body=FIXED_LENGTH)
    assert plain.usage.completion_tokens == TOKENS
    streamed = stream_timed(client, server.model, prompt=REPEAT, max_tokens=TOKENS, extra_body=FIXED_LENGTH)
    assert streamed.text == plain.choices[0].text  # greedy: streaming changes nothing
    assert streamed.output_tokens == TOKENS
    assert 0 < streamed.ttft <= streamed.latency and streamed.tpot > 0
    messages = [{"role": "user", "content": "Name three fruits."}]
    chat = client.chat.completions.create(model=server.model, messages=messages, max_tokens=TOKENS, temperature=0)
    assert chat.choices[0].message.content
    chat_streamed = stream_timed(client, server.model, messages=messages, max_tokens=TOKENS)
    assert chat_streamed.text == chat.choices[0].message.content


@pytest.mark.server
def test_curl_check_answers(server):
    proc = subprocess.run(curl_command(server, max_tokens=TOKENS), shell=True, capture_output=True, text=True,
                          timeout=120)
    answer = json.loads(proc.stdout)
    assert answer["model"] == server.model and answer["usage"]["completion_tokens"] == TOKENS
    assert answer["choices"][0]["text"]


@pytest.mark.server
def test_metrics_show_accepted_tokens(server):
    before = server.counters()
    server.client().completions.create(model=server.model, prompt=REPEAT, max_tokens=32, temperature=0,
                                       extra_body=FIXED_LENGTH)
    text = server.metrics_text()
    assert "vllm:spec_decode_num_accepted_tokens_total" in text and 'position="2"' in text
    run = from_prometheus(text) - before
    assert run.num_drafts > 0 and run.num_accepted_tokens > 0
    assert len(run.accepted_per_pos) == K and sum(run.accepted_per_pos) == run.num_accepted_tokens
    assert run.num_draft_tokens <= K * run.num_drafts
    assert metric_values(text)["generation_tokens_total"] >= 32


@pytest.mark.server
def test_a_reply_carries_its_own_share_of_the_metrics_counters(server):
    # one request alone on the server: its metrics.speculative_decoding is the difference of two scrapes
    assert has_per_request_spec_metrics()  # vLLM 0.32 (the CPU build) has --per-request-spec-decode-metrics
    before = server.counters()
    body = {"model": server.model, "prompt": REPEAT, "max_tokens": 32, "temperature": 0, **FIXED_LENGTH}
    reply = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=120).json()
    run = server.counters() - before
    spec = reply["metrics"]["speculative_decoding"]
    assert (spec["num_spec_steps"], spec["num_draft_tokens"], spec["num_accepted_draft_tokens"]) == (
        run.num_drafts, run.num_draft_tokens, run.num_accepted_tokens)
    assert spec["num_accepted_draft_tokens"] > 0 and len(spec["acceptance_histogram"]) == K + 1
    assert request_acceptance(reply).startswith(f"this request: {run.num_drafts} verify steps, "
                                                f"{run.num_accepted_tokens} of {run.num_draft_tokens} drafted")


@pytest.mark.server
def test_small_load_every_request_answered(server):
    prompts = loadtest.chat_prompts("workloads", 4)
    levels = loadgen.run_load(server.base_url, server.model, prompts, [1, 2], 3, max_tokens=TOKENS, timeout=120)
    for level in levels:
        assert level.succeeded == 3 and level.failed == 0
        assert 0 < level.output_tokens <= 3 * TOKENS
        row = level.row()
        assert row["throughput_tok_s"] > 0 and row["ttft_p50_ms"] > 0 and row["tpot_p95_ms"] >= row["tpot_p50_ms"] > 0


@pytest.mark.server
def test_watch_headless_samples_while_the_work_runs(server):
    """At most ``samples``; once the work is done, one last sample that sees all of it, then stop."""
    prompts = loadtest.chat_prompts("workloads", 2)
    trace, levels = metrics_watch.watch(
        server, lambda: loadgen.run_load(server.base_url, server.model, prompts, [2], 2, max_tokens=TOKENS),
        samples=50, interval=0.5)
    assert 2 <= len(trace.samples) < 50 and len(trace.series()["t"]) == len(trace.samples) - 1
    assert levels[0].succeeded == 2
    assert trace.samples[-1].generation_tokens - trace.samples[0].generation_tokens > 0  # the last one saw the load
    idle, _ = metrics_watch.watch(server, None, samples=3, interval=0.1)  # no work: exactly ``samples``
    assert len(idle.samples) == 3
