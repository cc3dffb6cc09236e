"""What the pytest plugin's hooks and fixtures do, kept out of the hooks module: certify a marker item, certify a
fixture call, and finish the session (decide each decoder once, compare or rewrite baselines, write JSON / HTML).
"""

from __future__ import annotations

from dataclasses import replace

from specverify.testing.items import (
    ItemDecision,
    certify_item,
    item_message,
    judge_item,
    marker_configurations,
    marker_spec,
    planned_m,
    with_decision,
)
from specverify.testing.summary import call_properties, item_properties, pytest_command

__all__ = [
    "SCENARIO_PARAM",
    "CONFIG_PARAM",
    "UNREACHABLE",
    "expand",
    "group_nodeid",
    "setup_item",
    "certify_call",
    "finish_session",
]

SCENARIO_PARAM = "_specverify_scenario"  # the parameter a marked test is expanded over: one item per scenario
CONFIG_PARAM = "_specverify_engine_config"  # and, when the marker names several configurations, per configuration
UNREACHABLE = "not-reachable-here"  # the one item of a configuration that cannot run on this machine


def expand(marker, options) -> list:
    """The items a marked test expands into: ``[(engine_config, scenario)]``, the scenario names the marker's
    ``scenarios=``, else ``--specverify-scenario``, else the matrix (with the configuration's own scenarios);
    ``engine_config`` None unless the marker names several configurations (``engine_config=[...]`` or ``'all'``),
    each then its own decoder. A configuration that cannot run here is one item, :data:`UNREACHABLE`."""
    configurations = marker_configurations(marker.args, marker.kwargs)
    if configurations is None:
        return [(None, name) for name in marker_spec(marker.args, marker.kwargs, options).scenarios]
    if options.baseline:
        from specverify.errors import InvalidArgument

        raise InvalidArgument(
            f"--specverify-baseline with @pytest.mark.specverify(engine_config={marker.kwargs['engine_config']!r}): "
            "a baseline stores one decoder per factory; mark one configuration per test (engine_config='NAME') "
            "or run without --specverify-baseline."
        )
    out = []
    for name, unreachable in configurations.items():
        if unreachable is not None:
            out.append((name, UNREACHABLE))
            continue
        out += [(name, s) for s in marker_spec(marker.args, marker.kwargs, options, engine_config=name).scenarios]
    return out


def group_nodeid(item) -> str:
    """The marked test's id without its scenario and configuration parameters (other parameters kept as
    ``name=value``)."""
    others = {k: v for k, v in item.callspec.params.items() if k not in (SCENARIO_PARAM, CONFIG_PARAM)}
    base = item.nodeid.split("[")[0]
    return base + (f"[{','.join(f'{k}={v!r}' for k, v in sorted(others.items()))}]" if others else "")


def _baseline(ledger, options, factory: str, models: str):
    """The stored certificate (or None), read once per session (``ledger.baselines``)."""
    from specverify.testing.baseline import load_baseline

    key = (options.baseline, factory, models)
    if key not in ledger.baselines:
        ledger.baselines[key] = load_baseline(options.baseline, factory, models)
    return ledger.baselines[key]


def _against_baseline(ledger, record, decision, spec, options, alpha_test) -> ItemDecision:
    if not options.baseline or options.update_baseline or decision.failure or decision.skip:
        return decision
    from specverify.testing.baseline import baseline_path, scenario_regressions

    base = _baseline(ledger, options, spec.factory_name, spec.models)
    tolerance = options.baseline_tolerance
    found = scenario_regressions(record.results, base, alpha_test, tolerance) if base is not None else []
    if not found:
        return decision
    where = baseline_path(options.baseline, spec.factory_name, spec.models)
    return ItemDecision("regressed", f"regressed against the baseline {where}: " + "; ".join(found))


def _certify_with_progress(item, options, spec, scenario, **kwargs) -> object:
    """``certify_item``, with a progress line every ``--specverify-progress`` seconds on the terminal (none under
    xdist workers, whose terminal is not shown, nor with 0)."""
    terminal = item.config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None or not options.progress or hasattr(item.config, "workerinput"):
        return certify_item(spec, scenario, **kwargs)
    from specverify.testing.progress import Heartbeat

    def write(line: str) -> None:
        terminal.ensure_newline()
        terminal.write_line(line)

    with Heartbeat(write, item.nodeid, options.progress) as beat:
        return certify_item(spec, scenario, progress=beat.progress, **kwargs)


