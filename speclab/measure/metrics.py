"""Speculative-decoding counters: read them, subtract snapshots, derive the figures.

vLLM counts four things for the life of an engine: drafts (speculative steps), draft tokens
proposed, draft tokens accepted, and accepted tokens per draft position. They reach us three
ways: ``LLM.get_metrics()`` offline, Prometheus text on a server's ``/metrics``, and the
periodic "SpecDecoding metrics" log line. All three become one ``SpecCounters`` value.
Because the counters are cumulative, measure a run as ``after - before``.
"""

from __future__ import annotations

import re

from ..algorithms.counters import SpecCounters

DRAFTS = "spec_decode_num_drafts"
DRAFT_TOKENS = "spec_decode_num_draft_tokens"
ACCEPTED = "spec_decode_num_accepted_tokens"
PER_POS = "spec_decode_num_accepted_tokens_per_pos"


def _plain_name(name: str) -> str:
    """'vllm:spec_decode_num_drafts_total' / 'vllm_spec_...' -> 'spec_decode_num_drafts'."""
    for prefix in ("vllm:", "vllm_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    if name.endswith("_total"):
        name = name[: -len("_total")]
    return name


def _from_named_values(items) -> SpecCounters:
    """Sum (name, value, labels) triples into counters; several engines or models simply add up."""
    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    per_pos: dict[int, float] = {}
    for name, value, labels in items:
        name = _plain_name(name)
        if name in totals:
            totals[name] += value
        elif name == PER_POS:
            if isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    per_pos[i] = per_pos.get(i, 0.0) + v
            else:
                i = int(labels.get("position", 0))
                per_pos[i] = per_pos.get(i, 0.0) + value
    positions = tuple(int(per_pos.get(i, 0)) for i in range(max(per_pos) + 1)) if per_pos else ()
    return SpecCounters(int(totals[DRAFTS]), int(totals[DRAFT_TOKENS]), int(totals[ACCEPTED]), positions)


def from_llm_metrics(metrics) -> SpecCounters:
    """From ``LLM.get_metrics()``: Counter objects carry ``.value``, the per-position Vector ``.values``."""
    items = []
    for m in metrics:
        value = getattr(m, "values", None)
        if value is None:
            value = getattr(m, "value", 0)
        items.append((m.name, value, dict(getattr(m, "labels", {}) or {})))
    return _from_named_values(items)


def snapshot(llm) -> SpecCounters:
    """Current counters of an offline engine (needs ``disable_log_stats=False``)."""
    try:
        return from_llm_metrics(llm.get_metrics())
    except AssertionError as err:  # vLLM: "Stat logging disabled"
        raise RuntimeError("the engine was built with disable_log_stats=True: "
                           "open it with speclab.vllm_layer.engine.open_engine") from err


def from_request(spec_decode_metrics) -> SpecCounters:
    """One request's counters from vLLM's per-request metrics (``CompletionOutput.spec_decode_metrics``, or the
    ``metrics.speculative_decoding`` dict a server's reply carries); zero counters for None.

    vLLM keeps, per request, a histogram of the draft tokens accepted in each verify step (index j: j
    accepted) and the draft tokens proposed. The engine's counters follow from it exactly: every step is a
    draft, and a step that accepted j tokens counts once at each of the positions 0 .. j-1."""
    if spec_decode_metrics is None:
        return SpecCounters()
    d = spec_decode_metrics if isinstance(spec_decode_metrics, dict) else spec_decode_metrics.to_dict()
    histogram = d["acceptance_histogram"]
    return SpecCounters(
        num_drafts=sum(histogram), num_draft_tokens=d["num_draft_tokens"],
        num_accepted_tokens=sum(j * n for j, n in enumerate(histogram)),
        accepted_per_pos=tuple(sum(histogram[i + 1:]) for i in range(len(histogram) - 1)))


def from_prometheus(text: str) -> SpecCounters:
    """From Prometheus exposition text (a server's ``/metrics``), parsed with prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    items = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            items.append((sample.name, sample.value, sample.labels))
    return _from_named_values(items)


def metric_values(text: str) -> dict[str, float]:
    """Every sample of Prometheus text, not only the speculative counters, summed over labels, by plain name
    (``_created`` dropped).

    Names lose the ``vllm:`` prefix, so ``vllm:generation_tokens_total`` -> ``generation_tokens_total``.
    """
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            name = s.name.split(":", 1)[-1]
            values[name] = values.get(name, 0.0) + s.value
    return values


_LOG_FIELDS = {
    "acceptance_length": r"Mean acceptance length:\s*([\d.]+)",
    "accepted_throughput": r"Accepted throughput:\s*([\d.]+)",
    "drafted_throughput": r"Drafted throughput:\s*([\d.]+)",
    "num_accepted_tokens": r"Accepted:\s*(\d+)\s*tokens",
    "num_draft_tokens": r"Drafted:\s*(\d+)\s*tokens",
    "per_position_rates": r"Per-position acceptance rate:\s*([\d.,\s]+?)(?:,\s*[A-Z]|$)",
    "draft_acceptance_rate": r"Avg Draft acceptance rate:\s*([\d.]+)%",
}


def parse_log_line(line: str) -> dict | None:
    """Fields of vLLM's periodic "SpecDecoding metrics: ..." log line, or None for other lines.

    The log line reports an interval (since the previous line), not the engine's lifetime.
    """
    if "SpecDecoding metrics" not in line:
        return None
    out: dict = {}
    for key, pattern in _LOG_FIELDS.items():
        m = re.search(pattern, line)
        if not m:
            continue
        text = m.group(1)
        if key == "per_position_rates":
            out[key] = [float(x) for x in text.replace(" ", "").split(",") if x]
        elif key.startswith("num_"):
            out[key] = int(text)
        elif key == "draft_acceptance_rate":
            out[key] = float(text) / 100.0
        else:
            out[key] = float(text)
    return out


def tokens_per_second(num_tokens: int, seconds: float) -> float:
    return num_tokens / seconds if seconds > 0 else 0.0


# How far a measured speedup may pass its bound (the acceptance length) before it is called impossible:
# a short run's timing moves by several percent between engines.
SPEEDUP_BOUND_SLACK = 1.10


def impossible_speedup(speedup: float, acceptance_length: float, slack: float = SPEEDUP_BOUND_SLACK) -> str | None:
    """Why ``speedup`` cannot be right, or None.

    A speculative step emits on average at most ``acceptance_length`` tokens per sequence (vLLM's figure
    leaves out steps that drafted nothing, so it is an upper bound) and costs at least one baseline step:
    on the same machine the speedup cannot exceed the acceptance length. A figure beyond it means the two
    runs did not get the same machine: another process took cores from one of them.
    """
    bound = max(1.0, acceptance_length or 1.0)
    if speedup <= bound * slack:
        return None
    return (f"speedup {speedup:.2f}x is above the acceptance length {bound:.2f}, which bounds it: another process "
            "competed for the machine during one of the runs; measure again on a quiet machine")


def speedup(spec_tokens_per_s: float, baseline_tokens_per_s: float) -> float:
    """How many times faster the speculative run produced tokens than the baseline."""
    if baseline_tokens_per_s <= 0:
        raise ValueError("baseline throughput must be > 0 to compute a speedup")
    return spec_tokens_per_s / baseline_tokens_per_s
