"""The speclab command: bad input fails fast with one line; bench runs end to end on the CPU."""

import json
import subprocess
import sys

import pytest

from speclab.cli.main import main
from speclab.vllm_layer.engine import vllm_descendants


def run_cli(*args, timeout=1200):
    return subprocess.run([sys.executable, "-m", "speclab", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["bench", "--method", "ngram", "--num-spec-tokens", "0"], "must be a positive integer"),
    (["bench", "--method", "ngram", "--prompt-lookup-min", "6"], "prompt_lookup_min (6) > prompt_lookup_max (5)"),
    (["bench", "--method", "eagle", "--test"], "--test needs the reference settings"),
    (["bench", "--method", "ngram", "--profile", "gpu-llama8b"], "needs an NVIDIA GPU"),
    (["bench", "--method", "ngram", "--dataset-name", "custom"], "needs --dataset-path"),
    (["bench", "--method", "ngram", "--custom-mm-prompts"], "needs a multimodal target"),
    (["bench", "--method", "ngram", "--dataset-path", "no-such-set"], "no-such-set"),
    (["bench", "--method", "mtp"], "needs a target with MTP layers"),
    (["bench", "--method", "ngram", "--model-dir", "no-org/no-such-model"],
     "huggingface-cli download no-org/no-such-model"),
    (["migrate"], "usage: speclab migrate"),
    (["run", "--profile", "cpu-tiny", "--weights", "random"], "random weights are for gpu-llama8b and gpu-qwen3-8b"),
    (["run", "--profile", "gpu-qwen3-8b", "--weights", "random"], "needs an NVIDIA GPU"),
])
def test_bad_input_one_line_error(args, message, capsys, monkeypatch, target_dir):
    monkeypatch.setenv("SPECLAB_DEVICE", "cpu")
    monkeypatch.setenv("SPECLAB_WEIGHTS", "real")  # `run --weights` sets it: put it back afterwards
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_unknown_method_rejected_by_parser():
    proc = run_cli("bench", "--method", "lookahead")
    assert proc.returncode == 2 and "invalid choice: 'lookahead'" in proc.stderr


def test_migrate_command_line(capsys):
    assert main(["migrate", "--", "vllm", "serve", "m", "--speculative-model", "[ngram]", "--num-speculative-tokens",
                 "3"]) == 0
    out = capsys.readouterr().out
    assert """--speculative-config '{"method": "ngram", "num_speculative_tokens": 3}'""" in out


def test_models_list(capsys):
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert ("cpu-tiny" in out and "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" in out
            and "meta-llama/Llama-3.2-1B-Instruct" in out)


@pytest.mark.engine
def test_bench_test_mode_meets_the_cpu_reference(target_dir):
    """The CPU reference run of `speclab bench --test` (n-gram, 16 prompts, 128 tokens): acceptance within 20%
    of 2.40."""
    proc = run_cli("bench", "--method", "ngram", "--num-spec-tokens", "3", "--num-prompts", "16", "--output-len", "128",
                   "--enforce-eager", "--test")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    assert "Test passed! Expected AL: 2.4, got" in proc.stdout
    for line in ("total_num_output_tokens:", "num_drafts:", "num_accepted_tokens:", "mean acceptance length:",
                 "acceptance at token 2:"):
        assert line in proc.stdout


