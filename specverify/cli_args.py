"""The ``specverify`` command line's arguments: the parser, exit codes, and the checks run before any work."""

from __future__ import annotations

import argparse
import enum
import os

from specverify.certification.config.run_config import add_run_arguments
from specverify.enums import DraftFamily, ModelFamily, Verdict

__all__ = ["ExitCode", "EPILOG", "parser", "check_outputs"]


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
DRAFT_CHOICES = tuple(d.value for d in DraftFamily)
MODEL_CHOICES = tuple(m.value for m in ModelFamily)


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
    add_run_arguments(c)
    c.add_argument(
        "--server-url",
        metavar="URL",
        help="certify a running server (FACTORY specverify.adapters.server:attached or :attached_plain) at URL, "
        "with --server-declaration: the run keeps the scenarios of the pair it serves (docs/servers.md)",
    )
    c.add_argument("--server-declaration", metavar="FILE", help="the JSON declaration of the pair and γ it serves")
    c.add_argument("--json", metavar="PATH", help="write the certificate as JSON to PATH ('-' for stdout)")
    _visual_flags(c)
    m = sub.add_parser("merge", help="merge the --counts-out files of every shard into one certificate", epilog=EPILOG)
    m.add_argument("parts", nargs="+", metavar="PART.json", help="the counts file of every shard of one run")
    m.add_argument("--json", metavar="PATH", help="write the certificate as JSON to PATH ('-' for stdout)")
    m.add_argument(
        "--require",
        choices=[v.value for v in Verdict.decoder_verdicts()[:3]],
        default=None,
        help="verdict needed for exit code 0 (default: what the shards were run with, exact unless --require)",
    )
    _visual_flags(m)
    r = sub.add_parser("report", help="re-render a certificate saved with --json: text, and --html / --plots")
    r.add_argument("certificate", metavar="CERT.json", help="a certificate written by certify or merge --json")
    r.add_argument("--html", metavar="PATH.html", help="write the self-contained HTML report (report extra)")
    r.add_argument("--plots", metavar="DIR", help="write the report's plots as PNG files into DIR (report extra)")
    sub.add_parser("zoo", help="list the built-in decoders with their expected verdicts")
    sc = sub.add_parser("scenarios", help="list the certification scenarios")
    sc.add_argument("--models", choices=MODEL_CHOICES, default="toy", help="model family (default toy)")
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
    mo = sub.add_parser("models", help="the checkpoint models as servers load them (docs/servers.md)")
    mo_sub = mo.add_subparsers(dest="models_command", required=True)
    ex = mo_sub.add_parser("export", help="write every checkpoint pair of the matrix (and MiMo) with a manifest")
    ex.add_argument("dir", metavar="DIR", help="directory to write the bundle into (created if missing)")
    ex.add_argument("--no-gguf", action="store_true", help="write no GGUF files (llama.cpp's format)")
    ex.add_argument("--gamma", type=int, default=3, help="γ of the manifest's serving lines (default 3)")
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
        help="also write a self-contained HTML report with embedded plots (needs the report extra, matplotlib: "
        "checked before the run)",
    )
    p.add_argument(
        "--plots",
        metavar="DIR",
        help="also write the report's plots as PNG files into DIR (report extra, checked first)",
    )


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
    """Why the outputs ``args`` asks for cannot be written, or None: each path writable, and the ``report`` extra
    installed when ``--report``, ``--html`` or ``--plots`` is given. The commands call it before any work (and
    before the factory's module or torch is imported), so a missing extra costs milliseconds, not a run."""
    checks = [
        ("--json", getattr(args, "json", None), False),
        ("--report", getattr(args, "report", None), False),
        ("--html", getattr(args, "html", None), False),
        ("--counts-out", getattr(args, "counts_out", None), False),
        ("--resume", getattr(args, "resume", None), False),
        ("--plots", getattr(args, "plots", None), True),
    ]
    why = next((why for flag, path, d in checks if (why := _unwritable(flag, path, directory=d))), None)
    return why or _missing_extra([flag for flag, path, _ in checks if path and flag in _DRAWN])


_DRAWN = ("--report", "--html", "--plots")  # the outputs that draw plots: matplotlib, the report extra


def _missing_extra(flags: list) -> str | None:
    if not flags:
        return None
    from specverify.report.plots import missing_report_extra

    hint = missing_report_extra()
    if hint is None:
        return None
    named = " and ".join(flags)
    return f"{named}: matplotlib is not installed here. {hint[0].upper()}{hint[1:]}. Or leave out {named}."
