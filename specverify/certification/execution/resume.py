"""``--resume PATH``: a run's counts on disk after every decoder call, so the same command continues after a kill.

The file (JSON, kind ``specverify-resume``) holds the run's identity, the results of every finished scenario, the
reproducibility check once it ran, and for the scenario in flight each of its draws (``Session.draw``: a
sampling scenario's looks, a two-sample scenario's sides) with the counts so far and how many draws they cover.
It is rewritten after every decoder call a draw makes: to a temporary file in the same directory, flushed and
fsynced, then ``os.replace``d over PATH, so a kill at any moment leaves the last complete state.

The same command with the same PATH takes the finished scenarios from the file and reruns the one in flight: each
of its draws already recorded is given back from the file, and the draw that was cut continues from its last
recorded call (draw i of a seeded request depends only on (seed, i): the same counts as an uninterrupted run).
Checks that call the decoder directly — greedy, collision, mixed batches, batch composition, the reproducibility
check — rerun from their start. Unseeded scenarios and engines draw fresh entropy after a resume: their draws are
independent either way, so their tests stay valid, but their counts are not those of an uninterrupted run.

Nothing that broke the protocol is recorded: a run that ended ``invalid`` (a worker killed by the OOM killer, a
hang past ``--timeout``) keeps the evidence before the failing call, and resuming asks the decoder again from
there; a decoder that breaks the protocol deterministically breaks it again. The file lists every earlier ending
under ``interruptions``.

A file written by another command is refused, naming what differs (factory, level, seed, scenarios, look rule,
α, …: every run option except how the decoder is run — ``isolation``, ``timeout_s``, ``threads``, ``executor``,
``ray_address`` — and the specverify version). A missing PATH starts a fresh run; a file that cannot be read is a
usage error naming it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Optional

from specverify.certification.config.run_config import RunConfig
from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.run.tally import draws_from_dict, draws_to_dict, tally_from_dict, tally_to_dict
from specverify.errors import InvalidArgument, check

__all__ = ["RESUME_SCHEMA_VERSION", "ResumeFile", "identity_of"]

RESUME_SCHEMA_VERSION = 1
KIND = "specverify-resume"
EXECUTION = ("isolation", "timeout_s", "threads", "executor", "ray_address")  # how the decoder runs, not what it draws


def identity_of(config: RunConfig) -> dict:
    """What makes a resume file this run's: every run option but how the decoder is run, and the version."""
    from specverify import __version__

    run = {k: v for k, v in config.to_dict().items() if k not in EXECUTION}
    return json.loads(json.dumps(dict(run, specverify=__version__)))


