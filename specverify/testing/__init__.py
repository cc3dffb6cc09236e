"""Helpers for engine test suites: assertions with complete failure messages, and what the pytest plugin runs on.

- ``assert_exact(factory_or_certificate, ...)``, ``assert_greedy_equal(...)``: certificates;
- ``assert_kernel_conforms(kernel, style=...)``: a verification kernel against the exact per-round law;
- ``assert_transactional(white_box, ...)``: the white-box state-transaction properties (imports hypothesis);
- ``model_pair(family, distance)``: toy and checkpoint model pairs; ``explain(certificate)``: the failure text;
- ``check_server_streaming(decoder, requests)``: a server's streamed answers against its whole ones (``servers``).

The pytest plugin (``specverify.pytest_plugin``) uses ``options``, ``items``, ``ledger``, ``baseline`` and
``summary`` from here. Everything is imported lazily: ``import specverify.testing`` imports neither torch, triton
nor hypothesis.
"""

from __future__ import annotations

from specverify._lazy import lazy_exports

_LAZY = {
    "assert_exact": "specverify.testing.asserts",
    "assert_greedy_equal": "specverify.testing.asserts",
    "certify_with": "specverify.testing.asserts",
    "model_pair": "specverify.testing.asserts",
    "assert_kernel_conforms": "specverify.testing.kernels",
    "assert_transactional": "specverify.testing.transactional",
    "explain": "specverify.testing.messages",
    "check_server_streaming": "specverify.testing.servers",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
