"""Where a run's part documents are kept while it executes: one interface, three stores.

- :class:`MemoryStore`: in this process only (a run nobody resumes; a pytest item's parts).
- :class:`ResumeFile` (``--resume PATH``): the documents on disk, and for the part in flight each of its draws with
  the counts so far, rewritten after every decoder call — to a temporary file in the same directory, flushed and
  fsynced, then ``os.replace``\\ d over PATH, so a kill at any moment leaves the last complete state. The same command
  with the same PATH keeps every finished part and reruns the one in flight: each of its draws already recorded is
  given back from the file, and the draw that was cut continues from its last recorded call (draw i of a seeded
  request depends only on (seed, i): the same counts as an uninterrupted run). Checks that call the decoder
  directly (greedy, collision, mixed batches, batch composition, reproducibility) rerun from their start. Unseeded
  scenarios and engines draw fresh entropy after a resume: independent draws of the same law, not the same counts.
  Nothing that broke the protocol or failed to set up is kept as a finished part (a resume asks the decoder again;
  one that breaks the protocol deterministically breaks it again); the file lists each such ending under
  ``interruptions``. A file written by another run is refused naming what differs (every run option except how the
  decoder runs — ``isolation``, ``timeout_s``, ``threads`` — and the execution's ``block_draws``, ``shard`` and
  ``engine_configs``, but not its executor: a Ray run resumes here and the other way round).
- :class:`PartsBundle`: the documents of a shard (``--counts-out``, kind ``specverify-parts``), what ``specverify
  merge`` reads back.

Each has ``get(id)``, ``put(id, doc)``, ``documents()`` and ``journal(id, side)`` (None: no draw is recorded).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from typing import Optional

from specverify.certification.execution.plan import Plan
from specverify.certification.results.migrate import PART_SCHEMA_VERSION
from specverify.certification.run.tally import draws_from_dict, draws_to_dict, tally_from_dict, tally_to_dict
from specverify.errors import InvalidArgument, check

__all__ = ["MemoryStore", "ResumeFile", "PartsBundle", "RESUME_SCHEMA_VERSION", "BUNDLE_KIND", "identity_of"]

RESUME_SCHEMA_VERSION = 2  # 2: the parts of a plan (1 kept whole scenarios and a run in parts apart)
KIND = "specverify-resume"
BUNDLE_KIND = "specverify-parts"
HOW = ("isolation", "timeout_s", "threads")  # how the decoder runs, not what it draws


class MemoryStore:
    """Part documents by id, in this process."""

    earlier_s = 0.0  # wall seconds of the earlier processes of this run (a resume file's; none in memory)

    def __init__(self):
        self._docs: dict = {}

    def get(self, part_id: str) -> Optional[dict]:
        return self._docs.get(part_id)

    def put(self, part_id: str, doc: dict) -> None:
        self._docs[part_id] = doc

    def documents(self) -> list:
        return list(self._docs.values())

    def journal(self, part_id: str, side: int) -> None:
        return None


def identity_of(plan: Plan) -> dict:
    """What makes a resume file this run's: every run option but how the decoder runs, what shapes the plan's parts,
    and the specverify version."""
    from specverify import __version__

    run = {k: v for k, v in plan.config.to_dict().items() if k not in HOW}
    execution = plan.execution
    shape = dict(block_draws=execution.block_draws, shard=execution.to_dict()["shard"],
                 engine_configs=list(execution.engine_configs))  # fmt: skip
    return json.loads(json.dumps(dict(run, **shape, specverify=__version__)))


class ResumeFile(MemoryStore):
    """The resume file of one run (module docstring): loaded from ``path`` if it exists, else started empty."""

    def __init__(self, path: str, plan: Plan):
        super().__init__()
        check(isinstance(path, (str, os.PathLike)) and str(path), f"resume={path!r} must be a file path.")
        from specverify.certification.config.execution import command_line

        self.path = os.path.abspath(os.fspath(path))
        self.identity = identity_of(plan)
        self.command = command_line(plan.config, plan.execution)
        self.data = self._load() if os.path.exists(self.path) else self._fresh()
        self.resumed = bool(self.data["finished"] or self.data["draws"])
        # the run's wall time so far: each process adds its own at every write (a file of an older specverify,
        # without the key, counts from this process)
        self.earlier_s = float(self.data.get("spent_s", 0.0))
        self._started = time.perf_counter()
        self._docs = dict(self.data["finished"])
        self._finished_text = json.dumps(self.data["finished"])
        self._remove_stale()
        self.write()  # an unwritable PATH fails here, before any work

    def _fresh(self) -> dict:
        return dict(schema_version=RESUME_SCHEMA_VERSION, kind=KIND, run=self.identity, command=self.command,
                    finished={}, draws={}, interruptions=[])  # fmt: skip

    def _load(self) -> dict:
        where = f"--resume {self.path}"
        try:
            with open(self.path) as fh:
                data = json.load(fh)
            check(isinstance(data, dict) and data.get("kind") == KIND, f"{where}: not a specverify resume file")
            check(
                data.get("schema_version") == RESUME_SCHEMA_VERSION,
                f"{where}: schema {data.get('schema_version')} (this specverify writes {RESUME_SCHEMA_VERSION})",
            )
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

    def put(self, part_id: str, doc: dict) -> None:
        """Keep ``doc``; on disk only when it is evidence (no violation, no set-up failure: then its draws so far
        stay, and a resume continues from the last recorded call), its draws then dropped."""
        super().put(part_id, doc)
        ending = doc.get("violation") or doc.get("error")
        if ending:
            self.data["interruptions"].append(ending)
        else:
            self.data["draws"].pop(part_id, None)
            self.data["finished"][part_id] = doc
            self._finished_text = json.dumps(self.data["finished"])
        self.write()

    def journal(self, part_id: str, side: int) -> Journal:
        entries = self.data["draws"].setdefault(part_id, {}).setdefault(str(side), [])
        return Journal(self, entries)

    def in_flight(self) -> dict:
        """``{part id: draws recorded}`` of the parts with recorded draws that have not finished."""
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
        """The whole file, atomically: a temporary file in PATH's directory, fsynced, then renamed over PATH (the
        finished parts' text is kept between writes: only the part in flight changes after a call)."""
        self.data["spent_s"] = self.earlier_s + (time.perf_counter() - self._started)
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
    """One part's draws on one decoder side in a resume file, in the order its check asks for them: the k-th
    ``open`` of a rerun is the k-th draw of the first run (the same request, n and start), so a check that decides
    from its counts asks for the same draws again. A draw that does not match starts afresh from there."""

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


class PartsBundle(MemoryStore):
    """A shard's part documents (kind ``specverify-parts``): what ``--counts-out`` writes and the merge reads."""

    def __init__(self, plan: Plan):
        super().__init__()
        self.plan = plan

    def to_dict(self) -> dict:
        execution = self.plan.execution
        return {
            "schema_version": PART_SCHEMA_VERSION,
            "kind": BUNDLE_KIND,
            "shard": list(execution.shard) if execution.shard else None,
            "block_draws": execution.block_draws,
            "engine_configs": list(execution.engine_configs),
            "run": self.plan.config.to_dict(),
            "parts": self.documents(),
        }

    @classmethod
    def of(cls, plan: Plan, docs) -> PartsBundle:
        bundle = cls(plan)
        for doc in docs:
            bundle.put(doc["part"]["id"], doc)
        return bundle
