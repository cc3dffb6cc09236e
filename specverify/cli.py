"""``specverify`` command line: certify a decoder, list the zoo and scenarios, plan sample sizes, export the models."""

from __future__ import annotations

import os
import sys

from specverify.cli_args import ExitCode, check_outputs
from specverify.cli_args import parser as _parser
from specverify.enums import Verdict

__all__ = ["main", "ExitCode", "before_work"]


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

    problem = check_outputs(args)
    if problem:
        print(f"specverify: error: {problem}", file=err)
        return ExitCode.USAGE
    try:
        cert = load_certificate(args.certificate)
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    from specverify.report.text import contradictions

    wrong = contradictions(cert)
    if wrong:  # never print a verdict its own rows deny (and exit 0 on it)
        print(
            f"specverify: error: {args.certificate} contradicts itself: its verdict is {str(cert.verdict).upper()} "
            f"but {'; '.join(wrong)}. Was it edited by hand? Certify again: {cert.command}",
            file=err,
        )
        return ExitCode.USAGE
    out.write(render_text(cert))
    failed = _write_visuals(cert, args.html, args.plots, err)
    return ExitCode.MEETS if failed is None else failed


def _progress(err):
    return lambda msg: print(msg, file=err, flush=True)


def _certify(args, out, err) -> int:
    from specverify.certification.config.execution import from_args
    from specverify.certification.run.factory import SetupFailure
    from specverify.errors import InvalidArgument

    try:
        _attach_server(args, err)
        config, execution = from_args(args)
        problem = check_outputs(args)
        if problem:
            raise InvalidArgument(problem)
        if execution.engine_configs and execution.shard is None and (args.report or args.plots):
            raise InvalidArgument("--report/--plots draw one certificate: give one --engine-config NAME")
        before_work(config, execution)
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    except SetupFailure:
        pass  # the certificate reports it (verdict error)
    from specverify.certification.execution.certify import execute

    try:
        outcome = execute(config, execution, _progress(err))
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    if outcome.shard is not None:
        return _emit(outcome.shard, args, out, err)
    if config.engine_config is not None or execution.engine_configs:
        return _emit_configurations(outcome.configurations(execution.engine_configs), args, out, err)
    return _emit(outcome.certificate, args, out, err)


_ATTACHED = ("specverify.adapters.server:attached", "specverify.adapters.server:attached_plain")


def _attach_server(args, err) -> None:
    """``--server-url URL --server-declaration FILE``: the attached server factory's options, and the run restricted
    to the scenarios of the pair the deployment serves; the others are listed as not covered, with the reason, here
    and in the certificate's engine record (docs/servers.md)."""
    import json

    from specverify.errors import InvalidArgument

    url, path = getattr(args, "server_url", None), getattr(args, "server_declaration", None)
    if url is None and path is None:
        return
    if url is None or path is None or args.factory not in _ATTACHED:
        raise InvalidArgument(
            f"--server-url and --server-declaration go together, with FACTORY {' or '.join(_ATTACHED)} "
            f"(got FACTORY {args.factory!r}, --server-url {url!r}, --server-declaration {path!r})"
        )
    from specverify.adapters.server.declaration import read_declaration
    from specverify.certification.matrix.scenarios import scenarios_served

    if str(args.models or "") != "checkpoint":
        raise InvalidArgument("--server-url serves the checkpoint bundle: add --models checkpoint")
    declared = read_declaration(path)
    served, other = scenarios_served(declared.pair)
    chose = bool(args.scenarios)
    asked = list(args.scenarios or served)
    refused = {n: other[n] for n in asked if n in other}
    for name, why in sorted(refused.items()):
        print(f"specverify: not covered by the attached deployment: {name} ({why})", file=err)
    kept = [n for n in asked if n not in refused]
    if not kept:
        raise InvalidArgument(f"no scenario asked for runs on the served pair {declared.pair!r}: {sorted(refused)}")
    args.scenarios = kept
    not_served = json.dumps(refused if chose else other)
    args.engine_options = list(args.engine_options or []) + [
        f"url={json.dumps(url)}",
        f"declaration={json.dumps(str(path))}",
        f"not_served={not_served}",
    ]


def before_work(config, execution) -> None:
    """What can be refused before any heavy import (``InvalidArgument``, a usage error): the factory's module and
    attribute, the engine configurations it declares and the options it accepts, the executor's extra. A module that
    raises on import is a ``SetupFailure``: the certificate reports it (verdict error)."""
    from specverify.certification.config.options import Executor
    from specverify.certification.run.factory import check_engine_options, factory_options, resolve_factory

    factory = resolve_factory(config.factory)
    names = list(execution.engine_configs) or ([config.engine_config] if config.engine_config else [])
    if names:
        from specverify.certification.execution.plan import chosen_configurations
        from specverify.protocol import engine_configs_of

        presets, _ = engine_configs_of(factory)
        chosen_configurations(names, presets, config.factory_name)
    check_engine_options(factory, factory_options(factory, config))
    if execution.executor == Executor.RAY:
        from specverify.certification.execution.ray import import_ray

        import_ray()  # without the extra: a usage error naming it, before anything runs


