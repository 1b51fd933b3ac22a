"""A warm baseline engine beside a warm speculative one, so that a control re-measures in seconds.

A lesson's sweep opens one engine per setting; a learner turning a knob cannot wait a minute per
turn. ``Playground`` keeps both engines open between runs. Temperature, max tokens and the prompt
category are per-request settings, so they re-run on the warm engines; ``num_speculative_tokens``
is fixed when vLLM builds its proposer, so a new k reopens the speculative engine only. Every
prompt is measured alone (one request at a time), both engines on the same prompts. ``close()``
(or ``with``) shuts both engines down.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from ..models.profiles import Profile
from ..vllm_layer import configs
from ..vllm_layer.engine import engine_device, open_engine, shared_gpu_kwargs
from . import bench, equality

# On a GPU both engines must fit at once: each may take this share of the card (vLLM's gpu_memory_utilization,
# checked against the memory still free when it starts), unless SPECLAB_KV_CACHE_GIB already sizes them.
GPU_SHARE_PER_ENGINE = 0.4


@dataclass(frozen=True)
class PlayResult:
    """One turn of the knobs: the same prompts on both engines."""

    category: str
    temperature: float
    max_tokens: int
    method: str
    k: int
    acceptance_length: float
    baseline_tokens_per_s: float
    tokens_per_s: float
    greedy: equality.GreedyCheck | None  # None when sampling: outputs differ by design

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.baseline_tokens_per_s if self.baseline_tokens_per_s else 0.0

    def __repr__(self) -> str:
        same = f"; greedy outputs: {self.greedy.describe()}" if self.greedy else ""
        return (f"{self.category}, T={self.temperature:g}, {self.max_tokens} tokens, {self.method} k={self.k}: "
                f"acceptance length {self.acceptance_length:.2f}, baseline {self.baseline_tokens_per_s:.1f} tok/s, "
                f"speculative {self.tokens_per_s:.1f} tok/s, {self.speedup:.2f}x{same}")


class Playground:
    """Both engines open for a profile, a method and a prompt set's categories."""

    def __init__(self, profile: Profile, method: str, k: int, source: str = "workloads", prompts_per_category: int = 2,
                 enforce_eager: bool = True):
        self.profile, self.method, self.k, self.enforce_eager = profile, method, k, enforce_eager
        config = configs.for_profile(profile, method, k)  # a bad method or k stops here, before any engine
        prompts, inputs = bench.prompt_inputs(profile, source, per_category=prompts_per_category)
        self.prompts: dict[str, list] = {}
        for p, inp in zip(prompts, inputs):
            self.prompts.setdefault(p.category, []).append(inp)
        self.categories = list(self.prompts)
        self._engines = ExitStack()
        self._speculative = ExitStack()
        try:
            self.baseline = self._open(self._engines, None)
            self.speculative = self._open(self._speculative, config)
        except BaseException:
            self.close()
            raise

    def _open(self, stack: ExitStack, config: dict | None):
        overrides = {}
        if engine_device() == "cuda" and not shared_gpu_kwargs():
            overrides["gpu_memory_utilization"] = GPU_SHARE_PER_ENGINE
        llm = stack.enter_context(open_engine(self.profile, config, enforce_eager=self.enforce_eager, **overrides))
        bench.warm_up(llm, bench.greedy(4), next(iter(self.prompts.values()))[0])
        return llm

    def reopen(self, k: int) -> None:
        """A new k: close the speculative engine, open one with k draft tokens (the baseline stays warm)."""
        config = configs.for_profile(self.profile, self.method, k)
        self._speculative.close()
        self.speculative = self._open(self._speculative, config)
        self.k = k

    def run(self, category: str, temperature: float = 0.0, max_tokens: int = 64, k: int | None = None) -> PlayResult:
        """Measure the category's prompts, each alone, on the baseline and then on the speculative engine."""
        if category not in self.prompts:
            raise configs.ConfigError(f"no category {category!r} here: choose from {', '.join(self.categories)}")
        if k is not None and k != self.k:
            self.reopen(k)
        sampling = bench.greedy(max_tokens, temperature, **({"seed": 0} if temperature else {}))
        runs = {name: bench.combine([bench.measure(llm, [inp], sampling) for inp in self.prompts[category]])
                for name, llm in (("baseline", self.baseline), ("speculative", self.speculative))}
        return PlayResult(category, float(temperature), max_tokens, self.method, self.k,
                          runs["speculative"].counters.acceptance_length, runs["baseline"].output_tokens_per_s,
                          runs["speculative"].output_tokens_per_s,
                          equality.check_runs(runs["baseline"], runs["speculative"]) if temperature == 0 else None)

    def close(self) -> None:
        """Shut both engines down (safe to call twice)."""
        self._speculative.close()
        self._engines.close()

    def __enter__(self) -> "Playground":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
