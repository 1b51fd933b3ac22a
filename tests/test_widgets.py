"""Optional controls: headless runs build nothing; a live kernel gets one control per parameter and a Run button."""

from speclab.measure import widgets


def test_headless_builds_nothing():
    assert widgets.controls(lambda **kw: kw, {"k": 3}, interactive=False) is None


def test_controls_call_the_run_function_with_the_chosen_values():
    calls = []

    def run(category="code", temperature=0.0, max_tokens=64, k=3):
        calls.append((category, temperature, max_tokens, k))
        return f"{category} {temperature} {max_tokens} {k}"

    box = widgets.build(run, {"category": "code", "temperature": 0.0, "max_tokens": 64, "k": 3},
                        {"category": ["code", "chat"], "temperature": [0.0, 0.5, 1.0],
                         "max_tokens": [16, 64], "k": [1, 2, 3, 4]})
    category, temperature, max_tokens, k, button, out = box.children
    assert [w.description for w in (category, temperature, max_tokens, k)] == [
        "category", "temperature", "max_tokens", "k"]
    # whole labels in one column: "temperature" (11 characters) sets the width of all four
    assert {w.style.description_width for w in (category, temperature, max_tokens, k)} == {"13ch"}
    category.value, temperature.value, k.value = "chat", 0.5, 4
    button.click()
    assert calls == [("chat", 0.5, 64, 4)]


def test_interactive_controls_are_drawn_once(monkeypatch):
    """``controls`` displays its box itself and returns None, so a cell ending with it draws one box."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    assert widgets.controls(lambda k=3: k, {"k": 3}, interactive=True) is None
    assert [type(o).__name__ for o in shown] == ["VBox"]


def test_a_returned_figure_is_shown_and_closed(monkeypatch):
    """A lesson's run function returns its plot: Run redraws it below the controls and leaves no figure open."""
    import IPython.display
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from speclab.measure import plots

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    plt.close("all")
    box = widgets.build(lambda k=3: plots.acceptance_lengths({"code": 2.5}, k=k), {"k": 3})
    *_, button, out = box.children
    button.click()
    button.click()
    assert [type(o).__name__ for o in shown] == ["Figure", "Figure"] and plt.get_fignums() == []


def test_returned_text_is_printed_not_shown_as_a_repr(monkeypatch, capsys):
    """A run function that returns lines of text: the learner reads the lines, not a quoted string with \\n."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    *_, button, out = widgets.build(lambda k=3: f"k={k}: one\nk={k}: two", {"k": 3}).children
    button.click()
    assert shown == [] and capsys.readouterr().out.endswith("k=3: one\nk=3: two\n")  # after clear_output's codes


def test_the_prediction_plot_rings_the_chosen_k_and_names_the_best():
    import matplotlib.pyplot as plt

    from speclab.algorithms import theory
    from speclab.measure import plots

    fig = plots.predicted_speedup(0.8, 3, 0.05)
    ax = fig.axes[0]
    curve, *_, ring = ax.get_lines()
    assert list(curve.get_xdata()) == list(range(1, 17)) and curve.get_ydata()[2] == theory.speedup(0.8, 3, 0.05)
    assert list(ring.get_xdata()) == [3] and f"best k={theory.best_k(0.8, 0.05)}" in ax.get_title()
    plt.close(fig)
