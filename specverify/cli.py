"""``specverify`` command line: certify a decoder, list the zoo and scenarios, plan sample sizes."""

from __future__ import annotations

import argparse
import enum
import os
import sys

from specverify.enums import Level, Verdict

__all__ = ["main", "ExitCode"]


class ExitCode(enum.IntEnum):
    """Process exit codes."""

    MEETS = 0  # the decoder meets --require
    FALLS_SHORT = 1  # it does not (including invalid and inconclusive)
    USAGE = 2  # bad arguments, or the factory cannot be imported
    INTERNAL = 3  # a bug in specverify itself


EPILOG = (
    "exit codes: "
    + ", ".join(f"{c.value} {c.name.lower().replace('_', ' ')}" for c in ExitCode)
    + " (meets = the verdict is at least --require; invalid and inconclusive never meet it)"
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specverify", description="Is your speculative decoder exact?", epilog=EPILOG)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser(
        "certify",
        help="certify a decoder factory MODULE:ATTR",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument(
        "factory", help="MODULE:ATTR of factory(target, draft) -> decoder, e.g. specverify.reference:make_decoder"
    )
    c.add_argument(
        "--level",
        choices=[level.value for level in Level],
        default=Level.STANDARD.value,
        help="detects TV >= 0.05 / 0.02 / 0.01 per scenario with power 0.9 (default standard)",
    )
    c.add_argument("--seed", type=int, default=0, help="seed of every request; reproduces the run (default 0)")
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
    sp = sub.add_parser("speedup", help="the speed model: E[K], speed-up and best γ from acceptance and costs")
    acc = sp.add_mutually_exclusive_group(required=True)
    acc.add_argument("--acceptance", type=float, metavar="A", help="constant per-position acceptance rate in [0, 1]")
    acc.add_argument("--acceptance-per-position", metavar="A1,A2,...", help="acceptance rate of draft 1, 2, ...")
    sp.add_argument("--gamma", type=int, default=4, help="drafts per round γ (default 4)")
    sp.add_argument("--t-target", type=float, default=1.0, help="ms per target call (default 1)")
    sp.add_argument("--t-draft", type=float, default=0.1, help="ms per draft call (default 0.1)")
    sp.add_argument(
        "--t-verify", metavar="MS[,MS...]", help="ms per verify call, or one per γ = 1, 2, ... (default: --t-target)"
    )
    sp.add_argument("--t-state", type=float, default=0.0, help="ms of state work per round (default 0)")
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


def _write_visuals(cert, html_path, plots_dir, err) -> int | None:
    """Write the HTML report and/or the PNG plots; an exit code when they cannot be written, else None."""
    if not html_path and not plots_dir:
        return None
    from specverify.report import certificate_plots, write_html, write_plots

    try:
        plots = certificate_plots(cert)
        if html_path:
            write_html(cert, html_path, plots=plots)
        if plots_dir:
            write_plots(cert, plots_dir)
    except ImportError as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    except OSError as exc:
        print(f"specverify: error: cannot write the report ({exc})", file=err)
        return ExitCode.USAGE
    return None


def _report(args, out, err) -> int:
    from specverify.errors import InvalidArgument
    from specverify.report import load_certificate, render_text

    try:
        cert = load_certificate(args.certificate)
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    out.write(render_text(cert))
    failed = _write_visuals(cert, args.html, args.plots, err)
    return ExitCode.MEETS if failed is None else failed


def _certify(args, out, err) -> int:
    from specverify.certification import certify
    from specverify.errors import InvalidArgument

    progress = (lambda msg: print(msg, file=err, flush=True)) if err.isatty() else None
    if args.counts_out and not args.shard:
        print("specverify: error: --counts-out needs --shard I/N (a whole run's certificate is --json).", file=err)
        return ExitCode.USAGE
    try:
        cert = certify(
            args.factory,
            level=args.level,
            seed=args.seed,
            alpha=args.alpha,
            scenarios=args.scenario or None,
            isolation=args.isolation,
            timeout_s=args.timeout,
            budget_s=args.budget,
            progress=progress,
            models=args.models,
            shard=args.shard,
            max_samples=args.max_samples,
            sequential=args.sequential,
            against=args.against,
        )
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    if cert.shard_info is not None and args.counts_out:
        import json

        with open(args.counts_out, "w") as fh:
            json.dump(cert.shard_info, fh, indent=1)
    return _emit(cert, args, out, err, require_reproducible=args.require_reproducible)


def _merge(args, out, err) -> int:
    from specverify.certification.shards import merge_shards
    from specverify.errors import InvalidArgument

    try:
        cert = merge_shards(args.parts)
    except (OSError, ValueError) as exc:  # InvalidArgument is a ValueError; json errors too
        reason = exc if isinstance(exc, InvalidArgument) else f"cannot read the parts ({exc})"
        print(f"specverify: error: {reason}", file=err)
        return ExitCode.USAGE
    return _emit(cert, args, out, err, require_reproducible=False)


def _emit(cert, args, out, err, *, require_reproducible: bool) -> int:
    from specverify.report import render_json, render_text

    if args.json == "-":
        out.write(render_json(cert))
    else:
        out.write(render_text(cert))
        if args.json:
            with open(args.json, "w") as fh:
                fh.write(render_json(cert))
    failed = _write_visuals(cert, args.report, args.plots, err)
    if failed is not None:
        return failed
    ok = cert.meets(args.require, require_reproducible=require_reproducible)
    return ExitCode.MEETS if ok else ExitCode.FALLS_SHORT


def _zoo(out) -> int:
    try:
        from specverify.zoo import zoo_entries
    except ImportError as exc:
        out.write(f"the zoo is not available: {exc}\n")
        return ExitCode.INTERNAL
    for entry in zoo_entries():
        out.write(f"specverify.zoo:{entry.name:34s} {entry.verdict:12s} {entry.summary}\n")
    return ExitCode.MEETS


def _scenarios(args, out) -> int:
    from specverify.certification.scenarios import matrix

    for s in matrix(args.models).values():
        core = " (core)" if s.core else ""
        out.write(f"{s.name:26s} {s.kind:9s} {s.exercises}{core}\n")
    return ExitCode.MEETS


def _floats(text: str, flag: str) -> list:
    from specverify.errors import InvalidArgument

    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidArgument(f"{flag}={text!r} must be numbers separated by commas, e.g. {flag} 0.9,0.8") from None


def _speedup(args, out, err) -> int:
    import json

    from specverify.errors import InvalidArgument
    from specverify.metrics import speed_model

    try:
        acceptance = args.acceptance
        if acceptance is None:
            acceptance = _floats(args.acceptance_per_position, "--acceptance-per-position")
        t_verify = None if args.t_verify is None else _floats(args.t_verify, "--t-verify")
        model = speed_model(
            acceptance,
            args.gamma,
            t_target=args.t_target,
            t_draft=args.t_draft,
            t_verify=t_verify,
            t_state=args.t_state,
            batch=args.batch,
            output_len=args.output_len,
            draft_params=args.draft_params,
            target_params=args.target_params,
        )
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    if args.json:
        out.write(json.dumps(model.to_dict(), indent=2) + "\n")
        return ExitCode.MEETS
    out.write(f"E[K] = {model.expected_tokens:.4f} tokens per target call at γ = {model.num_draft_tokens}\n")
    out.write(
        f"speed-up S ≈ {model.speedup:.3f} (best γ in 1..16: {model.best_num_draft_tokens}, "
        f"S ≈ {model.best_speedup:.3f})\n"
    )
    for w in model.warnings:
        out.write(f"warning: {w.name}: {w.value:.3g} vs threshold {w.threshold:.3g} — {w.message}\n")
    return ExitCode.MEETS


def _plan(args, out, err) -> int:
    import numpy as np

    from specverify.errors import InvalidArgument
    from specverify.stats import plan_sample_size

    if args.outcomes < 1:
        print(f"specverify: error: --outcomes={args.outcomes!r} must be >= 1", file=err)
        return ExitCode.USAGE
    try:
        n = plan_sample_size(
            np.full(args.outcomes, 1.0 / args.outcomes), args.epsilon, alpha=args.alpha, power=args.power
        )
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    out.write(
        f"{n} draws detect a TV of {args.epsilon} on {args.outcomes} equally likely outcomes with power "
        f"{args.power} at α = {args.alpha:g} (pooled χ², safety factor 4)\n"
    )
    return ExitCode.MEETS


def main(argv=None, *, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return ExitCode.USAGE if exc.code else ExitCode.MEETS
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny tensors: threads cost more than they give
    try:
        if args.command == "certify":
            return _certify(args, out, err)
        if args.command == "merge":
            return _merge(args, out, err)
        if args.command == "report":
            return _report(args, out, err)
        if args.command == "speedup":
            return _speedup(args, out, err)
        if args.command == "zoo":
            return _zoo(out)
        if args.command == "scenarios":
            return _scenarios(args, out)
        return _plan(args, out, err)
    except Exception as exc:  # noqa: BLE001 - a bug of ours: say so, with how to report it
        import traceback

        traceback.print_exc(file=err)
        print(
            f"specverify: internal error ({type(exc).__name__}: {exc}). Please report it with the command line above.",
            file=err,
        )
        return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