@pytest.mark.engine
def test_bench_with_a_baseline_reports_the_speedup_and_writes_the_record(tmp_path, target_dir):
    """`speclab bench --baseline --json`: the speedup and the greedy check in the report, the JSON record
    and its CSV beside it (a header, the baseline, the method)."""
    out = tmp_path / "bench.json"
    proc = run_cli("bench", "--method", "ngram", "--num-prompts", "2", "--output-len", "24", "--baseline",
                   "--enforce-eager", "--json", str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    assert "speedup:" in proc.stdout and "greedy outputs: " in proc.stdout
    record = json.loads(out.read_text())
    assert record["greedy_check"]["ok"] is True
    assert record["speedup"] > 0 and record["baseline"]["num_drafts"] == 0
    assert record["environment"]["vllm"].startswith("0.")
    assert out.with_suffix(".csv").read_text().count("\n") == 3  # header + baseline + ngram


@pytest.mark.engine
@pytest.mark.parametrize("command", [
    ["speclab", "bench", "--method", "ngram", "--enforce-eager", "--num-prompts", "2", "--output-len", "16"],
    # vLLM's own processes (the default layout runs the engine inside the command): they are what SIGTERM must reap
    ["speclab.measure.cpu_speed", "--layouts", "multiprocess", "--engines", "1", "--methods", "ngram", "--k", "1",
     "--prompts-per-category", "1", "--output-len", "16", "--enforce-eager"],
], ids=["bench", "cpu_speed"])
def test_sigterm_leaves_no_engine_behind(command, target_dir):
    """A command terminated while its engine runs: the engine core and workers go with it."""
    import signal
    import time

    import psutil

    proc = subprocess.Popen([sys.executable, "-m", *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 600
    engine = []
    while time.time() < deadline and not engine and proc.poll() is None:
        engine = vllm_descendants(parent)
        time.sleep(1)
    assert engine, "the engine never started"
    family = parent.children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) != 0
    _, alive = psutil.wait_procs(family, timeout=60)
    assert not alive, [p.pid for p in alive]


def _ctrl_c_as_in_a_terminal():
    """A test run started in the background (``make test &``) ignores SIGINT, and its children inherit that;
    a command typed in a terminal does not: give the command under test the terminal's default."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("whom", ["group", "parent"])
def test_one_ctrl_c_during_engine_start_exits_at_once(whom, target_dir):
    """Ctrl-C reaches the whole group from a terminal, `kill -INT` only the command: either way, while the
    engine is starting, the command ends within seconds with 130 and leaves no process behind.

    vLLM waits for its engine's ready message in a C-level poll that a signal delivered to another thread
    does not interrupt, and an engine process killed by the Ctrl-C never answers (speclab.vllm_layer.start_watch)."""
    import os
    import signal
    import time

    import psutil

    proc = subprocess.Popen([sys.executable, "-m", "speclab", "bench", "--method", "ngram", "--num-prompts", "2",
                             "--output-len", "16"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_ctrl_c_as_in_a_terminal)
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 300
    while time.time() < deadline and not vllm_descendants(parent) and proc.poll() is None:
        time.sleep(0.2)
    assert vllm_descendants(parent), "the engine process never appeared"
    family = parent.children(recursive=True)
    os.killpg(proc.pid, signal.SIGINT) if whom == "group" else proc.send_signal(signal.SIGINT)
    interrupted = time.time()
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("one Ctrl-C did not end the command within 30 s")
    assert code == 130 and time.time() - interrupted < 15
    assert "speclab: interrupted" in proc.stderr.read().splitlines()
    _, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, [p.pid for p in alive]


def test_ctrl_c_during_a_lesson_leaves_no_partial_notebook_and_frees_the_folder(tmp_path, target_dir):
    import os
    import signal
    import time

    import psutil

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "speclab", "run", "--only", "02", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_ctrl_c_as_in_a_terminal)
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 300
    def kernel():
        found = []
        for p in parent.children(recursive=True):
            try:
                found += [p] if "ipykernel" in " ".join(p.cmdline()) else []
            except psutil.Error:  # exited while we looked
                continue
        return found

    while time.time() < deadline and not kernel() and proc.poll() is None:
        time.sleep(0.2)
    assert kernel(), "the lesson's kernel never started"
    time.sleep(8)  # into the lesson's first cells (its engine runs inside the kernel)
    assert (out / ".speclab-run.pid").read_text() == str(proc.pid)  # the folder is held while the run works
    family = parent.children(recursive=True)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    _, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, [p.cmdline() for p in alive]
    assert not list(out.rglob("*.ipynb")) and not (out / ".speclab-run.pid").exists()