def setup_item(item, options, ledger) -> object:
    """Certify the item's scenario, record it (ledger, JUnit properties) and return its ``ItemResult``."""
    marker = item.get_closest_marker("specverify")
    name = item.callspec.params.get(CONFIG_PARAM)
    scenario = item.callspec.params[SCENARIO_PARAM]
    if scenario == UNREACHABLE:
        return _unreachable_item(item, marker, name)
    spec = marker_spec(marker.args, marker.kwargs, options, engine_config=name)
    nodeid = group_nodeid(item)
    key = f"{nodeid}::{spec.factory_name}" + (f"@{spec.engine_config}" if spec.engine_config else "")
    budget = None if spec.budget is None else spec.budget / len(spec.scenarios)
    record = _certify_with_progress(item, options, spec, scenario, group=key, budget_s=budget, workers=ledger.workers)
    m = planned_m(spec.config)
    alpha_test = spec.alpha / m
    decision = judge_item(record, spec, num_tests=m, alpha_test=alpha_test)
    decision = _against_baseline(ledger, record, decision, spec, options, alpha_test)
    record = with_decision(record, decision)
    if decision.failure:
        command = pytest_command(item.nodeid, options, spec)
        message = item_message(record, spec, num_tests=m, alpha_test=alpha_test, pytest_command=command)
        record = replace(record, failure=message)
    record = replace(record, meta={"skip": decision.skip} if decision.skip else {})
    config = spec.config.to_dict()
    ledger.add_item(
        record,
        key=key,
        kind="marker",
        config=config,
        allow_inconclusive=spec.allow_inconclusive,
        planned=spec.scenarios,
        nodeid=nodeid,
        reaches=spec.reaches,
    )
    item.user_properties.extend(item_properties(record, alpha_test=alpha_test, spec=spec))
    return record


def _unreachable_item(item, marker, name: str) -> object:
    """The item of a configuration that cannot run here: skipped when ``'all'`` only lists it, not covered (a
    failure unless ``allow_inconclusive=True``) when the marker names it."""
    from specverify.testing.items import ItemResult

    unreachable = marker_configurations(marker.args, marker.kwargs)[name]
    why = f"specverify: engine configuration {name!r} is not reachable here: {unreachable.reason}"
    if not unreachable.named or marker.kwargs.get("allow_inconclusive") is True:
        return ItemResult(group_nodeid(item), UNREACHABLE, status="not covered", meta={"skip": why})
    return ItemResult(
        group_nodeid(item),
        UNREACHABLE,
        status="not covered",
        failure=f"{why}; it is named, so it is not covered (allow_inconclusive=True lets the session go on)",
    )


def certify_call(node, options, ledger, factory: object, kwargs: dict, *, index: int) -> object:
    """The ``specverify_certify`` fixture's call: certify with the session's options, record, check the baseline."""
    from specverify.certification.checks.alpha import per_test_alpha
    from specverify.testing.asserts import certify_with

    cert = certify_with(options, factory, **kwargs)
    models = str(cert.config.models) if cert.config is not None else options.models
    node.user_properties.extend(call_properties(cert))
    config = cert.config.to_dict() if cert.config is not None else options.config(factory).to_dict()
    ledger.add_certificate(cert, key=f"{node.nodeid}#{index}", config=config, nodeid=node.nodeid)
    if options.baseline and not options.update_baseline:
        from specverify.testing.baseline import baseline_path, scenario_regressions

        base = _baseline(ledger, options, cert.factory, models)
        if base is not None:
            alpha = per_test_alpha(cert.alpha, models)
            found = scenario_regressions(cert.scenarios, base, alpha, options.baseline_tolerance)
            if found:
                where = baseline_path(options.baseline, cert.factory, models)
                raise AssertionError(
                    f"specverify: {cert.factory} regressed against the baseline {where}:\n  "
                    + "\n  ".join(found)
                    + f"\nReproduce: {cert.command}\nAccept the new certificate with --specverify-update-baseline."
                )
    return cert


