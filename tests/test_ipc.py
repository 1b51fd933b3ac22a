"""vLLM's ZeroMQ sockets go to speclab's per-process folder, which closed engines leave empty."""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from speclab.vllm_layer import ipc
from speclab.models.profiles import PROFILES


def _sockets(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)} if folder.is_dir() else set()


def test_a_closed_engine_leaves_no_socket_in_tmp(target_dir):
    from speclab.vllm_layer.engine import open_engine

    before = _sockets(Path(tempfile.gettempdir()))
    with open_engine(PROFILES["cpu-tiny"], enforce_eager=True, max_model_len=256) as llm:
        assert os.environ[ipc.ENV] == str(ipc.folder())
        inside = _sockets(ipc.folder())
        assert llm.generate(["Hi"], use_tqdm=False)
    assert inside, "the engine's processes talk over sockets in speclab's folder"
    assert _sockets(Path(tempfile.gettempdir())) - before == set()
    assert list(ipc.folder().iterdir()) == []


def test_a_folder_of_a_dead_process_is_removed_and_ours_goes_at_exit():
    tmp_path = Path(tempfile.mkdtemp(prefix="sc"))  # short: a socket's path has at most 107 bytes
    dead = tmp_path / "ipc" / "999999999"
    dead.mkdir(parents=True)
    (dead / "stale-socket").write_text("")
    code = "from speclab.vllm_layer import ipc; print(ipc.folder())"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, SPECLAB_CACHE=str(tmp_path)),
                         capture_output=True, text=True, check=True).stdout.strip()
    assert Path(out).parent == tmp_path / "ipc"
    assert not dead.exists() and not Path(out).exists()
    shutil.rmtree(tmp_path)


def test_a_long_cache_path_puts_sockets_in_the_temporary_folder(monkeypatch):
    monkeypatch.setenv("SPECLAB_CACHE", "/tmp/" + "x" * 80)
    assert ipc._root() == Path(tempfile.gettempdir()) / "speclab-ipc"


def test_a_folder_the_user_chose_is_left_alone(monkeypatch, tmp_path):
    monkeypatch.setenv(ipc.ENV, str(tmp_path))
    (tmp_path / "theirs").write_text("")
    assert ipc.acquire() is False  # not ours to point elsewhere, nor to empty
    assert os.environ[ipc.ENV] == str(tmp_path)
    assert (tmp_path / "theirs").exists()
