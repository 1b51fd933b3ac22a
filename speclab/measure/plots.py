"""Figures every lesson shares: per-position acceptance, acceptance length, speedup.

Each function takes plain numbers (dicts keyed by a run label) and returns a matplotlib
Figure, so that notebooks decide where it goes (``report.save_figure``) and tests can check
what was drawn without a display.
"""

from __future__ import annotations

import matplotlib

matplotlib.use(matplotlib.get_backend() if "inline" in matplotlib.get_backend() else "Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402

from ..algorithms import theory  # noqa: E402
from ..algorithms.memory import GIB  # noqa: E402


def per_position(rates: dict[str, list[float]], predicted: dict[str, list[float]] | None = None,
                 title: str = "Per-position acceptance"):
    """Bars: measured P(first i+1 draft tokens accepted); dashed lines: a model's prediction."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    labels = list(rates)
    width = 0.8 / max(len(labels), 1)
    for j, label in enumerate(labels):
        xs = [i + 1 + (j - (len(labels) - 1) / 2) * width for i in range(len(rates[label]))]
        ax.bar(xs, rates[label], width=width, label=label)
    for label, values in (predicted or {}).items():
        ax.plot(range(1, len(values) + 1), values, "k--", marker="o", lw=1, label=f"{label} (predicted)")
    longest = max([len(v) for v in rates.values()] + [len(v) for v in (predicted or {}).values()] + [1])
    ax.set_xticks(range(1, longest + 1))
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def acceptance_lengths(lengths: dict[str, float], k: int | None = None, title: str = "Mean acceptance length"):
    """One bar per run; the ceiling k+1 (everything accepted) drawn when k is given."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    names = list(lengths)
    ax.bar(names, [lengths[n] for n in names], color="tab:blue")
    ax.axhline(1.0, color="grey", lw=1, ls=":", label="no speculation (1 token/step)")
    if k:
        ax.axhline(k + 1, color="tab:green", lw=1, ls="--", label=f"ceiling k+1 = {k + 1}")
    for i, n in enumerate(names):
        ax.text(i, lengths[n], f"{lengths[n]:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("tokens per target step")
    ax.set_title(title)
    ax.legend(fontsize=8)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    return fig


def sweep(xs: list, series: dict[str, list[float]], xlabel: str, ylabel: str, title: str = "",
          baseline: float | None = None):
    """Lines over a swept parameter (k, temperature, concurrency); a horizontal baseline optional."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, ys in series.items():
        style = "--" if "predict" in label or "theory" in label or "model" in label else "-"
        ax.plot(xs, ys, style, marker="o", label=label)
    if baseline is not None:
        ax.axhline(baseline, color="grey", lw=1, ls=":", label="baseline")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def predicted_speedup(a: float, k: int, c: float, k_max: int = 16):
    """The i.i.d. theory's speedup over k for one per-token acceptance ``a`` and cost ratio ``c``, the chosen k
    ringed and the best k named: what a lesson's prediction controls redraw."""
    ks = list(range(1, max(k_max, k) + 1))
    chosen = theory.speedup(a, k, c)
    fig = sweep(ks, {f"theory, a={a:.2f}, c={c:.2f}": [theory.speedup(a, kk, c) for kk in ks]}, "k (draft tokens)",
                "predicted speedup", title=f"k={k}: {chosen:.2f}x predicted; best k={theory.best_k(a, c, ks[-1])}",
                baseline=1.0)
    ax = fig.axes[0]
    ax.plot([k], [chosen], "o", ms=12, mfc="none", color="tab:red", label=f"k={k}")
    ax.legend(fontsize=8)
    return fig


def grouped_bars(table: dict[str, dict[str, float]], ylabel: str, title: str = "", reference: float | None = None,
                 points: dict[str, dict[str, list[float]]] | None = None):
    """table[group][series] -> value, e.g. acceptance length per workload category and method;
    points[group][series] -> the values behind a bar (one per prompt), drawn as dots on it."""
    groups = list(table)
    series = sorted({s for g in groups for s in table[g]})
    fig, ax = plt.subplots(figsize=(max(7.2, 0.25 * len(groups) * len(series) + 2.0), 3.8))
    width = 0.8 / max(len(series), 1)
    for j, s in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, [table[g].get(s, 0.0) for g in groups], width=width, label=s)
        for x, g in zip(xs, groups):
            values = (points or {}).get(g, {}).get(s, [])
            ax.plot([x] * len(values), values, "o", color="black", markersize=2.5, alpha=0.7)
    if reference is not None:
        ax.axhline(reference, color="grey", lw=1, ls=":")
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def tree_mask(mask, labels: list[str], title: str = "Which drafted tokens each node sees"):
    """A token tree's attention mask as a grid: row i is the node being scored, a filled cell j a node
    it attends to (itself and its ancestors); the context, seen by every node, is left out."""
    fig, ax = plt.subplots(figsize=(1.2 + 0.42 * len(labels), 1.0 + 0.42 * len(labels)))
    ax.imshow(mask, cmap="Blues", vmin=0, vmax=1.4)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("attends to")
    ax.set_ylabel("node")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def speculation_under_load(concurrency: list[int], throughput: dict[str, list[float]],
                           speedups: list[float | None] | dict[str, list[float | None]],
                           title: str = "Speculation under load"):
    """Left: output tok/s per concurrency level for each run; right: the speedup (one line per
    speculative run when given a dict), with 1.0 marked.

    Where the speedup line crosses 1.0, speculation stops paying for itself.
    """
    if not isinstance(speedups, dict):
        speedups = {"speculative / baseline": speedups}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for label, ys in throughput.items():
        left.plot(concurrency, ys, marker="o", label=label)
    left.set_xscale("log", base=2)
    left.set_xticks(concurrency, [str(c) for c in concurrency])
    left.set_xlabel("concurrent clients")
    left.set_ylabel("output tokens / s (all clients)")
    left.set_title(title)
    left.legend(fontsize=8)
    ys = []
    for label, line in speedups.items():
        points = [(c, x) for c, x in zip(concurrency, line) if x is not None]
        right.plot([c for c, _ in points], [x for _, x in points], marker="o", label=label)
        ys += [x for _, x in points]
    right.axhline(1.0, color="grey", lw=1, ls=":", label="break-even")
    right.fill_between(concurrency, 0, 1.0, color="tab:red", alpha=0.07)
    right.set_xscale("log", base=2)
    right.set_xticks(concurrency, [str(c) for c in concurrency])
    right.set_ylim(min([0.5, *ys]) * 0.95, max([1.5, *ys]) * 1.05)
    right.set_xlabel("concurrent clients")
    right.set_ylabel("throughput speedup")
    right.set_title("below 1.0 speculation costs more than it saves")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def live_metrics(t: list[float], tokens_per_s: list[float], acceptance_length: list[float], running: list[float],
                 k: int | None = None, title: str = "Server metrics while the load runs"):
    """Three panels over time, from a server's /metrics: output tok/s, acceptance length, requests running."""
    fig, axes = plt.subplots(3, 1, figsize=(6.4, 6.0), sharex=True)
    axes[0].plot(t, tokens_per_s, marker=".", color="tab:blue")
    axes[0].set_ylabel("output tok/s")
    axes[0].set_title(title)
    axes[1].plot(t, acceptance_length, marker=".", color="tab:green")
    axes[1].axhline(1.0, color="grey", lw=1, ls=":")
    if k:
        axes[1].axhline(k + 1, color="tab:green", lw=1, ls="--", label=f"ceiling k+1 = {k + 1}")
        axes[1].legend(fontsize=8)
    axes[1].set_ylabel("acceptance length")
    axes[2].step(t, running, where="post", color="tab:orange")
    axes[2].set_ylabel("requests running")
    axes[2].set_xlabel("seconds")
    fig.tight_layout()
    return fig


def memory_plans(plans, title: str = "Where the GPU memory goes"):
    """Stacked bars per GPU: target, draft, allowance, KV room, and what utilization leaves out."""
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    names = [f"{p.gpu_gib:g} GiB" for p in plans]
    parts = [("target weights", lambda p: p.target_bytes, "tab:blue"),
             ("draft weights", lambda p: p.draft_bytes, "tab:orange"),
             ("allowance", lambda p: p.allowance_bytes, "tab:gray"),
             ("KV cache", lambda p: max(p.kv_room_bytes, 0), "tab:green"),
             ("left by utilization", lambda p: p.reserved_bytes, "whitesmoke")]
    bottoms = [0.0] * len(plans)
    for label, value, color in parts:
        heights = [value(p) / GIB for p in plans]
        ax.bar(names, heights, bottom=bottoms, label=label, color=color, edgecolor="black", linewidth=0.4)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for i, p in enumerate(plans):
        note = f"{p.kv_tokens:,} tok" if p.kv_room_bytes > 0 else "does not fit"
        ax.text(i, bottoms[i], note, ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("GiB")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
