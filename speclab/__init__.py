"""speclab: a hands-on lab for speculative decoding with vLLM.

Modules, in the order data flows through them:
profiles -> configs -> engine -> bench -> metrics -> theory / plots.
Importing speclab is cheap: vLLM is imported only when an engine is opened.
"""

