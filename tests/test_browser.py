"""The lessons in a real browser: JupyterLab on loopback, headless Chromium, the controls clicked.

A workshop runs the lessons in JupyterLab, where ``interactive = True`` draws ipywidgets controls.
This test starts JupyterLab with a token on 127.0.0.1, opens lessons 01 and 13 (sliders), 09
(dropdowns) and 07 (its measured sweeps, the theory's curve and the warm playground's two engines) with
``interactive = True`` in headless Chromium (Debian's ``chromium``, driven by Playwright's Python client),
runs every cell, checks that the controls are drawn once, moves a control, presses Run and checks what
the output says. A screenshot of each lands in the test's folder. Without a Chromium
(``make test`` installs Debian's where the machine allows) it is skipped with the reason.
"""

import ast
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from speclab.files import NOTEBOOKS

pytestmark = pytest.mark.notebook

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT_MS = 120_000


def _chromium() -> str:
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        pytest.skip("no Chromium on this machine: `apt-get install chromium` (make test does it where it can)")
    pytest.importorskip("playwright", reason="Playwright's Python client is not installed (pip install playwright)")
    return found


def _lesson(name: str, folder: Path, **parameters) -> str:
    """A copy of a lesson whose parameters cell sets ``parameters`` (interactive = True among them)."""
    book = json.loads((NOTEBOOKS / name).read_text())
    cell = next(c for c in book["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    cell["source"] = "".join(cell["source"]) + "".join(f"\n{k} = {v!r}" for k, v in parameters.items())
    for c in book["cells"]:
        if c["cell_type"] == "code":
            c["outputs"], c["execution_count"] = [], None
    (folder / name).write_text(json.dumps(book))
    return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a folder of lesson copies; yields (base url, token, folder)."""
    browser = _chromium()
    folder = tmp_path_factory.mktemp("lab")
    port, token = _free_port(), secrets.token_hex(16)
    log = open(folder / "jupyterlab.log", "w")
    settings = folder / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)  # no "get notified about Jupyter news?" toast over the screenshots
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                          "checkForUpdates": False}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ServerApp.port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}",
         "--LabApp.news_url=", "--ServerApp.terminals_enabled=False",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env=dict(os.environ, JUPYTER_CONFIG_DIR=str(folder / ".jupyter")))
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited: {(folder / 'jupyterlab.log').read_text()[-1500:]}")
            time.sleep(0.5)
    else:
        pytest.fail("JupyterLab did not answer within 120 s")
    try:
        yield base, token, folder, browser
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def page(lab):
    from playwright.sync_api import sync_playwright

    _, _, _, browser = lab
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=browser, headless=True, args=["--no-sandbox"])
        tab = chromium.new_page(viewport={"width": 1400, "height": 1000})
        tab.set_default_timeout(TIMEOUT_MS)
        yield tab
        chromium.close()


def _session(lab, name: str) -> dict:
    """The notebook's session: its kernel's id and state (earlier tests' kernels may still be open)."""
    base, token, _, _ = lab
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as r:
        return next(s for s in json.load(r) if s["path"].endswith(name))


def _saved_cells(page, path: Path) -> list[dict]:
    """Save the open notebook (Ctrl+S) and read its code cells back from disk."""
    saved = path.stat().st_mtime_ns
    page.locator(".jp-Notebook:visible").first.click()
    page.keyboard.press("Control+s")
    deadline = time.time() + 30
    while path.stat().st_mtime_ns == saved and time.time() < deadline:
        time.sleep(0.2)
    while True:
        try:
            return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        except json.JSONDecodeError:  # caught mid-write: read it again
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def _run_all(page, lab, name: str, timeout_s: float = TIMEOUT_MS / 1000) -> None:
    """Open the notebook, run every cell from the Run menu, and check on disk (saved every few seconds, as
    JupyterLab draws only the cells in view) that every code cell ran without an error."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    base, token, folder, _ = lab
    page.goto(f"{base}/lab/tree/{name}?token={token}&reset")  # reset: no tab of an earlier test comes back
    page.locator(".jp-Notebook:visible .jp-CodeCell").first.wait_for()
    select = page.locator("dialog").get_by_role("button", name="Select", exact=True)  # "Select Kernel", if asked
    with contextlib.suppress(PlaywrightTimeout):
        select.click(timeout=10_000)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()
    deadline = time.time() + timeout_s
    while True:  # save every few seconds until the file shows every code cell run, or an error stopped the run
        time.sleep(3)
        cells = _saved_cells(page, folder / name)
        ran = all(c["execution_count"] for c in cells) and _session(lab, name)["kernel"]["execution_state"] == "idle"
        failed = any(o["output_type"] == "error" for c in cells for o in c["outputs"])
        if ran or failed or time.time() > deadline:
            break
    assert all(c["execution_count"] for c in cells), "not every cell ran"
    errors = [o for c in cells for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, errors[0]["ename"] + ": " + errors[0]["evalue"]


def _controls(page, expected: int = 1) -> list:
    """The lesson's widget boxes that hold a Run button: each control set must be drawn once."""
    boxes = page.locator(".jp-Notebook:visible .jp-OutputArea-output .widget-vbox")
    boxes = boxes.filter(has=page.get_by_role("button", name="Run"))
    assert boxes.count() == expected, f"{boxes.count()} control sets drawn, expected {expected}"
    return [boxes.nth(i) for i in range(expected)]


def _press_run(box) -> str:
    box.scroll_into_view_if_needed()
    out = box.locator(".widget-output")
    before = out.inner_text()
    box.get_by_role("button", name="Run").click()
    deadline = time.time() + TIMEOUT_MS / 1000
    while out.inner_text() in ("", before) and time.time() < deadline:
        time.sleep(0.2)
    return out.inner_text()


def _plots(box) -> int:
    """How many images the box's output shows, once the first has arrived (a plot lands after the text)."""
    images = box.locator(".widget-output img")
    images.first.wait_for(timeout=30_000)
    images.first.evaluate("img => img.decode()")  # drawn, not only placed: the screenshot shows the plot
    return images.count()


def _set_slider(page, box, index: int, value: str) -> None:
    """Type a new value into the box's slider number ``index`` (its readout), as a learner can."""
    readout = box.locator(".widget-readout").nth(index)
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(value)
    page.keyboard.press("Enter")


def _explored(text: str) -> tuple[int, float, list[float]]:
    found = re.search(r"k=(\d+): acceptance length ([\d.]+); per position (\[.*?\])", text)
    assert found, text
    return int(found[1]), float(found[2]), ast.literal_eval(found[3])


def test_lesson_01_sliders_change_what_run_measures(lab, page):
    name = _lesson("01_how_it_works.ipynb", lab[2], interactive=True, num_samples=2000, num_tokens=400)
    _run_all(page, lab, name)
    box, = _controls(page)
    first = _press_run(box)
    assert _plots(box) == 1, "Run did not draw the per-position plot"
    _set_slider(page, box, 0, "7")  # k's slider
    second = _press_run(box)
    assert _plots(box) == 1, "the plot was not redrawn in place"
    # explore() prints "k=4: acceptance length 2.345; per position [...]" and returns the plot
    (k1, length1, rates1), (k2, length2, rates2) = (_explored(text) for text in (first, second))
    assert (k1, len(rates1), k2, len(rates2)) == (4, 4, 7, 7), (first, second)
    assert length2 > length1  # more drafted tokens, more accepted
    page.screenshot(path=str(lab[2] / "01_how_it_works.png"), full_page=False)


def test_lesson_09_dropdowns_change_the_plan(lab, page):
    name = _lesson("09_memory_planning.ipynb", lab[2], interactive=True)
    _run_all(page, lab, name)
    box, = _controls(page)
    first = _press_run(box)
    box.locator("select").first.select_option("80")
    second = _press_run(box)
    assert "24" in first and "80" in second and first != second, (first, second)
    page.screenshot(path=str(lab[2] / "09_memory_planning.png"), full_page=False)


def test_lesson_13_tree_budget_slider_changes_the_acceptance(lab, page):
    # the toy sections only (no engine): a budget of 1 drafts one token a step, so a chain accepts at most 2
    name = _lesson("13_token_trees.ipynb", lab[2], interactive=True, vllm_methods=[], budgets=[1, 4],
                   temperatures=[0.0, 1.0], num_tokens=300, num_samples=500)
    _run_all(page, lab, name)
    box, = _controls(page)
    first = ast.literal_eval(_press_run(box))  # explore() prints {tree: acceptance length}, returns its bars
    _set_slider(page, box, 0, "1")  # the budget slider
    second = ast.literal_eval(_press_run(box))
    assert _plots(box) == 1, "the acceptance bars were not redrawn in place"
    assert set(first) == set(second) == {"greedy chain", "sampled chain", "dynamic tree"}, (first, second)
    assert all(1.0 <= length <= 2.0 for length in second.values()), second  # one draft token: at most 2
    assert first["dynamic tree"] > second["dynamic tree"], (first, second)  # a budget of 8 accepts more
    page.screenshot(path=str(lab[2] / "13_token_trees.png"), full_page=False)


def _shut_down(lab, kernel: str) -> None:
    base, token, _, _ = lab
    request = urllib.request.Request(f"{base}/api/kernels/{kernel}?token={token}", method="DELETE")
    urllib.request.urlopen(request, timeout=60).close()


def test_lesson_07_sweep_viewer_theory_and_warm_playground(lab, page):
    import psutil

    # two k and two temperatures on two prompts: a baseline and two n-gram engines, then the playground's two
    name = _lesson("07_tuning.ipynb", lab[2], interactive=True, k_values=[1, 3], k_for_temperature=3,
                   temperatures=[0.0, 1.0], num_prompts=2, output_len=32, enforce_eager=True)
    _run_all(page, lab, name, timeout_s=900)
    viewer, theory, play = _controls(page, expected=3)

    # the measured sweep: k=3 was measured at T=0 and, as k_for_temperature, at every temperature
    both = _press_run(viewer)
    assert both.startswith("k=3, T=0:") and "\nk=3, T=0.0:" in both, both
    viewer.locator("select").first.select_option("1")
    one = _press_run(viewer)
    assert one.startswith("k=1, T=0:") and "\n" not in one.strip(), one  # k=1 ran at T=0 only

    # the theory: k=1 turns one draft token into 1 + a tokens a step; the speedup curve is redrawn in place
    def tokens_per_step(text: str) -> float:
        return float(re.search(r"tokens per step ([\d.]+)", text)[1])

    at_k3 = tokens_per_step(_press_run(theory))
    _set_slider(page, theory, 1, "1")  # a, k, c: k's slider
    at_k1 = tokens_per_step(_press_run(theory))
    a = float(theory.locator(".widget-readout").nth(0).inner_text())
    assert at_k1 == pytest.approx(1 + a, abs=0.006) and at_k3 > at_k1, (a, at_k1, at_k3)
    assert _plots(theory) == 1, "the speedup curve was not redrawn in place"

    # the playground: warm engines re-measure a turn of the knobs (a new k reopening the speculative engine
    # is test_playground's)
    first = _press_run(play)
    assert re.match(r"[^,]+, T=0, 64 tokens, ngram k=3: acceptance length [\d.]+, .*greedy outputs", first), first
    play.locator("select").nth(2).select_option("16")  # category, temperature, max_tokens, k
    second = _press_run(play)
    assert ", T=0, 16 tokens, ngram k=3: acceptance length" in second, second
    page.screenshot(path=str(lab[2] / "07_tuning.png"), full_page=False)

    # closing the kernel closes its engines: nothing of them is left running
    kernel = _session(lab, name)["kernel"]["id"]  # its process names its connection file, kernel-<id>.json
    process = next(p for p in psutil.process_iter(["cmdline"]) if any(kernel in a for a in p.info["cmdline"] or []))
    family = [process, *process.children(recursive=True)]
    assert len(family) > 1, "the playground's engines should run as the kernel's child processes"
    _shut_down(lab, kernel)
    _, alive = psutil.wait_procs(family, timeout=60)
    assert not alive, [p.pid for p in alive]
