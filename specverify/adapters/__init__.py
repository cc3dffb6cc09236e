"""Engine adapters: one module per engine (``specverify.adapters.transformers``, ...), each imported lazily.

Nothing is imported here, so ``import specverify.adapters`` never loads an engine. Name a factory as
``"specverify.adapters.<engine>:<factory>"`` when calling ``specverify.certify`` (docs/adapters.md).
"""
