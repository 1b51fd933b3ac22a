"""The main job's runner: the time-left estimate (arithmetic against hand-computed values, and where it
reads from) and what a lesson's kernel gets."""

import json
import os
from pathlib import Path

import pytest

from speclab.cli import runner

BOOKS = [Path(f"{n}.ipynb") for n in ("00_a", "01_b", "02_c")]


def test_time_left_scales_the_remaining_lessons_by_the_pace_so_far():
    expected = {"00_a": 100, "01_b": 100, "02_c": 300}
    assert runner.time_left(BOOKS, 0, 0.0, expected) == 500  # nothing done yet: the reference times
    # 200 s for a 100 s lesson: pace (200 + 120) / (100 + 120), not 2: one lesson says little yet
    assert runner.time_left(BOOKS, 1, 200.0, expected) == pytest.approx(400 * 320 / 220)
    assert runner.time_left(BOOKS, 2, 100.0, expected) == pytest.approx(300 * 220 / 320)  # faster than the reference
    # a 30 s lesson that took 60 s (a cold start) moves a 30-minute estimate by a fifth, not double
    assert runner.time_left(BOOKS, 1, 60.0, {"00_a": 30, "01_b": 900, "02_c": 900}) == pytest.approx(1800 * 180 / 150)
    hour = {"00_a": 3600, "01_b": 100, "02_c": 100}  # after an hour of lessons the pace is nearly the measured one
    assert runner.time_left(BOOKS, 1, 7200.0, hour) == pytest.approx(200 * 7320 / 3720)
    assert runner.time_left(BOOKS, 0, 0.0, {"00_a": 10, "02_c": 30}) == 60  # 01_b counts as the median, 20
    assert runner.time_left(BOOKS, 0, 0.0, {}) is None


def test_the_progress_line_says_how_long_is_left():
    line = runner._progress(2, BOOKS, 200.0, {"00_a": 100, "01_b": 100, "02_c": 300})
    assert line == "[2/3] 01_b.ipynb ... (elapsed 200 s, about 10 min left)"  # 400 s x 320 / 220
    assert runner._progress(1, BOOKS, 0.0, {}) == "[1/3] 00_a.ipynb ... (elapsed 0 s)"


def _summary(folder: Path, profile: str, seconds: float, parameters=None):
    folder.mkdir(parents=True)
    record = {"profile": profile, "notebooks": [{"notebook": "00_a.ipynb", "ok": True, "seconds": seconds},
                                                {"notebook": "01_b.ipynb", "ok": False, "seconds": 1.0}]}
    if parameters is not None:
        record["parameters"] = parameters
    (folder / "summary.json").write_text(json.dumps(record))


def test_expected_times_come_from_this_machines_newest_default_run(tmp_path):
    _summary(tmp_path / "20261101-000000", "cpu-tiny", 10.0)
    _summary(tmp_path / "20261102-000000", "cpu-tiny", 20.0, parameters={})
    _summary(tmp_path / "20261103-000000", "cpu-tiny", 99.0, parameters={"output_len": 16})  # not the defaults
    _summary(tmp_path / "20261104-000000", "gpu-tiny", 5.0)  # another profile
    (tmp_path / "20261105-000000").mkdir()  # a run that has not finished
    assert runner.expected_seconds("cpu-tiny", tmp_path) == {"00_a": 20.0}  # failed lessons do not count
    assert runner.expected_seconds("gpu-tiny", tmp_path) == {"00_a": 5.0}


def test_without_a_run_the_reference_runs_times_are_used(tmp_path):
    from speclab.measure import reference

    stored = runner.expected_seconds("cpu-tiny", tmp_path)
    assert stored == {lesson: e["seconds"] for lesson, e in reference.run_info("cpu-tiny")["lessons"].items()}
    assert set(stored) == {b.stem for b in runner.series()}  # every lesson has a time
    assert runner.expected_seconds("gpu-synthetic", tmp_path) == {}


def test_a_lesson_kernel_imports_this_checkout(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", f"/opt/site{os.pathsep}{runner.REPO_ROOT}")
    env = runner.kernel_env(tmp_path / "00.log")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(runner.REPO_ROOT), "/opt/site"]  # first, once
    assert env[runner.logs.ENV] == str(tmp_path / "00.log")
    monkeypatch.delenv("PYTHONPATH")
    assert runner.kernel_env(tmp_path / "00.log")["PYTHONPATH"] == str(runner.REPO_ROOT)


def test_lesson_engines_run_in_the_kernel_unless_the_caller_chose(monkeypatch, tmp_path):
    monkeypatch.delenv(runner.IN_PROCESS_ENV, raising=False)
    assert runner.kernel_env(tmp_path / "00.log")[runner.IN_PROCESS_ENV] == "1"
    monkeypatch.setenv(runner.IN_PROCESS_ENV, "0")
    assert runner.kernel_env(tmp_path / "00.log")[runner.IN_PROCESS_ENV] == "0"


def test_recorded_gpu_results_say_where_they_ran():
    from speclab.measure import reference

    rec = reference.recorded("14_suffix_decoding")
    assert "NVIDIA H" in rec["recorded_on"] and rec["recorded_with"] == "vLLM 0.26.0"
