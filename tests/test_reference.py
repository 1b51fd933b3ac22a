"""Reference runs: reading stored results into the lessons' tables, and recording a run folder as one."""

import base64
import io
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from speclab.errors import SpeclabError  # noqa: E402
from speclab.measure import reference  # noqa: E402

RESULTS = {"method": "eagle", "acceptance_length": 1.9138, "per_position_rates": [0.55, 0.25, 0.11],
           "by_category": {"code": {"speedup": 2.5}}}


def test_value_reads_dotted_paths_list_indices_and_functions():
    assert reference.value(RESULTS, "acceptance_length") == 1.9138
    assert reference.value(RESULTS, "per_position_rates.0") == 0.55
    assert reference.value(RESULTS, "per_position_rates.-1") == 0.11
    assert reference.value(RESULTS, "by_category.code.speedup") == 2.5
    assert reference.value(RESULTS, lambda r: r["per_position_rates"][1] / r["per_position_rates"][0]) == 0.25 / 0.55
    for missing in ("speedup", "per_position_rates.3", "by_category.chat.speedup", "method.x"):
        assert reference.value(RESULTS, missing) is None
    assert reference.value(RESULTS, lambda r: r["nothing"]) is None
    assert reference.value(None, "acceptance_length") is None


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """A reference folder with one cpu-tiny lesson stored, and no gpu-tiny one."""
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path / "reference")
    monkeypatch.delenv(reference.RECORDING_ENV, raising=False)
    folder = reference.folder("cpu-tiny")
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "04_eagle.json").write_text(json.dumps({**RESULTS, "speedup": 0.95}))
    (folder / "run.json").write_text(json.dumps({"profile": "cpu-tiny", "lessons": {"04_eagle": {
        "seconds": 41.0, "date": "2026-12-06T11:00:00+00:00", "hardware": "CPU: 2 cores, AMD EPYC (AVX2, AVX-512)",
        "environment": {"vllm": "0.32.0", "vllm_build": "cpu"}}}}))
    return folder


def test_table_puts_the_learners_run_beside_each_stored_reference(stored):
    rows = [("method", "method", "{}"), ("acceptance length", "acceptance_length", "{:.2f}"),
            ("speedup", "speedup", "{:.2f}x")]
    text = reference.table("04_eagle", {**RESULTS, "speedup": 1.234}, rows)
    lines = text.splitlines()
    assert lines[0].split() == ["your", "run", "cpu-tiny", "reference", "gpu-tiny", "reference"]
    assert lines[2].split() == ["acceptance", "length", "1.91", "1.91", "-"]
    assert lines[3].split() == ["speedup", "1.23x", "0.95x", "-"]
    assert "cpu-tiny: CPU: 2 cores, AMD EPYC (AVX2, AVX-512), vLLM 0.32.0 (cpu), 2026-12-06" in text
    assert "gpu-tiny: no stored reference" in text


def test_a_lessons_second_results_file_says_where_its_lesson_ran(stored):
    (stored / "results" / "04_second_table.json").write_text(json.dumps(RESULTS))
    assert reference.where("04_second_table", "cpu-tiny") == reference.where("04_eagle", "cpu-tiny")
    assert reference.where("04_second_table", "cpu-tiny").startswith("cpu-tiny: CPU: 2 cores")
    assert reference.where("05_mtp", "cpu-tiny") == "cpu-tiny: no stored reference"


def test_a_run_being_recorded_leaves_its_own_column_out(stored, monkeypatch):
    monkeypatch.setenv(reference.RECORDING_ENV, "cpu-tiny")
    head = reference.table("04_eagle", RESULTS, [("method", "method", "{}")], label="this run").splitlines()[0]
    assert head.split() == ["this", "run", "gpu-tiny", "reference"]


def test_compare_names_the_run_being_recorded(stored, monkeypatch, capsys):
    reference.compare("04_eagle", RESULTS, [("method", "method", "{}")])
    assert capsys.readouterr().out.split()[:2] == ["your", "run"]
    monkeypatch.setenv(reference.RECORDING_ENV, "gpu-tiny")
    reference.compare("04_eagle", RESULTS, [("method", "method", "{}")])
    assert capsys.readouterr().out.splitlines()[0].split() == ["this", "run", "(gpu-tiny", "reference)", "cpu-tiny",
                                                               "reference"]


