"""vLLM's start-up output goes to a log file: this process's, and that of the processes it starts."""

import os
import subprocess
import sys

import pytest

from speclab.vllm_layer import logs


def test_python_fd_and_child_output_go_to_the_log_and_nothing_else(tmp_path, capfd):
    path = tmp_path / "vllm.log"
    with logs.to_log(path):
        print("python stdout")
        print("python stderr", file=sys.stderr)
        os.write(2, b"fd 2, as C++ code writes\n")
        subprocess.run([sys.executable, "-c", "import sys; print('child out'); print('child err', file=sys.stderr)"])
    print("after the block")
    out, err = capfd.readouterr()
    assert out == "after the block\n" and err == ""
    text = path.read_text()
    for line in ("python stdout", "python stderr", "fd 2, as C++ code writes", "child out", "child err"):
        assert line in text


def test_an_error_keeps_its_message_and_names_the_log(tmp_path):
    path = tmp_path / "vllm.log"
    with pytest.raises(RuntimeError, match="Engine core initialization failed") as info:
        with logs.to_log(path):
            print("ValueError: max_model_len 8192 exceeds the model's 4096", file=sys.stderr)
            print("a last line that names nothing", file=sys.stderr)
            raise RuntimeError("Engine core initialization failed. See root cause above.")
    note = info.value.__notes__[0]
    assert str(path) in note and "ValueError: max_model_len 8192 exceeds the model's 4096" in note


def test_a_warning_that_came_last_does_not_pass_for_the_cause(tmp_path):
    path = tmp_path / "vllm.log"
    with pytest.raises(ValueError) as info, logs.to_log(path):
        with logs.to_log(path):  # an engine start inside an import: one note, not a note about a note
            print("Triton is installed, but doesn't include CPU backend. Disabling Triton.", file=sys.stderr)
            raise ValueError("--per-request-spec-decode-metrics requires speculative decoding to be enabled")
    assert info.value.__notes__ == [f"vLLM's output is in {path}"]


def test_the_log_path_follows_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(logs.ENV, str(tmp_path / "lesson.log"))
    assert logs.log_path() == tmp_path / "lesson.log"
    monkeypatch.delenv(logs.ENV)
    assert logs.log_path().name == f"vllm-{os.getpid()}.log"


def test_a_handler_made_inside_keeps_writing_to_the_log_after_the_block(tmp_path, capfd):
    """vLLM builds its logging handler on sys.stdout at import time, i.e. inside to_log; what it logs
    later (an engine's shutdown) must land in the log, not raise 'I/O operation on closed file'."""
    import logging

    path = tmp_path / "vllm.log"
    logger = logging.getLogger("speclab-test-late-logger")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    with logs.to_log(path):
        handler = logging.StreamHandler(sys.stdout)
        logger.addHandler(handler)
        logger.info("at import")
    try:
        logger.info("at shutdown")
    finally:
        logger.removeHandler(handler)
    out, err = capfd.readouterr()
    assert "Logging error" not in err and out == ""
    assert "at import" in path.read_text() and "at shutdown" in path.read_text()


def test_stderr_alone_can_go_to_the_log(tmp_path, capfd):
    """The main job keeps its progress lines on stdout while a kernel's warnings go to the lesson log."""
    path = tmp_path / "lesson.log"
    with logs.to_log(path, stdout=False):
        print("progress")
        print("kernel warning", file=sys.stderr)
        subprocess.run([sys.executable, "-c",
                        "import sys; print('child out'); print('child warning', file=sys.stderr)"])
    out, err = capfd.readouterr()
    assert out == "progress\nchild out\n" and err == ""
    assert "kernel warning" in path.read_text() and "child warning" in path.read_text()
    assert "progress" not in path.read_text()
