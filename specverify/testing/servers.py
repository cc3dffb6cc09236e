"""A server's streaming checked against its own non-streamed answers (issue 42, docs/servers.md).

``check_server_streaming(decoder, requests)`` sends every request twice through a server adapter's decoder
(``specverify.adapters.server``): streamed (``stream=true``: the deltas as the server cut them, a speculative round's
tokens often in one delta) and whole. Each pair goes through ``specverify.fuzz.streaming.check_runs``: the streamed
token ids and text must equal the whole answer's, and the finish reasons must be equal, so a delta repeated or lost
at a stop string is caught. The two answers must be one draw: greedy requests, or seeded ones where the server
reproduces seeds (the honour check's ``seed_probe``); any other request is refused. Imports hypothesis (through
``fuzz.streaming``).
"""

from __future__ import annotations

from typing import Sequence

from specverify.errors import InvalidArgument

__all__ = ["check_server_streaming"]


def _deterministic(decoder, request) -> bool:
    reproducible = getattr(decoder, "seed_probe", "") == "reproducible"
    return request.params.temperature == 0 or (request.seed is not None and reproducible)


def check_server_streaming(decoder, requests: Sequence) -> int:
    """Raise ``PropertyFailure("streaming")`` at the first request whose streamed answer differs from its whole one
    (module docstring); return the number of requests checked."""
    from specverify.adapters.server.client import curl_line
    from specverify.fuzz.streaming import check_runs, recorded_run

    if getattr(decoder.dialect, "stream", None) is None:
        raise InvalidArgument(f"decoder={decoder!r}: its dialect {decoder.dialect.name!r} does not stream.")
    for request in requests:
        if not _deterministic(decoder, request):
            raise InvalidArgument(
                f"request={request!r}: the streamed and whole answers must be one draw; send greedy requests, or "
                "seeded ones to a server whose honour check found seeds reproducible (engine_info seed_probe)."
            )
    for request in requests:
        chunks, reason, _ = decoder.stream_one(request)
        whole = decoder.whole_one(request)
        text = whole.text if whole.text is not None else "".join(decoder.vocab.strings[t] for t in whole.tokens)
        reference = recorded_run([(list(whole.tokens), text)], result=(tuple(whole.tokens), whole.finish_reason))
        tokens = tuple(t for ids, _ in chunks for t in ids)
        run = recorded_run([(list(ids), piece) for ids, piece in chunks], result=(tokens, reason))
        body = decoder.dialect.body(request, decoder._context())
        url = next(iter(decoder.servers.values())).client.url
        check_runs(reference, run, reproduce=f"{curl_line(url, decoder.dialect.path, body)} (with and without "
                   '"stream": true)')  # fmt: skip
    return len(requests)
