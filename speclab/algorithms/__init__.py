"""Speculative decoding from scratch, in plain Python and torch: what the lessons teach.

The theory's arithmetic (``theory``), vLLM's counters and the figures derived from them
(``counters``), the toy verifier (``toy``), token trees (``trees``), prompt lookup (``ngram_lookup``),
suffix trees (``suffix``) and the memory arithmetic (``memory``). The lessons define their own copies
of these in ``define`` cells, and tests hold both to the same outputs. Nothing here opens an engine.
"""
