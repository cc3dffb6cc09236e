"""Pieces the llama.cpp decoders share: seeds, the executables, the context size, the executables' sampler order,
the request checks. The seed hash, the context size and the sampler order are the server adapter's ``llamacpp``
dialect's (``specverify.adapters.server.dialects``: written once there, for ``llama-server`` through any factory),
named here as the llama.cpp paths use them.

**Unset fields of the executables** (docs/adapters.md): ``llama-server`` and ``llama-speculative`` send every sampling
field, an unset one as its canonical default. Their own defaults (``common_params_sampling``: temp 0.8, top_k 40, top_p
0.95, min_p 0.05, and the server's DRY, XTC, typical-p and top-n-sigma samplers) are another law, and neither has
another way to leave a field unset, so leaving one out would certify llama.cpp's defaults instead of its speculative
path.

Nothing here imports llama_cpp. The finish rule is every adapter's, in ``specverify.adapters.boundary.finish``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from specverify.adapters.server.dialects import LLAMACPP_DEFAULT_SEED, LLAMACPP_N_CTX, LLAMACPP_SAMPLERS, llamacpp_seed
from specverify.errors import InvalidArgument
from specverify.protocol import Request

__all__ = ["BIN_ENV", "DEFAULT_SEED", "LONG_PREFIX", "N_CTX", "SAMPLERS", "seed32", "executable", "check_request"]

BIN_ENV = "SPECVERIFY_LLAMACPP_BIN"
DEFAULT_SEED = LLAMACPP_DEFAULT_SEED
#: A request whose cache kept at least this many tokens counts as a ``long_prefix_hits``: ``multi-turn``'s turn 2 (33
#: tokens, turn 1's 31-token prompt, its output token and EOS) met whole keeps 32 and evaluates its last token, so
#: the reused entries include one that turn 1's decoding wrote. ``long-prompt`` after itself keeps 30.
LONG_PREFIX = 32
N_CTX = LLAMACPP_N_CTX  # context tokens of a Llama, of a server slot, of the example
SAMPLERS = LLAMACPP_SAMPLERS  # the sampler chain both executables are given: the canonical order
seed32 = llamacpp_seed  # a request's seed as llama.cpp's uint32


@lru_cache(maxsize=None)
def executable(name: str) -> str:
    """The path of llama.cpp's ``name`` (``llama-server``, ``llama-speculative``) in ``$SPECVERIFY_LLAMACPP_BIN``."""
    where = os.environ.get(BIN_ENV)
    if not where:
        raise RuntimeError(
            f"{BIN_ENV} is not set: point it at the directory holding llama.cpp's {name} (built from "
            "llama-cpp-python's vendor/llama.cpp with CMake, see .ci/llamacpp and docs/findings/llamacpp.md)."
        )
    path = Path(where).expanduser() / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise RuntimeError(f"{BIN_ENV}={where!r} holds no executable {name!r} (looked for {str(path)!r}).")
    return str(path)


def check_request(request: Request, capabilities: frozenset, method: str, *, cut_before_temperature: bool) -> None:
    """Refuse what the decoder does not map exactly (``InvalidArgument``, named in the message)."""
    p = request.params
    extra = sorted(n for n in p.active() if n not in capabilities)
    if extra:
        raise InvalidArgument(
            f"params={p!r} set {extra!r}, which llama.cpp's {method!r} path does not map exactly (not declared); "
            "drop them or use another factory (docs/findings/llamacpp.md)."
        )
    order_sensitive = (p.top_p < 1.0 or p.min_p > 0.0) and p.temperature not in (0.0, 1.0)
    if order_sensitive and cut_before_temperature:
        raise InvalidArgument(
            f"top_p={p.top_p!r} / min_p={p.min_p!r} at temperature={p.temperature!r}: llama-cpp-python's "
            "generate() cuts before it divides by the temperature (llama.py, _init_sampler), the canonical order "
            "after; send them at temperature 1 or 0, or use the server factories."
        )
