"""Talking to a running server: the quick-start curl check and one streamed, timed request.

A server's lifecycle is ``speclab.serving.server``; these take a running server (or an ``openai`` client
pointed at one) and say what a reader of a quick-start guide would see: the answer, when its first
token came, and how fast the rest followed.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass

from ..errors import ServerError
from ..vllm_layer.vllm_features import has_per_request_spec_metrics, vllm_version

CHECK_PROMPT = "Write a Python script to read a CSV file:"  # a quick-start guide's curl check
CHECK_MAX_TOKENS = 200


def curl_command(server, prompt: str = CHECK_PROMPT, max_tokens: int = CHECK_MAX_TOKENS) -> str:
    """A quick-start guide's check as one shell line: a greedy completion request to the server."""
    body = json.dumps({"model": server.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
    return (f"curl {server.base_url}/v1/completions -H 'Content-Type: application/json' "
            f"-d {shlex.quote(body)}")


def request_acceptance(reply: dict) -> str:
    """One line on a reply's own speculation (vLLM's ``metrics.speculative_decoding``), or why it has none.

    ``/metrics`` sums every request since the server started; this is the one request's share, with how
    many of its verify steps accepted 0, 1, 2, ... drafted tokens."""
    spec = (reply.get("metrics") or {}).get("speculative_decoding")
    if spec:
        histogram = ", ".join(f"{j}: {n}" for j, n in enumerate(spec["acceptance_histogram"]))
        return (f"this request: {spec['num_spec_steps']} verify steps, {spec['num_accepted_draft_tokens']} of "
                f"{spec['num_draft_tokens']} drafted tokens accepted, acceptance length "
                f"{spec['mean_acceptance_length']:.2f}; steps by drafts accepted {{{histogram}}}")
    if not has_per_request_spec_metrics():
        version = ".".join(map(str, vllm_version() or ())) or "?"
        return (f"vLLM {version} reports acceptance only in /metrics, summed over all requests: a reply's own "
                "figures (--per-request-spec-decode-metrics) come with vLLM releases after 0.27")
    return ("the reply carries no metrics.speculative_decoding: the server does not speculate, or the request "
            "asked n > 1")


@dataclass(frozen=True)
class StreamTiming:
    """One streamed request: its text and when its tokens arrived."""

    text: str
    output_tokens: int
    ttft: float  # seconds from sending the request to the first token
    latency: float  # seconds from sending the request to the last token

    @property
    def tpot(self) -> float:
        """Mean time per output token after the first (what a reader feels as speed)."""
        return (self.latency - self.ttft) / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0


def carries_tokens(choice: dict, chat: bool) -> bool:
    """Whether a streamed choice brings new tokens: vLLM sends a chunk per step that produced some.

    Its text can be empty (a token that decodes to nothing yet, or an id the tokenizer lacks, as with
    random weights on a borrowed tokenizer), so the chunk counts, not its text. A chat stream's first
    chunk only names the role.
    """
    if chat:
        delta = choice.get("delta") or {}
        return delta.get("content") is not None and not delta.get("role")
    return choice.get("text") is not None


def stream_timed(client, model: str, prompt: str | None = None, messages: list | None = None,
                 max_tokens: int = 64, temperature: float = 0.0, extra_body: dict | None = None) -> StreamTiming:
    """Stream one completion (``prompt``) or chat (``messages``) with the openai client; time it.

    A chunk can carry several tokens (speculation accepts them together), so the token count
    comes from the usage record the server appends (``stream_options.include_usage``).
    ``extra_body`` carries vLLM's own sampling fields, e.g. ``{"ignore_eos": True}``.
    """
    kwargs = dict(model=model, max_tokens=max_tokens, temperature=temperature, stream=True,
                  stream_options={"include_usage": True}, extra_body=extra_body)
    sent = time.perf_counter()
    if messages is not None:
        stream = client.chat.completions.create(messages=messages, **kwargs)
    else:
        stream = client.completions.create(prompt=prompt, **kwargs)
    parts, first, last, tokens = [], None, sent, 0
    for chunk in stream:
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
        for choice in chunk.choices:
            if carries_tokens(choice.model_dump(), chat=messages is not None):
                piece = choice.delta.content if messages is not None else choice.text
                now = time.perf_counter()
                first = first if first is not None else now
                last = now
                parts.append(piece)
    if first is None:
        raise ServerError("the stream ended without any token")
    return StreamTiming("".join(parts), tokens, first - sent, last - sent)
