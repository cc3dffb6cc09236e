"""The ``specverify`` command line's arguments: the parser, exit codes, and the checks run before any work."""

from __future__ import annotations

import argparse
import enum
import os

from specverify.enums import Level, Verdict

__all__ = ["ExitCode", "EPILOG", "parser", "check_number_flags", "check_outputs", "extra_flags", "SEED_LIMIT"]


class ExitCode(enum.IntEnum):
    """Process exit codes."""

    MEETS = 0  # the decoder meets --require
    FALLS_SHORT = 1  # it does not (including invalid and inconclusive)
    USAGE = 2  # bad arguments, or the factory's module does not exist
    INTERNAL = 3  # a bug in specverify itself
    ERROR = 4  # verdict error: the factory or adapter could not be set up (it says nothing about the decoder)


EPILOG = (
    "exit codes: "
    + ", ".join(f"{c.value} {c.name.lower().replace('_', ' ')}" for c in ExitCode)
    + " (meets = the verdict is at least --require; invalid and inconclusive never meet it; error = the factory "
    "or adapter could not be set up: its module raised on import, the factory raised, or it declares unknown "
    "capabilities). MODULE is imported with the current directory first on the path (as `python -m` does), in "
    "the worker process too. Progress goes to stderr, one line per scenario with an ETA."
)
SEED_LIMIT = 2**62  # certification seeds: [0, 2**62) in the CLI and certify() alike