class ResumeFile:
    """The resume file of one run (module docstring): loaded from ``path`` if it exists, else started empty.

    ``finished(name)`` gives a finished scenario's results (None if not finished); ``finish(name, results)``
    records them; ``journal(name, side)`` is what a ``Session`` records a scenario's draws in (``side`` 1: the
    ``--against`` decoder's session)."""

    def __init__(self, path: str, config: RunConfig, *, block_draws: Optional[int] = None):
        check(isinstance(path, (str, os.PathLike)) and str(path), f"resume={path!r} must be a file path.")
        self.path = os.path.abspath(os.fspath(path))
        self.identity = dict(identity_of(config), block_draws=block_draws)  # a run in parts is another run
        self.command = config.reproduce()
        self.data = self._load() if os.path.exists(self.path) else self._fresh()
        self.resumed = bool(self.data["finished"] or self.data["draws"])
        self._finished_text = json.dumps(self.data["finished"])
        self._remove_stale()
        self.write()  # an unwritable PATH fails here, before any work

    def _fresh(self) -> dict:
        return dict(schema_version=RESUME_SCHEMA_VERSION, kind=KIND, run=self.identity, command=self.command,
                    finished={}, draws={}, reproducibility=None, interruptions=[])  # fmt: skip

    def _load(self) -> dict:
        where = f"--resume {self.path}"
        try:
            with open(self.path) as fh:
                data = json.load(fh)
            check(isinstance(data, dict) and data.get("kind") == KIND, f"{where}: not a specverify resume file")
            check(data.get("schema_version") == RESUME_SCHEMA_VERSION, f"{where}: schema {data.get('schema_version')}")
            for key in ("run", "finished", "draws", "interruptions"):
                check(key in data, f"{where}: no {key!r}")
        except (OSError, ValueError) as exc:  # InvalidArgument is a ValueError
            raise InvalidArgument(
                f"{where} cannot be read as a resume file ({exc}). Delete it to start afresh, or give another PATH."
            ) from None
        differ = sorted(k for k in set(data["run"]) | set(self.identity) if data["run"].get(k) != self.identity.get(k))
        if differ:
            said = "; ".join(f"{k}: {data['run'].get(k)!r} in the file, {self.identity.get(k)!r} here" for k in differ)
            raise InvalidArgument(
                f"{where} was written by another command ({said}). Its command: {data.get('command')}. Run that "
                "command to resume it, or give another PATH (or delete the file) to start this one afresh."
            )
        return data

    def finished(self, name: str) -> Optional[list]:
        rows = self.data["finished"].get(name)
        return None if rows is None else [ScenarioResult.from_dict(r) for r in rows]

    def finish(self, name: str, results) -> None:
        """Record ``name``'s results (a list of ``ScenarioResult``, or a part's document) and drop its draws."""
        self.data["finished"][name] = results if isinstance(results, dict) else [r.to_dict() for r in results]
        self.data["draws"].pop(name, None)
        self._finished_text = json.dumps(self.data["finished"])
        self.write()

    def part(self, part_id: str) -> Optional[dict]:
        """A finished part's document (a run in parts, ``parts.run_parts``), None if not finished."""
        return self.data["finished"].get(f"part {part_id}")

    def finish_part(self, part_id: str, doc: dict) -> None:
        self.data["draws"].pop(part_id, None)  # the block's draws, recorded under its id while it ran
        self.finish(f"part {part_id}", doc)

    def reproducibility(self) -> Optional[tuple]:
        got = self.data.get("reproducibility")
        return None if got is None else tuple(got)

    def record_reproducibility(self, value: tuple) -> None:
        self.data["reproducibility"] = list(value)
        self.write()

    def interrupted(self, reason: str) -> None:
        """Record how the run ended before its certificate (a protocol violation: not evidence, see above)."""
        self.data["interruptions"].append(reason)
        self.write()

    def journal(self, name: str, side: int = 0) -> Journal:
        entries = self.data["draws"].setdefault(name, {}).setdefault(str(side), [])
        return Journal(self, entries)

    def in_flight(self) -> dict:
        """``{scenario: draws recorded}`` of the scenarios with recorded draws that have not finished."""
        return {n: sum(e["done"] for side in d.values() for e in side) for n, d in self.data["draws"].items()}

    def _temporary(self) -> tuple:
        return os.path.dirname(self.path), f".{os.path.basename(self.path)}.", ".tmp"

    def _remove_stale(self) -> None:
        """Temporary files of PATH a kill left behind mid-write (never read: PATH is replaced only when whole)."""
        folder, prefix, suffix = self._temporary()
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if name.startswith(prefix) and name.endswith(suffix):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))

    def write(self) -> None:
        """The whole file, atomically: a temporary file in PATH's directory, fsynced, then renamed over PATH."""
        rest = {k: v for k, v in self.data.items() if k != "finished"}
        text = json.dumps(rest)[:-1] + ', "finished": ' + self._finished_text + "}"
        folder, prefix, suffix = self._temporary()
        try:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
        except OSError as exc:
            raise InvalidArgument(f"--resume {self.path}: cannot write in {folder} ({exc}).") from None
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


class Journal:
    """One scenario's draws in a resume file, in the order the check asks for them: the k-th ``open`` of a rerun
    is the k-th draw of the first run (the same request, n and start), so a check that decides from its counts
    asks for the same draws again. A draw that does not match starts afresh from there."""

    def __init__(self, owner: ResumeFile, entries: list):
        self.owner, self.entries, self.cursor = owner, entries, 0

    def open(self, request, n: int, start: int) -> Entry:
        key = dict(prompt=list(request.prompt), params=repr(request.params), gamma=request.num_draft_tokens,
                   seed=request.seed, n=n, start=start)  # fmt: skip
        k, self.cursor = self.cursor, self.cursor + 1
        if k < len(self.entries) and self.entries[k]["key"] == json.loads(json.dumps(key)):
            return Entry(self.owner, self.entries[k])
        del self.entries[k:]
        self.entries.append(dict(key=key, done=0, state=None, kind=None))
        return Entry(self.owner, self.entries[k])


class Entry:
    """One draw's record: ``done`` draws so far and their counts (``Draws`` on the fast path, a ``Tally`` on the
    slow path); :meth:`save` records a new state and rewrites the file (once per decoder call)."""

    def __init__(self, owner: ResumeFile, record: dict):
        self.owner, self.record = owner, record

    @property
    def done(self) -> int:
        return self.record["done"]

    def state(self) -> object:
        kind, state = self.record["kind"], self.record["state"]
        if state is None:
            return None
        return draws_from_dict(state) if kind == "draws" else tally_from_dict(state)

    def save(self, state: object, done: int) -> None:
        from specverify.certification.run.tally import Draws

        is_draws = isinstance(state, Draws)
        self.record.update(done=done, kind="draws" if is_draws else "tally")
        self.record["state"] = draws_to_dict(state) if is_draws else tally_to_dict(state)
        self.owner.write()
