"""One gate before any engine: each bad input is one line on stderr, exit code 2, before vLLM is imported.

The CLI cases run the real command in a subprocess. Their time bound proves vLLM was not imported:
importing it takes 7-16 s here, while a refused command line took 0.1-0.5 s on this 2-core machine
with a long vLLM job beside it (load ~3; under 2 s on any quiet one); 8 s leaves room for a busier machine.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from speclab.vllm_layer import configs, validation
from speclab.vllm_layer.configs import ConfigError
from speclab.models.profiles import PROFILES

FAST_S = 8.0
ENV = dict(os.environ, SPECLAB_DEVICE="cpu", SPECLAB_WEIGHTS="real")


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    """Files a new user might hand over: prompts saved as UTF-16, a drafter with a broken config.json."""
    root = tmp_path_factory.mktemp("bad")
    (root / "busy").mkdir()  # a run folder that a live speclab run (this test process) holds
    (root / "busy" / ".speclab-run.pid").write_text(str(os.getpid()))
    (root / "utf16.txt").write_bytes("hello\n".encode("utf-16"))
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text('{"vocab_size": 49152,\n')
    return root


# (argv, message fragment); "{bad}" is replaced by the fixture's folder
CLI_CASES = [
    (["bench", "--output-len", "0"], "--output-len must be >= 1, got 0"),
    (["bench", "--temp", "-1"], "--temp must be in [0, 2]"),
    (["bench", "--temp", "nan"], "--temp must be in [0, 2]"),
    (["bench", "--top-p", "0"], "--top-p must be in (0, 1]"),
    (["bench", "--top-k", "-2"], "--top-k must be -1 or 0 (off) or >= 1"),
    (["bench", "--tp", "0"], "--tp must be >= 1"),
    (["bench", "--num-prompts", "0"], "--num-prompts must be >= 1"),
    (["bench", "--max-num-seqs", "0"], "--max-num-seqs must be >= 1"),
    (["bench", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization must be in (0, 1]"),
    (["bench", "--method", "ngram", "--num-spec-tokens", "0"], "must be a positive integer, got 0"),
    (["bench", "--method", "eagle", "--num-spec-tokens", "-1"], "must be a positive integer, got -1"),
    (["bench", "--method", "ngram", "--prompt-lookup-min", "6"], "prompt_lookup_min (6) > prompt_lookup_max (5)"),
    (["bench", "--method", "ngram", "--prompt-lookup-min", "0", "--prompt-lookup-max", "0"],
     "must be a whole number >= 1, got 0"),
    (["bench", "--method", "lookahead"], "invalid choice: 'lookahead'"),
    (["bench", "--model-dir", "/nonexistent"], "--model-dir /nonexistent: the folder does not exist"),
    (["bench", "--method", "eagle3", "--eagle-dir", "./no-such-head"],
     "--eagle-dir ./no-such-head: the folder does not exist"),
    (["bench", "--method", "draft_model", "--draft-model", "~/no/such/draft"],
     "--draft-model ~/no/such/draft: the folder does not exist"),
    (["bench", "--method", "draft_model", "--draft-model", "{bad}/broken"], "config.json is not valid JSON"),
    (["bench", "--num-spec-tokens", "1000"], "--num-spec-tokens 1000: at most 32"),
    (["bench", "--method", "ngram", "--num-spec-tokens", "20", "--output-len", "16"],
     "draft fewer tokens than --output-len (16) generates"),
    (["serve", "--num-spec-tokens", "64"], "--num-spec-tokens 64: at most 32"),
    (["bench", "--json", "/nonexistent/out.json"], "folder /nonexistent does not exist"),
    (["bench", "--json", "{bad}"], "that is a folder; name a file in it"),
    (["bench", "--json", "{bad}/out.csv"], "name a .json file (e.g. {bad}/out.json)"),
    (["bench", "--json", ""], "--json is empty: name a file"),
    (["bench", "--json", "/proc/out.json"], "cannot write in that folder"),
    (["bench", "--dataset-name", "custom", "--dataset-path", "{bad}/utf16.txt"],
     "utf16.txt is not UTF-8 text (byte 0xff at offset 0)"),
    (["bench", "--dataset-name", "custom"], "needs --dataset-path"),
    (["bench", "--dataset-name", "custom", "--dataset-path", "mtbench_style"],
     "is a bundled set: use --dataset-name bundled"),
    (["bench", "--dataset-name", "hf", "--dataset-path", "{bad}/utf16.txt"],
     "is a local path: use --dataset-name custom"),
    (["bench", "--method", "ngram", "--profile", "gpu-llama8b"], "needs an NVIDIA GPU"),
    (["bench", "--profile", "no-such-profile"], "unknown profile 'no-such-profile'"),
    (["run", "-p", "k", "[unclosed"], "-p k '[unclosed' is not a YAML value"),
    (["run", "-p", "kk", "3"], "-p kk: no selected notebook takes it (did you mean 'k'?)"),
    (["run", "-p", "k", "2.5"], "-p k 2.5: expected a whole number"),
    (["run", "-p", "k", "0"], "-p k 0: must be >= 1"),
    (["run", "-p", "method", "eagel"], "unknown method 'eagel' (did you mean 'eagle'?)"),
    (["run", "-p", "methods", "[ngram, lookahead]"], "unknown method 'lookahead'"),
    (["run", "-p", "enforce_eager", "maybe"], "expected true or false"),
    (["run", "--only", "02", "-p", "enforce_eager", "maybe"], "expected true or false"),  # its default is None
    (["run", "-p", "profile", "gpu-tiny"], "-p profile: use --profile instead"),
    (["run", "--only", "02", "-p", "method", "eagle"], "-p method: no selected notebook takes it"),
    (["run", "--only", "99"], "--only '99' matches no notebook"),
    (["run", "--only", ""], "--only '' matches no notebook"),
    (["run", "--out", "{bad}/utf16.txt"], "that is a file, not a folder"),
    (["run", "--out", "{bad}/busy"], "another speclab run (pid {pid}) is writing there"),
    (["run", "--record", "-p", "k", "5"], "--record stores a reference run at the lessons' defaults"),
    (["run", "--profile", "gpu-llama8b"], "profile 'gpu-llama8b' needs an NVIDIA GPU"),
    (["run", "--profile", "bogus"], "unknown profile 'bogus'"),
    (["serve", "--port", "99999"], "--port must be in 1-65535, got 99999"),
    (["serve", "--port", "0"], "--port must be in 1-65535, got 0"),
    (["serve", "--host", "10.1.2.3"], "--host 10.1.2.3: speclab checks the server on 127.0.0.1"),
    (["serve", "--num-spec-tokens", "0"], "must be a positive integer, got 0"),
    (["serve", "--startup-timeout", "0"], "--startup-timeout must be > 0"),
    (["serve", "--log", "{bad}"], "that is a folder; name a file in it"),
    (["migrate"], "usage: speclab migrate"),
    (["migrate", "--", "vllm", "serve", "m", "--speculative-model", "x", "--num-speculative-tokens", "five"],
     "--num-speculative-tokens five: expected a whole number"),
    (["migrate", "vllm serve m --speculative-model [ngram] --num-speculative-tokens 0"],
     "must be a positive integer, got 0"),
    (["migrate", "--", "vllm", "serve", "m", "--speculative-model", "[ngram]", "--num-speculative-tokens", "3",
      "--ngram-prompt-lookup-max", "2", "--ngram-prompt-lookup-min", "4"],
     "prompt_lookup_min (4) > prompt_lookup_max (2)"),
    (["migrate", "vllm serve 'm --speculative-model x"], "cannot split the command (No closing quotation)"),
]


def run_cli(argv, timeout=60.0, env=None):
    """The console command in its own session: on a timeout the whole group goes (an engine included)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "speclab", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**ENV, **(env or {})}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{argv} still ran after {timeout} s: it got past the gate")
    return proc.returncode, out, err, time.perf_counter() - started


