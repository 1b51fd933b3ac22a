"""Serving: vLLM's OpenAI-compatible server, started and stopped with the lesson.

Its lifecycle (``server``), its clients (``clients``), a bounded load generator (``loadgen``), the same
load with and without speculation (``loadtest``, a driver that writes one JSON record) and the
server's ``/metrics`` watched live (``metrics_watch``).
"""
