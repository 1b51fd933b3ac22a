"""speclab's vLLM plugin: registered where vLLM looks, and active only in vLLM's child processes."""

import atexit
import gc
import multiprocessing
from importlib.metadata import entry_points

from speclab.vllm_layer import vllm_plugin


def test_vllm_finds_the_plugin_in_its_group():
    found = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
    assert found.get("speclab") == "speclab.vllm_layer.vllm_plugin:register"


def test_the_process_that_opens_engines_is_left_alone():
    vllm_plugin.register()
    assert not vllm_plugin._registered


def _child(path):
    # atexit runs last-in first-out: this report runs after whatever register() adds
    atexit.register(lambda: open(path, "w").write(f"{vllm_plugin._registered} {gc.get_freeze_count()}"))
    vllm_plugin.register()
    vllm_plugin.register()  # vLLM may load plugins more than once in a process


def test_a_child_process_freezes_its_heap_at_exit(tmp_path):
    report = tmp_path / "child.txt"
    proc = multiprocessing.get_context("spawn").Process(target=_child, args=(str(report),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    registered, frozen = report.read_text().split()
    assert registered == "True" and int(frozen) > 0