@pytest.mark.parametrize("argv, message", CLI_CASES, ids=[" ".join(a)[:60] for a, _ in CLI_CASES])
def test_bad_command_line_one_fast_line(argv, message, bad):
    before = _files(bad)
    code, _, err, seconds = run_cli([a.replace("{bad}", str(bad)) for a in argv])
    lines = err.strip().splitlines()
    message = message.replace("{bad}", str(bad)).replace("{pid}", str(os.getpid()))
    assert code == 2 and len(lines) == 1 and message in lines[0], (code, err)
    assert seconds < FAST_S, f"{seconds:.1f} s: vLLM (7-16 s to import) was imported before the error"
    assert _files(bad) == before, "a refused command wrote nothing"


def _files(root) -> dict:
    """Every path under ``root``, with each file's modification time (a write-probe touches folders only)."""
    return {str(p): p.stat().st_mtime_ns if p.is_file() else None for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("name, value, message", [
    ("SPECLAB_DEVICE", "tpu", "SPECLAB_DEVICE=tpu: use cpu or cuda"),
    ("SPECLAB_PROFILE", "bogus", "SPECLAB_PROFILE: unknown profile 'bogus'"),
    ("SPECLAB_KV_CACHE_GIB", "-1", "SPECLAB_KV_CACHE_GIB=-1: the KV cache per engine in GiB"),
    ("SPECLAB_KV_CACHE_GIB", "abc", "SPECLAB_KV_CACHE_GIB=abc: the KV cache per engine in GiB"),
    ("SPECLAB_WEIGHTS", "fake", "SPECLAB_WEIGHTS=fake: use real or random"),
    ("SPECLAB_ENGINE_IN_PROCESS", "yes", "SPECLAB_ENGINE_IN_PROCESS=yes: use 1"),
    ("SPECLAB_LOG", "/tmp", "SPECLAB_LOG=/tmp: that is a folder"),
])
def test_every_speclab_variable_is_checked_in_one_line(name, value, message):
    for argv in (["bench"], ["run", "--only", "00"], ["serve"], ["env"]):
        code, _, err, seconds = run_cli(argv, env={name: value})
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and message in lines[0], (argv, err[-800:])
        assert seconds < FAST_S


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has an NVIDIA driver")
def test_cuda_forced_on_a_machine_without_a_gpu_is_refused():
    no_driver = {"SPECLAB_DEVICE": "cuda", "PATH": "/usr/bin:/bin"}
    code, _, err, _ = run_cli(["bench", "--profile", "gpu-tiny"], env=no_driver)
    assert code == 2 and "SPECLAB_DEVICE=cuda: this machine has no NVIDIA driver" in err


@pytest.mark.parametrize("value, message", [
    ("{bad}/utf16.txt", "SPECLAB_CACHE={bad}/utf16.txt: that is a file, not a folder"),
    ("/proc/speclab", "SPECLAB_CACHE=/proc/speclab: cannot write in /proc"),
])
def test_a_cache_that_cannot_be_written_is_one_line(value, message, bad):
    value, message = value.replace("{bad}", str(bad)), message.replace("{bad}", str(bad))
    for argv in (["env"], ["bench"], ["models", "fetch"]):
        proc = subprocess.run([sys.executable, "-m", "speclab", *argv], capture_output=True, text=True,
                              env=dict(ENV, SPECLAB_CACHE=value), timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (argv, proc.stderr[-800:])


@pytest.mark.parametrize("argv, message", [
    (["--max-model-len", "10"], "the longest prompt has 104 tokens and the context holds 10: use a set of shorter "
                                "prompts, or raise --max-model-len (at most 8192)"),
    (["--max-model-len", "10000000"], "--max-model-len 10000000: the model's own limit is 8192 tokens"),
    (["--output-len", "100000"], "--output-len 100000: the longest prompt (104 tokens) and 100000 new tokens exceed "
                                 "the context of 2048 tokens; use --output-len 1944 or less"),
], ids=["context too short", "beyond the model", "output too long"])
def test_lengths_are_checked_against_the_context_before_an_engine(argv, message, target_dir):
    """These need the tokenizer (the prompts' lengths), so they come after the gate, but before any engine:
    vLLM would start one and then fail on the first request with a long traceback."""
    code, _, err, seconds = run_cli(["bench", "--method", "ngram", *argv])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], (code, err)
    assert "vllm" not in err.lower() and seconds < 60


def test_more_prompts_than_the_set_has_is_said_once(target_dir):
    code, out, err, _ = run_cli(["bench", "--num-prompts", "1000", "--max-model-len", "10"])  # stops before an engine
    assert out.splitlines() == ["--num-prompts 1000: mtbench_style has 16 prompts; running 16"] and code == 2


def test_gate_imports_neither_vllm_nor_torch(bad):
    """Every case in one process: afterwards neither vLLM nor torch is in sys.modules."""
    cases = [[a.replace("{bad}", str(bad)) for a in argv] for argv, _ in CLI_CASES]
    script = ("import contextlib, io, json, sys\nfrom speclab.cli.main import main\ncodes = []\n"
              f"for argv in {cases!r}:\n"
              "    with contextlib.redirect_stderr(io.StringIO()):\n"
              "        try:\n            codes.append(main(argv))\n"
              "        except SystemExit as stop:\n            codes.append(stop.code)\n"
              "print(json.dumps({'codes': codes, 'vllm': 'vllm' in sys.modules, 'torch': 'torch' in sys.modules}))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"codes": [2] * len(cases), "vllm": False, "torch": False}


def test_migrate_takes_one_string_and_says_when_nothing_changed():
    code, out, err, _ = run_cli(["migrate", "vllm serve m --speculative-model '[ngram]' --num-speculative-tokens 3"])
    assert (code == 0 and err == ""
            and '--speculative-config \'{"method": "ngram", "num_speculative_tokens": 3}\'' in out)
    code, out, err, _ = run_cli(["migrate", "--", "vllm", "serve", "m", "--port", "8000"])
    assert code == 0 and out.startswith("vllm serve m --port 8000\n") and "# nothing to migrate" in out


def _bad_configs(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    return [
        (lambda: validation.validate("ngram"), "a speculative config is a dict, not str 'ngram'"),
        (lambda: validation.validate(["ngram", 3]), "a speculative config is a dict, not list"),
        (lambda: configs.ngram(prompt_lookup_max="5"), "prompt_lookup_max must be a whole number >= 1, got '5'"),
        (lambda: configs.ngram(prompt_lookup_max=2.5), "prompt_lookup_max must be a whole number >= 1, got 2.5"),
        (lambda: configs.ngram(k="3"), "must be a positive integer, got '3'"),
        (lambda: configs.build("ngram", 3, model="x"), "method ngram takes no option 'model'"),
        (lambda: configs.build("eagle3", 3, modle="x"), "takes no option 'modle' (did you mean 'model'?)"),
        (lambda: configs.build("eagel", 3), "unknown method 'eagel' (did you mean 'eagle'?)"),
        (lambda: validation.validate({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4,
                                   "prompt_lookup_max": 2}), "prompt_lookup_min (4) > prompt_lookup_max (2)"),
        (lambda: validation.validate({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 0,
                                   "prompt_lookup_max": 0}), "must be a whole number >= 1, got 0"),
        (lambda: validation.validate({"method": "ngram", "num_speculative_tokens": 0}),
         "must be a positive integer, got 0"),
        (lambda: validation.validate({"method": "draft_model", "num_speculative_tokens": 3}),
         "method draft_model needs a draft model"),
        (lambda: validation.validate({"method": "eagle3", "num_speculative_tokens": 3}),
         "method eagle3 needs its drafter"),
        (lambda: validation.validate({"method": "medusa", "num_speculative_tokens": 3}),
         "method medusa needs its heads"),
        (lambda: validation.validate(configs.draft_model("/no/such/drafter")),
         "drafter folder /no/such/drafter does not exist"),
        (lambda: validation.validate(configs.eagle3("./no-such-head", target=None)),
         "drafter folder ./no-such-head does not exist"),
        (lambda: validation.validate(configs.ngram(3), target="/no/such/target"),
         "target model folder /no/such/target does not exist"),
        (lambda: validation.validate(None, target="~/no/such/target"),
         "target model folder ~/no/such/target does not exist"),
        (lambda: validation.validate(configs.draft_model(str(broken))), "config.json is not valid JSON"),
        (lambda: validation.validate(configs.mtp(2), target=str(broken)), "config.json is not valid JSON"),
        (lambda: validation.validate({**configs.ngram(3), "prompt_lookup_maxx": 4}),
         "unknown speculative config key 'prompt_lookup_maxx' (did you mean 'prompt_lookup_max'?)"),
        (lambda: validation.validate(configs.ngram(3), tensor_parallel_size=0),
         "tensor_parallel_size must be a whole number >= 1, got 0"),
        (lambda: validation.validate(configs.draft_model("d", quantization="int8")),
         "quantization 'int8' is not a method vLLM has: use 'fp8'"),
        (lambda: validation.validate(configs.draft_model("d", max_model_len=0)),
         "max_model_len must be a whole number >= 1, got 0"),
        (lambda: validation.validate({**configs.ngram(3), "enforce_eager": "yes"}),
         "enforce_eager must be True or False"),
        (lambda: validation.validate(configs.eagle("e", target=None, draft_tensor_parallel_size=0)),
         "draft_tensor_parallel_size must be a whole number >= 1, got 0"),
        (lambda: validation.validate(configs.eagle("e", target=None, draft_tensor_parallel_size=2)),
         "draft_tensor_parallel_size=2 with target tensor_parallel_size=1: vLLM accepts only 1"),
        (lambda: configs.for_profile(PROFILES["cpu-tiny"], "bogus"), "unknown method 'bogus'"),
    ]


def test_validate_refuses_each_bad_config_in_one_line(tmp_path):
    for call, fragment in _bad_configs(tmp_path):
        with pytest.raises(ConfigError) as err:
            call()
        message = str(err.value)
        assert fragment in message and "\n" not in message, (fragment, message)


def test_validate_keeps_good_configs(tmp_path):
    """What the builders and the lessons pass still passes, and comes back unchanged."""
    head = tmp_path / "head"
    head.mkdir()
    for config in (configs.ngram(3), configs.draft_model("meta-llama/Llama-3.2-1B-Instruct", 2, max_model_len=2048),
                   configs.eagle3(str(head), target=None), configs.eagle("local:drafter-eagle", target=None),
                   configs.mtp(1), configs.draft_model("d", quantization="fp8"),
                   configs.for_profile(PROFILES["cpu-tiny"], "eagle3", 3),
                   {**configs.ngram(3), "disable_padded_drafter_batch": True}):
        assert validation.validate(config, version=(0, 32, 0)) == config
    assert validation.validate(None, target="no-org/no-such-model") is None  # an id, not a path: the Hub decides
