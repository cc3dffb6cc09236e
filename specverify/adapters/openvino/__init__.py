"""OpenVINO GenAI as a specverify decoder: draft-model speculation (fixed γ and confidence threshold), prompt lookup
and the continuous-batching pipeline with and without a draft, each beside a control without speculation.

Factories (``factories``; docs/adapters.md; docs/findings/openvino.md has the verdicts): ``plain``, ``draft_model``,
``draft_model_confidence``, ``prompt_lookup``, ``cb_plain``, ``cb_draft_model``; configurations ``f32`` (default),
``f32-no-prefix-cache``, ``f32-no-prefix-cache-whole-batch``, ``default-precision``. Models are ``CheckpointModel`` s
converted by optimum-intel in a venv of its own (``export``: float32 IR, cached beside the checkpoint). **Layout**:
``factories``, ``decoder`` (``OpenvinoDecoder``), ``mapping`` (generation config, seeds, precision; no engine),
``export``. Set-up failures raise from the factory (``error``); an engine exception in a call raises ``RuntimeError``
(``invalid``). Importing this package imports neither openvino nor openvino_genai.
"""

from specverify.adapters.openvino.decoder import CAPABILITIES, METHODS, OpenvinoDecoder
from specverify.adapters.openvino.factories import (
    CONFIGS,
    cb_draft_model,
    cb_plain,
    draft_model,
    draft_model_confidence,
    plain,
    prompt_lookup,
)

__all__ = [
    "plain",
    "draft_model",
    "draft_model_confidence",
    "prompt_lookup",
    "cb_plain",
    "cb_draft_model",
    "OpenvinoDecoder",
    "METHODS",
    "CAPABILITIES",
    "CONFIGS",
]
