"""The vLLM layer: everything that speaks to the installed vLLM.

Speculative configs for every method (``configs``) and their check against vLLM and the models' files
(``validation``), old flags migrated (``migration``), what the installed vLLM supports
(``vllm_features``), an engine opened and closed for a profile (``engine``, with ``start_watch``,
``ipc``, ``vllm_plugin`` and ``vllm_cpu_fixes``), vLLM's logs (``logs``) and the environment check
(``envcheck``). Depends on ``speclab.models`` only.
"""
