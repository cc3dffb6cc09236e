"""ONNX Runtime GenAI as a specverify decoder: its speculative model type with a draft, adaptive γ and n-gram
lookup, each beside the control without speculation.

Factories (``factories``; docs/adapters.md; docs/findings/onnxruntime_genai.md has the verdicts): ``plain``,
``draft_model``, ``draft_model_adaptive``, ``ngram``. Models are ``CheckpointModel`` s converted by the engine's own
model builder (``export``: float32, CPU, cached beside the checkpoint). **Layout**: ``factories`` (the factories and
their configurations), ``decoder`` (``GenaiDecoder``: one ``og.Generator`` per request), ``mapping`` (search options,
seeds, rounds from the engine's counters; no engine), ``export`` (the model folders). Set-up failures raise from
the factory (verdict ``error``); an engine exception in a call raises ``RuntimeError`` with the engine's message
(``invalid``). Importing this package imports neither onnxruntime_genai nor torch.
"""

from specverify.adapters.onnxruntime_genai.decoder import CAPABILITIES, METHODS, GenaiDecoder
from specverify.adapters.onnxruntime_genai.factories import (
    SPECULATIVE_CONFIGS,
    draft_model,
    draft_model_adaptive,
    ngram,
    plain,
)

__all__ = [
    "plain",
    "draft_model",
    "draft_model_adaptive",
    "ngram",
    "GenaiDecoder",
    "METHODS",
    "CAPABILITIES",
    "SPECULATIVE_CONFIGS",
]
