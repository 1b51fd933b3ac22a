"""A lesson's figures and headline numbers, saved where the run summary finds them.

``save_figure`` and ``save_results`` put them under ``figures/`` and ``results/`` of the run folder,
atomically (``speclab.files``), and mark anything measured on random weights (``speclab.models.random_weights``)
so that no such number is mistaken for a real model's.
"""

from __future__ import annotations

import io
from pathlib import Path

from ..files import write_atomic, write_json
from ..models import random_weights


def save_figure(fig, name: str, output_dir: str | Path = ".") -> Path:
    """Save a matplotlib figure as ``<output_dir>/figures/<name>.png``, atomically.

    A figure measured on random weights says so in its corner (``speclab.models.random_weights``)."""
    if random_weights.label():
        fig.text(0.995, 0.005, "random weights: timings only", ha="right", va="bottom", fontsize=7, color="tab:red")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return write_atomic(Path(output_dir) / "figures" / f"{name}.png", buf.getvalue())


def save_results(name: str, data: dict, output_dir: str | Path = ".") -> Path:
    """Save a notebook's headline numbers as ``<output_dir>/results/<name>.json`` for the run summary.

    Results measured on random weights carry ``"weights": speclab.models.random_weights.LABEL``."""
    if random_weights.label():
        data = {"weights": random_weights.label(), **data}
    return write_json(Path(output_dir) / "results" / f"{name}.json", data)