def test_recorded_says_where_it_ran_and_how_to_record_what_is_missing(stored):
    rec = reference.recorded("04_eagle", profile="cpu-tiny")
    assert rec["speedup"] == 0.95 and rec["recorded_on"].startswith("CPU: 2 cores")
    assert rec["recorded_with"] == "vLLM 0.32.0"
    with pytest.raises(SpeclabError, match=r"speclab run --record --profile gpu-tiny --only 99"):
        reference.recorded("99_no_such_lesson")


def _png() -> bytes:
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1, 2, 3], [1.0, 0.6, 0.35, 0.2], marker="o", label="measured")
    ax.plot([0, 1, 2, 3], [1.0, 0.5, 0.25, 0.125], ls="--", label="i.i.d.")
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _run_folder(tmp_path, parameters=None):
    run = tmp_path / "run"
    (run / "notebooks").mkdir(parents=True)
    (run / "results").mkdir()
    png = base64.b64encode(_png()).decode()
    for stem in ("04_eagle", "05_mtp"):
        nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": "plot()", "execution_count": 1,
                         "outputs": [{"output_type": "display_data", "metadata": {},
                                      "data": {"image/png": png, "text/plain": "<Figure>"}}]}],
              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        (run / "notebooks" / f"{stem}.ipynb").write_text(json.dumps(nb))
    (run / "results" / "04_eagle.json").write_text(json.dumps({"speedup": 1.5}))
    (run / "results" / "05_mtp.json").write_text(json.dumps({"speedup": 0.3}))
    (run / "results" / "05_mtp_published.json").write_text(json.dumps({"k": 1}))
    summary = {"profile": "gpu-tiny", "weights": "real", "parameters": parameters or {},
               "finished": "2026-12-06T12:00:00+00:00", "environment": {"vllm": "0.26.0", "vllm_build": "cuda",
                                                                        "torch": "2.11.0"},
               "notebooks": [{"notebook": "04_eagle.ipynb", "ok": True, "seconds": 132.0, "error": None},
                             {"notebook": "05_mtp.ipynb", "ok": True, "seconds": 90.4, "error": None},
                             {"notebook": "06_medusa.ipynb", "ok": False, "seconds": 3.0, "error": "boom"}]}
    (run / "summary.json").write_text(json.dumps(summary))
    return run, png


def test_record_stores_passing_lessons_compacted_with_an_opening_cell(stored, tmp_path):
    run, png = _run_folder(tmp_path)
    assert reference.record(run, "GPU: NVIDIA H200") == ["04_eagle", "05_mtp"]
    folder = reference.folder("gpu-tiny")
    assert sorted(p.name for p in (folder / "results").iterdir()) == ["04_eagle.json", "05_mtp.json",
                                                                      "05_mtp_published.json"]
    assert not (folder / "notebooks" / "06_medusa.ipynb").exists()  # a failed lesson is not a reference
    nb = json.loads((folder / "notebooks" / "04_eagle.ipynb").read_text())
    opening = nb["cells"][0]["source"]
    for fact in ("`gpu-tiny`", "GPU: NVIDIA H200", "vLLM 0.26.0 (cuda build)", "torch 2.11.0", "2026-12-06",
                 "took 132 s", "speclab run --record --profile gpu-tiny"):
        assert fact in opening
    stored_png = base64.b64decode(nb["cells"][1]["outputs"][0]["data"]["image/png"])
    original = Image.open(io.BytesIO(base64.b64decode(png)))
    assert len(stored_png) < len(base64.b64decode(png))
    assert Image.open(io.BytesIO(stored_png)).size == original.size
    info = reference.run_info("gpu-tiny")
    assert info["lessons"]["05_mtp"]["seconds"] == 90.4
    assert info["lessons"]["04_eagle"]["hardware"] == "GPU: NVIDIA H200"
    assert reference.table("04_eagle", None, [("speedup", "speedup", "{:.1f}x")]).splitlines()[1].split() == [
        "speedup", "-", "0.9x", "1.5x"]


