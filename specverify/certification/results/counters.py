"""The ``counters`` check: the engine's own aggregate counters (``decoder.reported_metrics()``) against their
identities and against what its completions say, per scenario (docs/metrics.md, "Counter identities").

While a scenario runs, a :class:`CounterScope` is open on the session: before the first call of a decoder that has
the hook it reads the counters once, tallies every completion (or fast-path count) the calls return, and when the
scenario ends reads them again. :func:`counters_evidence` turns that window into the scenario's JSON-ready
``counters`` record; :func:`counters_summary` gives the certificate's ``counters_ok`` and note. Evidence beside the
verdict, never part of it: ``--require-metrics`` makes a broken identity binding (an absent hook is not a failure:
the hook is optional).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from specverify.metrics.counters import CounterTally, ReportedMetrics, counter_identities

__all__ = ["CounterScope", "counters_evidence", "attach_counters", "counters_summary"]

MAX_FAILED_SHOWN = 3


@dataclass
class _Window:
    before: Optional[ReportedMetrics]
    tally: CounterTally = field(default_factory=CounterTally)
    error: Optional[str] = None


class CounterScope:
    """The windows of one scenario: per decoder (model pair) with the hook, its counters before the scenario's
    first call and the certifier's tally of what the calls returned."""

    def __init__(self, read):
        self._read = read  # handle -> ReportedMetrics | None (raises on a failing hook)
        self.windows: dict = {}

    def _window(self, handle) -> _Window:
        spec = handle.pair.spec
        if spec not in self.windows:
            try:
                self.windows[spec] = _Window(self._read(handle))
            except Exception as exc:  # noqa: BLE001 - the hook's failure is evidence, never a crash
                self.windows[spec] = _Window(None, error=f"reported_metrics() failed before the calls: {exc}")
        return self.windows[spec]

    def opening(self, handle) -> None:
        """Read the counters before ``handle``'s first call in this scope."""
        self._window(handle)

    def add_completions(self, handle, requests, completions) -> None:
        tally = self._window(handle).tally
        for request, completion in zip(requests, completions):
            tally.add_completion(completion.accepted, request.num_draft_tokens)

    def add_counts(self, handle, request, counts, n: int) -> None:
        self._window(handle).tally.add_counts(counts.rounds, n, request.num_draft_tokens)

    def close(self, handles) -> Optional[dict]:
        """The scenario's ``counters`` evidence (None when no decoder with the hook was called)."""
        records = []
        for spec, window in self.windows.items():
            after, error = None, window.error
            if error is None:
                try:
                    after = self._read(handles[spec])
                except Exception as exc:  # noqa: BLE001
                    error = f"reported_metrics() failed after the calls: {exc}"
            records.append(counters_evidence(window.before, after, window.tally, error=error))
        return records[0] if len(records) == 1 else _combined(records)


def _combined(records) -> Optional[dict]:
    if not records:
        return None
    rows = [row for r in records for row in r["identities"]]
    oks = [r["ok"] for r in records]
    ok = False if False in oks else (True if True in oks else None)
    return {**records[-1], "ok": ok, "identities": rows, "note": "; ".join(r["note"] for r in records if r["note"])}


def counters_evidence(before, after, tally, *, error=None) -> dict:
    """JSON-ready: ``ok`` (None: nothing reported to check), ``identities`` rows ``[name, left, relation, right,
    held]``, the engine's cumulative counters ``reported`` and those of the ``window``, the certifier's ``tally``,
    and a ``note`` (why something was not compared)."""
    out = dict(ok=None, identities=[], reported=None, window=None, tally=tally.to_dict(), note="")
    if error is not None:
        return {**out, "ok": False, "note": error}
    if after is None:
        return {**out, "note": "reported_metrics() returned None: the engine reports no counters"}
    rows = counter_identities(before, after, tally)
    delta, _ = after.minus(before or ReportedMetrics())
    out.update(reported=after.to_dict(), window=delta.to_dict(), identities=[i.row() for i in rows])
    if tally.unreported:
        out["note"] = (
            f"not compared with the completions: {tally.unreported} of {tally.completions} did not report their "
            "accepted drafts"
        )
    if rows:
        out["ok"] = all(i.held for i in rows)
    return out


def attach_counters(results: list, evidence: Optional[dict]) -> list:
    """The scenario's results with ``evidence`` on the first covered one (a mixed batch's calls mix members)."""
    if evidence is None:
        return results
    out = list(results)
    for i, r in enumerate(out):
        if r.covered:
            out[i] = replace(r, counters=evidence)
            break
    return out


def _failed(name: str, ev: dict) -> str:
    if not ev["identities"] or all(row[4] for row in ev["identities"]):
        return f"{name}: {ev['note']}"
    bad = [row for row in ev["identities"] if not row[4]][:2]
    return f"{name}: " + "; ".join(f"{n}: {_num(left)} {rel} {_num(right)} broken" for n, left, rel, right, _ in bad)


def _num(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def counters_summary(results) -> tuple:
    """(ok, note) over the scenarios' ``counters`` evidence: None when no scenario carried any (no hook)."""
    checked = [r for r in results if getattr(r, "counters", None)]
    if not checked:
        return None, "not checked: the decoder has no reported_metrics() hook (docs/adapters.md)"
    bad = [_failed(r.name, r.counters) for r in checked if r.counters["ok"] is False]
    if bad:
        return False, f"{len(bad)} of {len(checked)} scenarios: " + " | ".join(bad[:MAX_FAILED_SHOWN])
    judged = [r for r in checked if r.counters["ok"]]
    if not judged:
        return None, f"not checked: the engine reported no counters in {len(checked)} scenarios"
    identities = sum(len(r.counters["identities"]) for r in judged)
    compared = sum(1 for r in judged if not r.counters["tally"]["unreported"])
    return True, (
        f"{len(judged)} scenarios: all {identities} identities held; the engine's counts matched its completions' "
        f"in {compared}"
    )