def _emit_configurations(cs, args, out, err) -> int:
    """A run over engine configurations: one that ran writes its certificate as a plain run does, then the
    configuration's line; several write the set (``--json``: a ``specverify-configurations`` document). The exit
    code: error when one could not be set up, else 0 only when every configuration meets the requirements with its
    state reached."""
    from specverify.report.configurations import render_configurations_json, render_configurations_text

    if len(cs.results) == 1 and cs.certificates:
        code = _emit(cs.certificates[0], args, out, err)
        (err if args.json == "-" else out).write(render_configurations_text(cs, certificates=False))
        if code in (ExitCode.MEETS, ExitCode.FALLS_SHORT):
            code = ExitCode.MEETS if cs.met else ExitCode.FALLS_SHORT
        return code
    _write(args, out, render_configurations_text(cs), render_configurations_json(cs))
    if cs.verdict == Verdict.ERROR:
        return ExitCode.ERROR
    return ExitCode.MEETS if cs.met else ExitCode.FALLS_SHORT


def _merge(args, out, err) -> int:
    from dataclasses import replace

    from specverify.errors import InvalidArgument

    problem = check_outputs(args)
    if problem:
        print(f"specverify: error: {problem}", file=err)
        return ExitCode.USAGE
    from specverify.certification.execution.certify import merge_files

    try:
        outcome = merge_files(args.parts)
        if args.require is not None:
            require = Verdict.parse(args.require, "--require")
            merged = [(run, replace(c, config=replace(c.config, require=require))) for run, c in outcome.certificates]
            outcome = replace(outcome, certificates=tuple(merged))
    except (OSError, ValueError) as exc:  # InvalidArgument is a ValueError; json errors too
        reason = exc if isinstance(exc, InvalidArgument) else f"cannot read the parts ({exc})"
        print(f"specverify: error: {reason}", file=err)
        return ExitCode.USAGE
    plan = outcome.plan
    if plan.config.engine_config is not None or plan.execution.engine_configs:
        return _emit_configurations(outcome.configurations(plan.execution.engine_configs), args, out, err)
    return _emit(outcome.certificate, args, out, err)