DRAFT_CHOICES = ("ar", "heads", "markov", "mtp", "ngram", "tree")  # certification.scenarios.DRAFT_FAMILIES


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specverify", description="Is your speculative decoder exact?", epilog=EPILOG)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser(
        "certify",
        help="certify a decoder factory MODULE:ATTR",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument(
        "factory",
        help="MODULE:ATTR of factory(target, draft) -> decoder, e.g. specverify.reference:make_decoder (MODULE may "
        "live in the current directory)",
    )
    c.add_argument(
        "--level",
        choices=[level.value for level in Level],
        default=Level.STANDARD.value,
        help="detects TV >= 0.05 / 0.02 / 0.01 per scenario with power 0.9 (default standard)",
    )
    c.add_argument(
        "--seed", type=int, default=0, help="seed of every request, in [0, 2**62); reproduces the run (default 0)"
    )
    c.add_argument("--alpha", type=float, default=1e-6, help="family false-alarm rate (default 1e-6)")
    c.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this scenario (repeatable); `specverify scenarios` lists them",
    )
    c.add_argument("--json", metavar="PATH", help="write the certificate as JSON to PATH ('-' for stdout)")
    c.add_argument(
        "--require",
        choices=[v.value for v in Verdict.decoder_verdicts()[:3]],
        default=Verdict.EXACT.value,
        help="verdict needed for exit code 0 (default exact)",
    )
    c.add_argument(
        "--require-reproducible",
        action="store_true",
        help="also require same seed -> same output (alone, batched, repeated)",
    )
    c.add_argument(
        "--require-metrics",
        action="store_true",
        help="also require the metrics check: reported acceptance consistent and inside its exact interval",
    )
    c.add_argument(
        "--require-speculation",
        action="store_true",
        help="also require that speculation was observed (some draft accepted); exit 1 otherwise",
    )
    c.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="threads of the decoder's worker process (torch, OMP_NUM_THREADS; default 1)",
    )
    c.add_argument(
        "--isolation",
        choices=("process", "none"),
        default="process",
        help="run the decoder in a worker process with a per-call timeout (default) or in-process (none: a call "
        "cannot be interrupted, so --timeout does not apply and --budget is checked between calls only)",
    )
    c.add_argument("--timeout", type=float, default=120.0, help="per-call time limit in seconds (default 120)")
    c.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wall-clock budget: a pilot measures throughput, samples are allocated (core first); short scenarios "
        "make the verdict inconclusive with the TV they could detect (default none)",
    )
    c.add_argument(
        "--max-samples", type=int, default=None, metavar="N", help="total outcomes to allocate (default none)"
    )
    c.add_argument(
        "--against",
        metavar="plain|MODULE:ATTR",
        help="two-sample mode: compare each sampling scenario with this decoder (plain: the `plain` factory beside "
        "FACTORY, speculation off) instead of the exact law",
    )
    c.add_argument(
        "--target",
        metavar="DIR",
        help="your own target checkpoint directory (with --draft DIR and --against): two-sample scenarios only, "
        "no exact law, so never `exact` (default: the built-in model families)",
    )
    c.add_argument("--draft", metavar="DIR", help="your own draft checkpoint directory (with --target DIR)")
    c.add_argument(
        "--sequential",
        action="store_true",
        help="stop each sampling scenario at its first decisive look (early reject / early pass at the planned power)",
    )
    c.add_argument(
        "--models",
        choices=("toy", "checkpoint"),
        default="toy",
        help="model family: toy tables (default) or tiny Llama checkpoints real engines load (hf extra)",
    )
    c.add_argument(
        "--drafts",
        choices=DRAFT_CHOICES,
        default="ar",
        help="draft family whose scenarios run; the factory receives its draft object (default ar; toy models)",
    )
    c.add_argument(
        "--shard", metavar="I/N", help="run only shard I of N (scenarios split by position; merge the parts)"
    )
    c.add_argument("--counts-out", metavar="PATH", help="with --shard: write this shard's counts file to PATH")
    _visual_flags(c)
    m = sub.add_parser("merge", help="merge the --counts-out files of every shard into one certificate", epilog=EPILOG)
    m.add_argument("parts", nargs="+", metavar="PART.json", help="the counts file of every shard of one run")
    m.add_argument("--json", metavar="PATH", help="write the certificate as JSON to PATH ('-' for stdout)")
    m.add_argument(
        "--require",
        choices=[v.value for v in Verdict.decoder_verdicts()[:3]],
        default=Verdict.EXACT.value,
        help="verdict needed for exit code 0 (default exact)",
    )
    _visual_flags(m)
    r = sub.add_parser("report", help="re-render a certificate saved with --json: text, and --html / --plots")
    r.add_argument("certificate", metavar="CERT.json", help="a certificate written by certify or merge --json")
    r.add_argument("--html", metavar="PATH.html", help="write the self-contained HTML report (report extra)")
    r.add_argument("--plots", metavar="DIR", help="write the report's plots as PNG files into DIR (report extra)")
    sub.add_parser("zoo", help="list the built-in decoders with their expected verdicts")
    sc = sub.add_parser("scenarios", help="list the certification scenarios")
    sc.add_argument("--models", choices=("toy", "checkpoint"), default="toy", help="model family (default toy)")
    sc.add_argument("--drafts", choices=DRAFT_CHOICES, default="ar", help="draft family (default ar)")
    sc.epilog = (
        "columns: name, kind, core (yes: needed for exact), the capabilities a decoder must declare, what it tests"
    )
    sp = sub.add_parser("speedup", help="the speed model: E[K], speed-up and best γ from acceptance and costs")
    acc = sp.add_mutually_exclusive_group(required=True)
    acc.add_argument("--acceptance", type=float, metavar="A", help="constant per-position acceptance rate in [0, 1]")
    acc.add_argument("--acceptance-per-position", metavar="A1,A2,...", help="acceptance rate of draft 1, 2, ...")
    acc.add_argument(
        "--from",
        dest="from_cert",
        metavar="CERT.json",
        help="measured per-position acceptance from a certificate's metrics check (docs/metrics.md)",
    )
    sp.add_argument("--scenario", dest="from_scenario", help="with --from: the scenario to read (default: the first)")
    sp.add_argument("--gamma", type=int, default=None, help="drafts per round γ (default 4; with --from: its γ)")
    sp.add_argument("--t-target", type=float, default=None, help="ms per target call (default 1; --from: tpot)")
    sp.add_argument("--t-draft", type=float, default=None, help="ms per draft call (default 0.1; --from: draft)")
    sp.add_argument(
        "--t-verify", metavar="MS[,MS...]", help="ms per verify call, or one per γ = 1, 2, ... (default: --t-target)"
    )
    sp.add_argument("--t-state", type=float, default=None, help="ms of state work per round (default 0; --from)")
    sp.add_argument("--batch", type=int, default=1, help="sequences the target serves at once (default 1)")
    sp.add_argument("--output-len", type=int, default=None, help="tokens per output, for the short-output warning")
    sp.add_argument("--draft-params", type=float, default=None, help="draft parameters, for the memory warning")
    sp.add_argument("--target-params", type=float, default=None, help="target parameters, for the memory warning")
    sp.add_argument("--json", action="store_true", help="print JSON")
    pl = sub.add_parser("plan", help="sample size to detect a TV of EPSILON on a law of K outcomes")
    pl.add_argument("--outcomes", type=int, required=True, help="number of outcomes K (uniform law: worst case)")
    pl.add_argument("--epsilon", type=float, default=0.02, help="total variation to detect (default 0.02)")
    pl.add_argument("--alpha", type=float, default=1e-6, help="false-alarm rate of this one test (default 1e-6)")
    pl.add_argument("--power", type=float, default=0.9, help="power (default 0.9)")
    return p


