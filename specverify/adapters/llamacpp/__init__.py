"""llama.cpp as a specverify decoder: llama-cpp-python's speculative ``generate()``, ``llama-server`` with a draft
model, and the stochastic ``llama-speculative`` example, each beside a control without speculation.

Factories (``factories``; docs/adapters.md; docs/findings/llamacpp.md has the verdicts and the mechanisms):
``python_draft_model``, ``python_prompt_lookup`` and their control ``plain`` (llama-cpp-python's ``generate()``),
``server_draft_model`` and its control ``server_plain`` (``llama-server``), ``speculative_example`` and
``speculative_example_tree`` (``llama-speculative``).

Models are ``CheckpointModel`` s exported by ``specverify.adapters.boundary.gguf_export.gguf_file`` (token-id paths
use the toy pieces, the example the one-letter pieces). The executables are found in ``$SPECVERIFY_LLAMACPP_BIN``.

**Layout**, one module per job: ``factories`` (the factories), ``configs`` (their engine configurations),
``bindings`` (llama-cpp-python's ``generate()``: ``PythonDecoder`` and its mapping), ``server`` (``ServerDecoder``:
``llama-server`` on the server adapter ``specverify.adapters.server``, whose ``llamacpp`` dialect, client and
managed processes it uses; its launch line and ``ServerEvidence``), ``example`` (``ExampleDecoder``,
``llama-speculative``), ``common`` (seeds, executables, context size, sampler order, request checks) and ``checks``
(the named check ``same_seed_check``). Set-up failures raise from the factory (verdict ``error``); an engine
exception, a dead process, a hang or a malformed response in a call raises ``RuntimeError`` with the engine's message
(verdict ``invalid``; the server's faults are the server adapter's ``ServerFault``, with a ``curl`` line). Importing
this package imports neither llama_cpp nor gguf.
"""

from specverify.adapters.llamacpp.bindings import CAPABILITIES, METHODS, PythonDecoder
from specverify.adapters.llamacpp.checks import same_seed_check
from specverify.adapters.llamacpp.common import N_CTX
from specverify.adapters.llamacpp.configs import PYTHON_CONFIGS, SERVER_CONFIGS
from specverify.adapters.llamacpp.factories import (
    plain,
    python_draft_model,
    python_prompt_lookup,
    server_draft_model,
    server_plain,
    speculative_example,
    speculative_example_tree,
)

__all__ = [
    "python_draft_model",
    "python_prompt_lookup",
    "plain",
    "server_draft_model",
    "server_plain",
    "speculative_example",
    "speculative_example_tree",
    "PythonDecoder",
    "METHODS",
    "CAPABILITIES",
    "same_seed_check",
    "N_CTX",
    "PYTHON_CONFIGS",
    "SERVER_CONFIGS",
]