def _write(args, out, text: str, json_text: str) -> None:
    """``--json -``: the JSON on stdout; else the text on stdout and, with ``--json PATH``, the JSON there."""
    if args.json == "-":
        out.write(json_text)
        return
    out.write(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(json_text)


def _emit(cert, args, out, err) -> int:
    """Write the certificate (text, JSON, report); the exit code from its requirements (``RunConfig.require*``)."""
    from specverify.report import render_json, render_text

    _write(args, out, render_text(cert), render_json(cert))
    failed = _write_visuals(cert, args.report, args.plots, err)
    if failed is not None:
        return failed
    if cert.verdict == Verdict.ERROR:
        return ExitCode.ERROR
    return ExitCode.MEETS if cert.requirements()["met"] else ExitCode.FALLS_SHORT


def _zoo(out) -> int:
    from specverify.zoo.catalogue import CATALOGUE  # data generated from the registry: no torch, no decoder

    for entry in CATALOGUE:
        family = f" [--drafts {entry.drafts}]" if entry.drafts != "ar" else ""
        out.write(f"specverify.zoo:{entry.name:34s} {entry.verdict:12s} {entry.summary}{family}\n")
    return ExitCode.MEETS


def _scenarios(args, out) -> int:
    from specverify.certification.checks import requirements
    from specverify.certification.matrix.scenarios import matrix
    from specverify.protocol import MINIMUM_CAPABILITIES

    out.write(f"{'scenario':26s} {'kind':11s} {'core':4s} {'needs (beyond temperature, max_tokens)':40s} exercises\n")
    family = matrix(args.models, args.drafts)
    for s in family.values():
        needs = ", ".join(sorted(requirements(s, family) - MINIMUM_CAPABILITIES)) or "-"
        out.write(f"{s.name:26s} {s.kind:11s} {'yes' if s.core else 'no':4s} {needs:40s} {s.exercises}\n")
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
        acceptance, gamma, source, timed = args.acceptance, args.gamma or 4, None, {}
        if args.from_cert:
            acceptance, source, timed = measured_acceptance(args.from_cert, args.from_scenario)
            gamma = args.gamma or len(acceptance)
        elif acceptance is None:
            acceptance = _floats(args.acceptance_per_position, "--acceptance-per-position")
        t_verify = _floats(args.t_verify, "--t-verify") if args.t_verify is not None else timed.get("verify")
        given = {"t_target": args.t_target, "t_draft": args.t_draft, "t_state": args.t_state}
        costs = {k: v if v is not None else timed.get(k[2:], _COST_DEFAULTS[k]) for k, v in given.items()}
        model = speed_model(
            acceptance,
            gamma,
            t_verify=t_verify,
            **costs,
            batch=args.batch,
            output_len=args.output_len,
            draft_params=args.draft_params,
            target_params=args.target_params,
        )
    except InvalidArgument as exc:
        print(f"specverify: error: {exc}", file=err)
        return ExitCode.USAGE
    if args.json:
        doc = model.to_dict() | ({"acceptance_from": source, "acceptance": list(acceptance)} if source else {})
        out.write(json.dumps(doc, indent=2) + "\n")
        return ExitCode.MEETS
    if source:
        out.write(f"measured acceptance per position ({source}): {', '.join(f'{a:.4f}' for a in acceptance)}\n")
    out.write(f"E[K] = {model.expected_tokens:.4f} tokens per target call at γ = {model.num_draft_tokens}\n")
    out.write(
        f"speed-up S ≈ {model.speedup:.3f} (best γ in 1..16: {model.best_num_draft_tokens}, "
        f"S ≈ {model.best_speedup:.3f})\n"
    )
    for w in model.warnings:
        out.write(f"warning: {w.name}: {w.value:.3g} vs threshold {w.threshold:.3g} — {w.message}\n")
    return ExitCode.MEETS


_COST_DEFAULTS = {"t_target": 1.0, "t_draft": 0.1, "t_state": 0.0}


def measured_acceptance(path: str, scenario: str | None = None) -> tuple[list, str, dict]:
    """(conditional acceptance per draft position, where it came from, costs) from a certificate: the rates its
    ``metrics`` check measured on ``scenario`` (default: the first scenario with per-position rates) and the costs
    its decoder's optional ``timings()`` reported (``draft``, ``state``, ``verify``; the target call's cost is taken
    as ``verify``'s, one target call on γ + 1 tokens). Flags given on the command line win."""
    from specverify.certification.results.metrics import metric_rows
    from specverify.errors import InvalidArgument
    from specverify.report import load_certificate

    cert = load_certificate(path)
    kind = "acceptance_at_position"
    found = [s for s in cert.scenarios if any(r.metric == kind for r in metric_rows(s.metrics))]
    if scenario is not None:
        found = [s for s in found if s.name == scenario]
    if not found:
        which = f"scenario {scenario!r}" if scenario else "any scenario"
        raise InvalidArgument(
            f"--from {path}: {which} has no measured per-position acceptance (the decoder reported no "
            "SampleCounts.positions); give --acceptance or --acceptance-per-position instead."
        )
    rows = sorted((r for r in metric_rows(found[0].metrics) if r.metric == kind), key=lambda r: r.index)
    rates = [float(r.measured) if r.measured is not None else 0.0 for r in rows]
    timings = cert.timings or {}
    costs = {"draft": timings.get("draft"), "state": timings.get("state"), "verify": timings.get("verify")}
    costs["target"] = timings.get("verify")  # one target call; the plain decoder's own cost is not measured here
    return rates, f"{path}, scenario {found[0].name}", {k: v for k, v in costs.items() if v is not None}


def _plan(args, out, err) -> int:
    import numpy as np

    from specverify.errors import InvalidArgument
    from specverify.stats import plan_sample_size

    if args.outcomes < 2:
        print(
            f"specverify: error: --outcomes {args.outcomes} must be >= 2 (a law of one outcome has nothing to test)",
            file=err,
        )
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


def _models(args, out, err) -> int:
    """``specverify models export DIR``: the model bundle (specverify.bundle)."""
    from specverify.bundle import MANIFEST, export_bundle
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS, MIMO_PAIRS
    from specverify.errors import InvalidArgument

    try:
        manifest = export_bundle(args.dir, {**CHECKPOINT_PAIRS, **MIMO_PAIRS}, gguf=not args.no_gguf, gamma=args.gamma)
    except InvalidArgument as exc:
        print(f"specverify: error: {str(exc).replace('gamma=', '--gamma ')}", file=err)
        return ExitCode.USAGE
    except OSError as exc:
        print(f"specverify: error: cannot write the bundle into {args.dir!r} ({exc})", file=err)
        return ExitCode.USAGE
    for name, entry in manifest["pairs"].items():
        out.write(f"{name}: {entry['architecture']}, {len(entry['files'])} files, GGUF {entry['gguf']}\n")
    out.write(f"manifest: {os.path.join(args.dir, MANIFEST)} (serving lines per engine inside)\n")
    return ExitCode.MEETS


def main(argv=None, *, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return ExitCode.USAGE if exc.code else ExitCode.MEETS
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny tensors: threads cost more than they give
    if os.getcwd() not in sys.path:  # MODULE:ATTR from the current directory, as `python -m` does
        sys.path.insert(0, os.getcwd())
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
        if args.command == "models":
            return _models(args, out, err)
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