def _visual_flags(p) -> None:
    p.add_argument(
        "--report",
        metavar="PATH.html",
        help="also write a self-contained HTML report with embedded plots (needs the report extra: matplotlib)",
    )
    p.add_argument("--plots", metavar="DIR", help="also write the report's plots as PNG files into DIR (report extra)")


def check_number_flags(args) -> str | None:
    """The first CLI flag with a bad value, as a message naming the flag as typed; None when all are fine."""
    if not 0 <= args.seed < SEED_LIMIT:
        return f"--seed {args.seed} must be an integer in [0, 2**62)"
    if not 0 < args.alpha < 0.5:
        return f"--alpha {args.alpha:g} must lie in (0, 0.5), e.g. 1e-6"
    if not args.timeout > 0:
        return f"--timeout {args.timeout:g} must be > 0 seconds"
    if args.budget is not None and not args.budget > 0:
        return f"--budget {args.budget:g} must be > 0 seconds"
    if args.max_samples is not None and args.max_samples < 1:
        return f"--max-samples {args.max_samples} must be >= 1"
    if args.threads is not None and args.threads < 1:
        return f"--threads {args.threads} must be >= 1"
    return None


def _unwritable(flag: str, path: str | None, *, directory: bool = False) -> str | None:
    """Why ``path`` (a file, or a directory to create) cannot be written, before the run; None when it can."""
    if not path or path == "-":
        return None
    target = os.path.abspath(path)
    if directory:
        probe = target
        while not os.path.exists(probe):
            probe = os.path.dirname(probe)
        if not os.path.isdir(probe) or not os.access(probe, os.W_OK):
            return f"{flag} {path}: cannot create or write the directory (not writable: {probe})"
        return None
    if os.path.isdir(target):
        return f"{flag} {path}: is a directory, expected a file path"
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        return f"{flag} {path}: the directory {parent} does not exist"
    if not os.access(target if os.path.exists(target) else parent, os.W_OK):
        return f"{flag} {path}: not writable"
    return None


def check_outputs(args) -> str | None:
    checks = [
        ("--json", getattr(args, "json", None), False),
        ("--report", getattr(args, "report", None), False),
        ("--html", getattr(args, "html", None), False),
        ("--counts-out", getattr(args, "counts_out", None), False),
        ("--plots", getattr(args, "plots", None), True),
    ]
    return next((why for flag, path, d in checks if (why := _unwritable(flag, path, directory=d))), None)


def extra_flags(args) -> list:
    """The flags that do not change the draws but belong to the command line that reproduces the run."""
    out = [f"--require {args.require}"] if args.require != Verdict.EXACT.value else []
    out += ["--require-reproducible"] if args.require_reproducible else []
    out += ["--require-speculation"] if args.require_speculation else []
    out += ["--require-metrics"] if getattr(args, "require_metrics", False) else []
    out += [f"--counts-out {args.counts_out}"] if args.counts_out else []
    return out