def test_recording_one_lesson_again_keeps_the_others_and_one_opening_cell(stored, tmp_path):
    run, _ = _run_folder(tmp_path)
    reference.record(run, "GPU: NVIDIA H200")
    summary = json.loads((run / "summary.json").read_text())
    summary["notebooks"] = summary["notebooks"][:1]
    summary["finished"] = "2026-12-07T08:00:00+00:00"
    (run / "summary.json").write_text(json.dumps(summary))
    recorded_nb = json.loads((reference.folder("gpu-tiny") / "notebooks" / "04_eagle.ipynb").read_text())
    (run / "notebooks" / "04_eagle.ipynb").write_text(json.dumps(recorded_nb))  # already has an opening cell
    assert reference.record(run, "GPU: NVIDIA H100") == ["04_eagle"]
    info = reference.run_info("gpu-tiny")["lessons"]
    assert info["04_eagle"]["date"].startswith("2026-12-07") and info["05_mtp"]["date"].startswith("2026-12-06")
    cells = json.loads((reference.folder("gpu-tiny") / "notebooks" / "04_eagle.ipynb").read_text())["cells"]
    assert ["reference-run" in c["metadata"].get("tags", []) for c in cells] == [True, False]
    assert "NVIDIA H100" in cells[0]["source"]


def test_a_run_on_random_weights_is_stored_as_results_and_figures_under_its_own_name(stored, tmp_path):
    run, png = _run_folder(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "profile": "gpu-llama8b", "weights": "random"}))
    (run / "figures").mkdir()
    (run / "figures" / "04_per_position.png").write_bytes(base64.b64decode(png))
    (run / "figures" / "06_medusa.png").write_bytes(base64.b64decode(png))  # its lesson failed
    assert reference.record(run, "GPU: NVIDIA H100") == ["04_eagle", "05_mtp"]
    folder = reference.folder("gpu-llama8b-random")
    assert not (folder / "notebooks").exists() and not reference.folder("gpu-llama8b").exists()
    assert [p.name for p in (folder / "figures").iterdir()] == ["04_per_position.png"]
    stored_png = (folder / "figures" / "04_per_position.png").read_bytes()
    assert len(stored_png) < len(base64.b64decode(png))
    assert json.loads((folder / "results" / "04_eagle.json").read_text()) == {"speedup": 1.5}
    assert reference.run_info("gpu-llama8b-random")["lessons"]["05_mtp"]["hardware"] == "GPU: NVIDIA H100"


def test_record_refuses_a_run_with_parameters_or_no_summary(stored, tmp_path):
    run, _ = _run_folder(tmp_path, parameters={"k": 5})
    with pytest.raises(SpeclabError, match="a reference runs at the defaults"):
        reference.record(run, "GPU: NVIDIA H200")
    with pytest.raises(SpeclabError, match="no summary.json"):
        reference.record(tmp_path / "nothing", "CPU")
    assert not reference.folder("gpu-tiny").exists()


