"""Model files: what a profile's models are and how they reach the disk.

Provisioning the CPU target offline (``provision``), model references and configs (``model_refs``,
``model_config``), the published shapes (``shapes``), real or random weights (``random_weights``), the
profiles that pair a target with its drafters (``profiles``), and the drafters speclab ships or builds
(``drafters``, ``drafter_layouts``, ``drafter_packing``, ``random_drafters``). Imports only
``speclab.errors`` and ``speclab.files``; never vLLM at import time.
"""
