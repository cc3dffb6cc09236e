"""Engine adapters: one package per engine (``specverify.adapters.vllm``, ``.llamacpp``, ``.transformers``: its
factories, mapping, options, configurations and workarounds), and ``boundary``, what every adapter shares (the finish
rule, the draw pool).

Nothing is imported here, and importing an engine's package imports no engine: each imports its engine lazily. Name a
factory as ``"specverify.adapters.<engine>:<factory>"`` when calling ``specverify.certify`` (docs/adapters.md).
"""