def _notebook(cells) -> dict:
    return {"cells": [{"cell_type": t, "metadata": {}, "source": s, **({"outputs": [], "execution_count": None}
                                                                        if t == "code" else {})} for t, s in cells],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_stale_tells_prose_from_code_and_sync_mends_only_prose(stored, tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    notebooks = reference.folder("cpu-tiny") / "notebooks"
    notebooks.mkdir()
    recorded_nb = _notebook([("markdown", "# 04 EAGLE\nold words"), ("code", "x = 1")])
    recorded_nb["cells"].insert(0, reference.opening_cell("cpu-tiny", {"seconds": 3}))
    (notebooks / "04_eagle.ipynb").write_text(json.dumps(recorded_nb))
    (lessons / "04_eagle.ipynb").write_text(json.dumps(_notebook([("markdown", "# 04 EAGLE\nnew words"),
                                                                  ("code", "x = 1")])))
    assert reference.stale("cpu-tiny", lessons) == {"04_eagle": "prose changed"}
    assert reference.sync_prose("cpu-tiny", lessons) == ["04_eagle"]
    assert reference.stale("cpu-tiny", lessons) == {}
    cells = json.loads((notebooks / "04_eagle.ipynb").read_text())["cells"]
    assert "Reference run" in cells[0]["source"] and cells[1]["source"] == "# 04 EAGLE\nnew words"
    (lessons / "04_eagle.ipynb").write_text(json.dumps(_notebook([("markdown", "# 04 EAGLE\nnew words"),
                                                                  ("code", "x = 2")])))
    assert reference.stale("cpu-tiny", lessons) == {"04_eagle": "code changed"}
    assert reference.sync_prose("cpu-tiny", lessons) == []  # a code change needs a new run, not a copy


@pytest.mark.parametrize("profile", reference.SHOWN)
def test_stored_reference_notebooks_are_the_current_lessons(profile):
    from speclab.cli.runner import NOTEBOOKS

    assert reference.stale(profile, NOTEBOOKS) == {}, "run python -m speclab.measure.reference"


@pytest.mark.parametrize("profile", reference.SHOWN)
def test_every_lesson_has_a_reference_run_with_its_results(profile):
    from speclab.cli.runner import series

    lessons = {b.stem for b in series()}
    folder = reference.folder(profile)
    assert {p.stem for p in (folder / "notebooks").glob("*.ipynb")} == lessons
    assert set(reference.run_info(profile)["lessons"]) == lessons
    assert {p.stem for p in (folder / "results").glob("*.json")} >= lessons  # every lesson saves its numbers


def test_wall_times_list_every_stored_run_with_its_hardware():
    table = reference.wall_times().splitlines()
    header = table[0].split()
    assert header[0] == "lesson" and {"cpu-tiny", "gpu-tiny"} <= set(header[1:])
    row = next(line.split() for line in table if line.startswith("10_serving_and_monitoring"))
    seconds = reference.run_info("gpu-tiny")["lessons"]["10_serving_and_monitoring"]["seconds"]
    assert row[1 + 2 * header[1:].index("gpu-tiny")] == f"{seconds:.0f}"  # "NNN s" cells: two words each
    assert any(line.startswith("gpu-tiny: GPU:") for line in table)


def test_the_readme_quotes_the_gpu_series_wall_time_it_points_to():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    minutes = sum(e["seconds"] for e in reference.run_info("gpu-tiny")["lessons"].values()) / 60
    assert f"about {minutes:.0f} minutes on one H100 with `gpu-tiny`" in readme


def test_a_recorded_run_that_is_stopped_keeps_the_lessons_that_finished(stored, tmp_path, monkeypatch):
    """``speclab run --record`` stores each lesson as it passes: a run stopped in its third lesson (Ctrl-C, or
    a machine taken back) leaves the first two recorded, each with its own finish time."""
    from speclab.cli import runner

    run, _ = _run_folder(tmp_path)  # the executed notebooks and results a fake execute hands back
    books = [tmp_path / "lessons" / name for name in ("04_eagle.ipynb", "05_mtp.ipynb", "06_medusa.ipynb")]
    finished = []

    def execute(book, out_dir, params, **_):
        if book.name == "06_medusa.ipynb":
            raise KeyboardInterrupt
        assert out_dir == run / "notebooks" and (out_dir / book.name).is_file()
        finished.append(book.name)
        return True, 10.0 * len(finished), None

    monkeypatch.setattr(runner, "series", lambda only=None: books)
    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "device_name", lambda: "GPU: NVIDIA H100")
    monkeypatch.setattr(runner, "versions", lambda: {"vllm": "0.26.0", "vllm_build": "cuda", "torch": "2.11.0"})
    with pytest.raises(KeyboardInterrupt):
        runner.main_job("gpu-tiny", run, None, {}, record=True)
    lessons = reference.run_info("gpu-tiny")["lessons"]
    assert {name: entry["seconds"] for name, entry in lessons.items()} == {"04_eagle": 10.0, "05_mtp": 20.0}
    assert lessons["04_eagle"]["date"] <= lessons["05_mtp"]["date"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is False and [e["notebook"] for e in summary["notebooks"]] == finished