def _note(d, text: str) -> object:
    return replace(d, notes=d.notes + (text,))


def _decoder_baseline(ledger, decisions: list, options) -> list:
    """Compare (or rewrite) one decoder's baseline: its decisions, merged into one certificate (marked tests
    first), against the stored one. A worse verdict fails the decoder: its marked tests' decisions (the fixture's
    calls keep theirs, their tests decide), or its calls' when only the fixture certified it."""
    from specverify.testing.baseline import baseline_path, merge_certificates, verdict_regression, write_baseline

    models = decisions[0].group.models
    ordered = sorted(decisions, key=lambda d: d.group.kind != "marker")  # the matrix's results win the merge
    cert = merge_certificates([d.certificate for d in ordered], models)
    merged = f" (merged from {len(decisions)} tests)" if len(decisions) > 1 else ""
    if options.update_baseline:
        path = write_baseline(options.baseline, cert, models)
        return [_note(d, f"baseline written{merged}: {path}") for d in decisions]
    base = _baseline(ledger, options, cert.factory, models)
    where = baseline_path(options.baseline, cert.factory, models)
    if base is None:
        return [_note(d, f"no baseline {where} yet: store one with --specverify-update-baseline") for d in decisions]
    worse = verdict_regression(cert, base)
    regressed = [r.scenario for d in decisions for r in d.group.records if r.status == "regressed"]
    if worse is None and regressed:  # the items already failed (and the decision with them): say why here too
        text = f"baseline {where}: not worse than its stored {base.verdict}{merged}, but "
        text += f"{len(regressed)} scenario(s) regressed against it: {', '.join(regressed)}"
        return [_note(d, text) for d in decisions]
    if worse is None:
        return [_note(d, f"baseline {where}: not worse than its stored {base.verdict}{merged}") for d in decisions]
    why = f"regressed against the baseline {where}{merged}: {worse}"
    fails = {id(d) for d in decisions if d.group.kind == "marker"} or {id(d) for d in decisions}
    return [replace(d, meets=False, why=why) if id(d) in fails else d for d in decisions]


def _baselines(ledger, decisions: list, options) -> list:
    by_decoder: dict = {}
    for d in decisions:
        by_decoder.setdefault((d.certificate.factory, d.group.models), []).append(d)
    done = {
        id(d): new for group in by_decoder.values() for d, new in zip(group, _decoder_baseline(ledger, group, options))
    }
    return [done[id(d)] for d in decisions]


def _plots(cert) -> tuple:
    """The HTML page's plots and a note: none, with the reason, when matplotlib cannot draw them (the start-up
    check makes that rare: a broken installation), so the session never ends in a traceback."""
    try:
        from specverify.report import certificate_plots

        return certificate_plots(cert), ""
    except ImportError as exc:
        return [], f" (without plots: {exc})"


def _write_outputs(decisions: list, options) -> list:
    """One file per decoder (its marked tests' certificate) and one per fixture call, named apart
    (``decoders.output_files``); each file is a note of the decisions it belongs to."""
    from specverify.report import render_json, write_html
    from specverify.testing.decoders import by_decoder, output_files

    views = by_decoder(decisions)
    notes: dict = {}
    for template, kind in ((options.json, "certificate"), (options.html, "HTML report")):
        for path, cert, owners in output_files(template, views) if template else ():
            try:
                if kind == "certificate":
                    path.write_text(render_json(cert), encoding="utf-8")
                    text = f"certificate written: {path}"
                else:
                    plots, missing = _plots(cert)
                    write_html(cert, path, plots=plots)
                    text = f"HTML report written: {path}{missing}"
            except OSError as exc:
                text = f"{kind} NOT written: {path}: {exc.strerror or exc}"
            for d in owners:
                notes.setdefault(id(d), []).append(text)
    return [replace(d, notes=d.notes + tuple(notes.get(id(d), ()))) for d in decisions]


def finish_session(ledger, options) -> list:
    """Decide every group once (Holm), then baselines and output files; the decisions, for the summary."""
    decisions = ledger.decide()
    if options.baseline:
        decisions = _baselines(ledger, decisions, options)
    return _write_outputs(decisions, options) if decisions else decisions
