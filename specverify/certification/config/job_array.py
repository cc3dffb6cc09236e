"""``--shard auto``: the shard of this process from a CI job array's variables (docs/ci.md).

Shards are 1-based in specverify (``--shard I/N``, 1 <= I <= N); job arrays number their jobs from 0 (Buildkite,
Kubernetes indexed jobs) or from any start with a step (Slurm). Each system read here gives a 0-based index and,
where it carries one, a count:

- Buildkite: ``BUILDKITE_PARALLEL_JOB`` (0-based) and ``BUILDKITE_PARALLEL_JOB_COUNT``;
- Kubernetes indexed jobs: ``JOB_COMPLETION_INDEX`` (0-based), no count;
- Slurm: ``(SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP`` (step 1 when unset) and
  ``SLURM_ARRAY_TASK_COUNT``.

The count may also come from ``auto/N`` or ``$SPECVERIFY_SHARD_COUNT`` (the only source on Kubernetes). Every
source that is set must agree: two systems that name different shards, or a count that differs from ``auto/N``, is
an error, never a guess, since a wrong split silently drops scenarios from the merge.

>>> shard_from_environment("auto", {"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "4"})
(1, 4)
>>> shard_from_environment("auto/3", {"JOB_COMPLETION_INDEX": "2"})
(3, 3)
>>> env = {"SLURM_ARRAY_TASK_ID": "14", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_STEP": "2",
...        "SLURM_ARRAY_TASK_COUNT": "5"}
>>> shard_from_environment("auto", env)
(3, 5)
"""

from __future__ import annotations

from typing import Mapping, Optional

__all__ = ["JobArrayError", "is_auto", "shard_from_environment", "VARIABLES"]

VARIABLES = ("BUILDKITE_PARALLEL_JOB", "JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID")
COUNT_VARIABLE = "SPECVERIFY_SHARD_COUNT"


class JobArrayError(ValueError):
    """Why the job array's variables give no shard (text that starts with a verb: 'needs ...', 'has ...')."""


def is_auto(value: object) -> bool:
    return isinstance(value, str) and (value.strip() == "auto" or value.strip().startswith("auto/"))


def _int(env: Mapping, name: str, *, minimum: int = 0) -> int:
    text = env[name].strip()
    try:
        value = int(text)
    except ValueError:
        raise JobArrayError(f"has ${name}={text!r}, not an integer: is this the job array's own variable?") from None
    if value < minimum:
        raise JobArrayError(f"has ${name}={value}, expected an integer >= {minimum}")
    return value


def _buildkite(env: Mapping) -> tuple:
    count = _int(env, "BUILDKITE_PARALLEL_JOB_COUNT", minimum=1) if env.get("BUILDKITE_PARALLEL_JOB_COUNT") else None
    return "Buildkite", "$BUILDKITE_PARALLEL_JOB", _int(env, "BUILDKITE_PARALLEL_JOB"), count


def _kubernetes(env: Mapping) -> tuple:
    return "Kubernetes", "$JOB_COMPLETION_INDEX", _int(env, "JOB_COMPLETION_INDEX"), None


def _slurm(env: Mapping) -> tuple:
    task = _int(env, "SLURM_ARRAY_TASK_ID")
    low = _int(env, "SLURM_ARRAY_TASK_MIN") if env.get("SLURM_ARRAY_TASK_MIN") else 0
    step = _int(env, "SLURM_ARRAY_TASK_STEP", minimum=1) if env.get("SLURM_ARRAY_TASK_STEP") else 1
    if task < low or (task - low) % step:
        raise JobArrayError(
            f"has $SLURM_ARRAY_TASK_ID={task}, not on the array's grid {low}, {low + step}, ... "
            f"($SLURM_ARRAY_TASK_MIN={low}, $SLURM_ARRAY_TASK_STEP={step})"
        )
    count = _int(env, "SLURM_ARRAY_TASK_COUNT", minimum=1) if env.get("SLURM_ARRAY_TASK_COUNT") else None
    where = "($SLURM_ARRAY_TASK_ID - $SLURM_ARRAY_TASK_MIN) / $SLURM_ARRAY_TASK_STEP"
    return "Slurm", where, (task - low) // step, count


_SYSTEMS = {"BUILDKITE_PARALLEL_JOB": _buildkite, "JOB_COMPLETION_INDEX": _kubernetes, "SLURM_ARRAY_TASK_ID": _slurm}


def _given_count(spec: str, env: Mapping) -> list:
    """The counts given outside the job array: ``auto/N`` and ``$SPECVERIFY_SHARD_COUNT`` (source, count)."""
    out = []
    head, _, tail = spec.strip().partition("/")
    if tail:
        try:
            out.append(("auto/N", int(tail)))
        except ValueError:
            raise JobArrayError("must read auto, auto/N (N >= 1) or I/N, e.g. auto/4") from None
        if out[-1][1] < 1:
            raise JobArrayError("must read auto/N with N >= 1, e.g. auto/4")
    if env.get(COUNT_VARIABLE):
        out.append((f"${COUNT_VARIABLE}", _int(env, COUNT_VARIABLE, minimum=1)))
    return out


def _agreed(found: list, counts: list) -> tuple:
    indices = {index for _, _, index, _ in found}
    if len(indices) > 1:
        named = "; ".join(f"{system}: {where} = {index} (shard {index + 1})" for system, where, index, _ in found)
        raise JobArrayError(
            f"has job-array variables of several systems that disagree ({named}): unset the ones that do not "
            "belong to this job, or give --shard I/N"
        )
    sources = counts + [(f"{system} count", count) for system, _, _, count in found if count is not None]
    if len({count for _, count in sources}) > 1:
        named = ", ".join(f"{where} = {count}" for where, count in sources)
        raise JobArrayError(f"has shard counts that disagree ({named}): give one count")
    if not sources:
        system, where = found[0][0], found[0][1]
        raise JobArrayError(
            f"needs a shard count: {system} gives the index ({where}) but no count; write --shard auto/N or set "
            f"${COUNT_VARIABLE}=N"
        )
    return found[0], sources[0][1]


def shard_from_environment(spec: str, env: Mapping) -> Optional[tuple]:
    """The 1-based shard ``(I, N)`` that ``spec`` (``auto`` or ``auto/N``) names in the environment ``env``.

    Raises ``JobArrayError`` (a ``ValueError`` whose text says what is wrong and how to fix it) when no job-array
    variable is set, when two systems' variables or two counts disagree, when no count is given, or when the index
    is out of range."""
    counts = _given_count(spec, env)
    found = [_SYSTEMS[name](env) for name in VARIABLES if env.get(name, "").strip()]
    if not found:
        raise JobArrayError(
            f"needs a job array: none of ${', $'.join(VARIABLES)} is set (Buildkite parallelism, a Kubernetes "
            "indexed job, a Slurm array); outside one give --shard I/N"
        )
    (system, where, index, _), total = _agreed(found, counts)
    if index >= total:
        raise JobArrayError(
            f"has {where} = {index} (0-based), outside a split into {total} shards: the job array has more jobs than "
            "the shard count says; make them agree"
        )
    return index + 1, total
