"""Binds the vLLM adapter's process-global workarounds in every Python process of a managed ``vllm serve``.

A managed server started with ``--engine-option workaround=NAME`` (``specverify.adapters.server``, the ``vllm_serve_*``
factories) runs with this directory first on ``PYTHONPATH`` and ``SPECVERIFY_VLLM_WORKAROUND`` set to the JSON list of
names, so Python imports this module at start-up in the API server and in the engine core it starts, and
``specverify.adapters.vllm.patches.bind`` installs the workarounds there before any engine starts (the same binding the
in-process adapter makes before each engine start). Each process prints one line naming what it bound, which the
adapter reads back from the server's log as evidence. A workaround that cannot be bound stops the process with exit
status 3: a server asked for a workaround never runs without it.
"""

import json
import os
import sys

_NAMES = os.environ.get("SPECVERIFY_VLLM_WORKAROUND")
if _NAMES:
    try:
        from specverify.adapters.vllm import patches

        patches.bind(json.loads(_NAMES))
        # the server's log line the adapter reads back (this runs in the server's process, not in specverify's)
        sys.stderr.write(f"specverify: vLLM workaround bound {_NAMES} in pid {os.getpid()}\n")
        sys.stderr.flush()
    except Exception as exc:  # noqa: BLE001 - any failure: the server must not start without its workaround
        sys.stderr.write(f"specverify: cannot bind the vLLM workaround {_NAMES}: {exc!r}\n")
        sys.stderr.flush()
        os._exit(3)
