"""Measurement: every figure a lesson shows is measured, stored or drawn here.

The rule for where a measurement goes:

- ``bench`` owns the lessons' measurement: the same prompts (``prompts``) through a baseline engine
  and a speculative one, timed the same way, with the counters of exactly that run (``metrics``) and
  the greedy outputs compared (``equality``). Every lesson that times speculation calls it, and so
  does ``speclab bench``. A new comparison of baseline and speculation on a prompt set belongs here.
- The drivers answer questions a lesson cannot answer in minutes, each a program
  (``python -m speclab.measure.<driver>``) that writes one JSON record under ``data/`` for a lesson
  or the appendix to read back: ``cpu_speed`` (one request against a batch on the CPU),
  ``step_time`` (where a speculative step's time goes), ``synthetic`` and ``gpu_sweep`` (the speedup
  surface with acceptance imposed by hand). A new question that needs its own sweep is a new driver
  with a ``--json`` output. (The load test is a driver too; it lives with the server it loads.)
- What shows the figures: ``playground`` (warm engines behind lesson 07's controls), ``reference``
  (the stored reference runs beside a learner's), ``report``, ``plots`` and ``widgets``.
"""
