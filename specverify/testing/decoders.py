"""The session's decisions by decoder: one summary block and one certificate file per decoder.

A decoder is a factory on one model family in one engine configuration, certified at one level, seed and α. Its
certificate is its marked tests' (one marked test: that test's; several: merged, as the baseline merges them): the
summary block it heads, with one verdict, and the file ``--specverify-json`` / ``--specverify-html`` write. The
``specverify_certify`` fixture's certificates belong to the tests that asked for them (those tests assert on them):
the decoder's block lists each call's scenarios without a verdict of its own, and their files are named apart
(``STEM.fixture-TEST.json`` beside ``STEM.json``). A decoder that only the fixture certified has a block of its own.

>>> nodeid_slug("tests/test_engine.py::test_greedy[toy-1]")
'test_greedy_toy-1_'
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from specverify.errors import check

__all__ = ["DecoderView", "decoder_key", "by_decoder", "nodeid_slug", "output_files"]


def decoder_key(decision) -> tuple:
    """``(factory, model family, engine configuration, level, seed, α)`` of a ``ledger.Decision``: a fixture call
    with another seed or level is a certification of its own, shown apart."""
    cert, group = decision.certificate, decision.group
    return (cert.factory, group.models, group.config.get("engine_config"), str(cert.level), cert.seed, cert.alpha)


@dataclass(frozen=True)
class DecoderView:
    """One decoder's decisions: ``marked`` those of its marked tests (each a certification with its own requirement),
    ``calls`` those of ``specverify_certify`` calls (their tests decide)."""

    key: tuple
    marked: tuple = ()
    calls: tuple = ()

    factory = property(lambda self: self.key[0])
    models = property(lambda self: self.key[1])
    engine_config = property(lambda self: self.key[2])

    @property
    def slug(self) -> str:
        from specverify.testing.baseline import baseline_name

        slug = baseline_name(self.factory, self.models)[: -len(".json")]
        return slug + (f"-{_slugify(self.engine_config)}" if self.engine_config else "")

    def certificate(self) -> object:
        """The decoder's certificate: its marked test's, merged over several (None when only the fixture
        certified it)."""
        if not self.marked:
            return None
        if len(self.marked) == 1:
            return self.marked[0].certificate
        from specverify.testing.baseline import merge_certificates

        return merge_certificates([d.certificate for d in self.marked], self.models)


def by_decoder(decisions: list) -> list:
    """:class:`DecoderView`\\ s of ``decisions`` (``ledger.Decision``, in the ledger's order): decoders with a marked
    test first, in the order of their first marked test, then those only the fixture certified."""
    check(
        all(hasattr(d, "group") and hasattr(d, "certificate") for d in decisions),
        f"decisions={decisions!r:.80}: expected the ledger's Decisions (specverify.testing.ledger.Ledger.decide()).",
    )
    marked: dict = {}
    calls: dict = {}
    for d in decisions:
        (marked if d.group.kind == "marker" else calls).setdefault(decoder_key(d), []).append(d)
    keys = list(marked) + [k for k in calls if k not in marked]
    return [DecoderView(k, tuple(marked.get(k, ())), tuple(calls.get(k, ()))) for k in keys]


def _slugify(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", str(text))


def nodeid_slug(nodeid: str) -> str:
    """A file-name part for the test ``nodeid``: its name (parameters included), other characters as ``_``."""
    return _slugify(nodeid.split("::")[-1])


def output_files(template: str, views: list) -> list:
    """``(path, certificate, decisions)`` for each file of ``--specverify-json`` / ``-html`` PATH: one per decoder
    with a marked test (PATH itself when there is one such decoder, else ``PATH-STEM-<decoder>``), then one per
    fixture call, ``PATH-STEM.fixture-<test>`` (``-2``, … for further calls of the same test name). ``decisions``
    are those the file's note belongs to."""
    check(
        isinstance(template, str) and template.strip() != "",
        f"template={template!r}: expected a file path, e.g. 'certificate.json' (--specverify-json PATH).",
    )
    base = Path(template)
    decoders = [v for v in views if v.marked]
    out, taken = [], Counter()
    for v in decoders:
        taken[v.slug] += 1
        slug = v.slug + (f"-{taken[v.slug]}" if taken[v.slug] > 1 else "")
        path = base if len(decoders) == 1 else base.with_name(f"{base.stem}-{slug}{base.suffix}")
        out.append((path, v.certificate(), v.marked))
    for v in views:
        for d in v.calls:
            name = "fixture-" + nodeid_slug(d.group.nodeid)
            taken[name] += 1
            name += f"-{taken[name]}" if taken[name] > 1 else ""
            out.append((base.with_name(f"{base.stem}.{name}{base.suffix}"), d.certificate, (d,)))
    return out
