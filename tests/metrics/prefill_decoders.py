"""Decoders for tests/metrics: the reference behind a prefill token (as vLLM emits one before its first round)."""

from dataclasses import replace

from specverify.protocol import Completion, Request
from specverify.reference import make_decoder, plain


class PrefillFirst:
    """The first token is a plain target draw, the rest the reference's rounds from there (exact for requests with
    no history-dependent processor: temperature and max_tokens only)."""

    capabilities = frozenset({"batch", "seed", "accepted"})

    def __init__(self, target, draft):
        self.plain, self.spec = plain(target, draft), make_decoder(target, draft)

    def __call__(self, requests):
        requests = list(requests)
        firsts = self.plain([replace(r, params=replace(r.params, max_tokens=1), num_draft_tokens=1) for r in requests])
        go = [i for i, (r, c) in enumerate(zip(requests, firsts)) if c.finish_reason == "length"]
        go = [i for i in go if requests[i].params.max_tokens > 1]
        rest = self.spec(
            [
                Request(
                    requests[i].prompt + firsts[i].tokens,
                    replace(requests[i].params, max_tokens=requests[i].params.max_tokens - 1),
                    requests[i].num_draft_tokens,
                    seed=None if requests[i].seed is None else (requests[i].seed * 31 + 7) % 2**63,
                )
                for i in go
            ]
        )
        out = [Completion(c.tokens, c.finish_reason, accepted=()) for c in firsts]
        for i, r in zip(go, rest):
            out[i] = Completion(firsts[i].tokens + r.tokens, r.finish_reason, accepted=r.accepted)
        return out


def prefill_first(target, draft):
    return PrefillFirst(target, draft)


def over_reporting(target, draft):
    """The same decoder, claiming one more accepted draft in each first round that rejected one."""
    base = PrefillFirst(target, draft)

    class Over:
        capabilities = base.capabilities

        def __call__(self, requests):
            out = []
            for c in base(requests):
                a = c.accepted
                if a and len(a) > 1 and a[0] < requests[0].num_draft_tokens and sum(a) + 1 <= len(c.tokens):
                    a = (a[0] + 1,) + a[1:]
                out.append(replace(c, accepted=a))
            return out

    return Over()
