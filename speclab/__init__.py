"""speclab: a hands-on lab for speculative decoding with vLLM.

Two base modules (``errors``, ``files``) and seven wings, each importing only the base and the wings
before it: ``models`` (model files and drafters), ``algorithms`` (what the lessons teach, from
scratch), ``vllm_layer`` (everything that speaks to vLLM), ``measure`` (bench, the drivers, what shows
their figures), ``serving`` (the OpenAI server and its load), ``train`` (drafters by self-distillation)
and ``cli`` (the ``speclab`` command). Data flows profile -> config -> engine -> bench -> metrics ->
theory / plots. Importing speclab is cheap: vLLM is imported only when an engine is opened.
"""
