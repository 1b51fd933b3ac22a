"""Optional ipywidgets controls over a notebook's parameters.

A lesson's parameters cell stays the source of truth: papermill sets it, a headless run uses
it and never builds a widget. With ``interactive = True`` a learner gets sliders and
dropdowns over the same names, and a button that calls the notebook's run function with the
chosen values. (``@interact`` is avoided on purpose: it has been reported to hang papermill.)
"""

from __future__ import annotations

from typing import Callable


def _widget_for(name: str, value, choices=None, label_width: str = "initial"):
    import ipywidgets as w

    label = {"description": name, "style": {"description_width": label_width}}  # the whole name, not "temperat..."
    if choices is not None:
        return w.Dropdown(options=list(choices), value=value, **label)
    if isinstance(value, bool):
        return w.Checkbox(value=value, **label)
    if isinstance(value, int):
        return w.IntSlider(value=value, min=1, max=max(8, value * 2), **label)
    if isinstance(value, float):
        return w.FloatSlider(value=value, min=0.0, max=max(1.5, value * 2), step=0.05, **label)
    return w.Text(value=str(value), **label)


def build(run: Callable[..., object], values: dict, choices: dict | None = None):
    """One control per name in ``values`` (name -> current value) and a Run button, in a box.

    ``choices`` maps a name to its allowed values (a dropdown). Pressing "Run" calls
    ``run(**chosen)`` and shows what it returns in an output area below the controls: a figure is
    redrawn there (and closed, so that repeated runs do not pile figures up), text printed, anything else
    displayed.
    """
    import ipywidgets as w
    from IPython.display import display

    choices = choices or {}
    width = f"{max(map(len, values), default=0) + 2}ch"  # one column for every label: the controls line up
    fields = {name: _widget_for(name, v, choices.get(name), width) for name, v in values.items()}
    button = w.Button(description="Run", button_style="primary")
    out = w.Output()

    def on_click(_):
        out.clear_output()
        with out:
            result = run(**{name: f.value for name, f in fields.items()})
            if isinstance(result, str):  # text reads as text, not as a quoted repr with \n in it
                print(result)
            elif result is not None:
                display(result)
            if hasattr(result, "savefig"):  # a matplotlib figure: shown once, then released
                import matplotlib.pyplot as plt

                plt.close(result)

    button.on_click(on_click)
    return w.VBox([*fields.values(), button, out])


def controls(run: Callable[..., object], values: dict, choices: dict | None = None,
             interactive: bool = False) -> None:
    """Show ``build``'s controls when ``interactive``; else do nothing.

    It displays the box and returns nothing, so a cell that ends with this call draws the
    controls once (a returned box would be drawn a second time as the cell's value).
    """
    if interactive:
        from IPython.display import display

        display(build(run, values, choices))
