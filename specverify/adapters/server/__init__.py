"""Certify a running inference server over HTTP (docs/servers.md): managed (specverify starts it from a command
template on 127.0.0.1, per γ) or attached (a deployment at a URL with a declaration of the pair and γ it serves).

**Layout**, one module per job: ``factories`` (the factories, the ``vllm serve`` templates), ``decoder``
(``ServerDecoder``: set-up, calls, evidence), ``dialects`` (OpenAI completions, SGLang, llama.cpp, TGI: bodies,
answers, what each maps), ``honour`` (the honour check: a field the server ignores is not declared), ``client``
(HTTP: requests in flight, timeouts, the retry rule, faults with a ``curl`` line, the API key), ``process`` (managed
processes, the launch line with secrets removed), ``declaration`` (attached mode's declaration), ``metrics``
(Prometheus spec-decode counters).

Set-up failures (the server does not start or answer, it ignores temperature, a declaration that does not match)
raise from the factory: verdict ``error``. A fault in a call (5xx, malformed JSON, a dropped connection, a dead
server, a timeout) raises ``ServerFault``: verdict ``invalid``, naming the request and a ``curl`` line. Importing this
package imports no engine and no HTTP library beyond the standard library.
"""

from specverify.adapters.server.client import Client, ServerFault, ServerUnavailable
from specverify.adapters.server.decoder import ServerDecoder
from specverify.adapters.server.dialects import DIALECTS
from specverify.adapters.server.factories import (
    VLLM_TEMPLATES,
    attached,
    attached_plain,
    managed,
    managed_plain,
    vllm_serve_draft_model,
    vllm_serve_ngram,
    vllm_serve_plain,
)

__all__ = [
    "managed",
    "managed_plain",
    "attached",
    "attached_plain",
    "vllm_serve_plain",
    "vllm_serve_draft_model",
    "vllm_serve_ngram",
    "VLLM_TEMPLATES",
    "ServerDecoder",
    "DIALECTS",
    "Client",
    "ServerFault",
    "ServerUnavailable",
]
