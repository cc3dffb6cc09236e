"""``specverify report`` refuses a certificate whose verdict its own rows deny (a failing row under EXACT), instead
of printing the verdict and exiting 0."""

import json

from specverify.cli import ExitCode, main
from specverify.report import certificate_from_document, render_json
from specverify.report.text import contradictions


def _edited(zoo_cert, tmp_path, **changes):
    doc = json.loads(render_json(zoo_cert))
    doc.update(changes.pop("top", {}))
    for row in doc["scenarios"]:
        row.update(changes.get(row["scenario"], {}))
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_failing_row_under_exact_is_refused_with_a_usage_error(zoo_cert, tmp_path, capsys):
    path = _edited(zoo_cert, tmp_path, top={"verdict": "exact"})
    assert main(["report", str(path)]) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert "VERDICT" not in out and "contradicts itself" in err and "temperature-1" in err and "EXACT" in err, err
    assert "Certify again: specverify certify specverify.zoo:argmax_verify" in err


def test_a_failing_greedy_row_under_greedy_only_is_refused(zoo_cert, tmp_path, capsys):
    path = _edited(zoo_cert, tmp_path, greedy={"passed": False})
    assert main(["report", str(path)]) == ExitCode.USAGE
    assert "greedy (greedy) FAILED under GREEDY-ONLY" in capsys.readouterr().err


def test_a_consistent_certificate_has_no_contradiction(zoo_cert, reference_cert, tmp_path, capsys):
    assert contradictions(zoo_cert) == [] and contradictions(reference_cert) == []
    doc = json.loads(render_json(zoo_cert))
    doc["verdict"] = "exact"
    assert contradictions(certificate_from_document(doc)) == ["temperature-1 (sampling) FAILED under EXACT"]
    path = _edited(zoo_cert, tmp_path)
    assert main(["report", str(path)]) == ExitCode.MEETS
    assert "VERDICT: GREEDY-ONLY" in capsys.readouterr().out
