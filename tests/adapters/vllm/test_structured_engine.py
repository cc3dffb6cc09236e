"""vLLM's ``structured`` configuration (issue #25): vLLM's xgrammar backend allows exactly the tokens our own
automaton allows in every reachable state (no model run), and a real engine reaches the state (requests with
structured outputs whose drafts the grammar cut) with every completion inside the grammar. Run from the vLLM venv:

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_structured_engine.py -q
"""

import json
import re

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/vllm")

from specverify.adapters import vllm as va  # noqa: E402
from specverify.certification.matrix.checkpoint import (  # noqa: E402
    STRUCTURED_PATTERN,
    configuration_scenarios,
    structured_grammar,
)
from specverify.certification.matrix.scenarios import SCENARIOS  # noqa: E402
from specverify.protocol import Request  # noqa: E402

STATE = configuration_scenarios(SCENARIOS)


WORKAROUNDS = ["expand-kernel", "stop-metrics", "min-tokens-bonus"]


def _structured_decoder(method="draft_model", **extra):
    pair = STATE["structured"].models()
    return getattr(va, method)(pair.target, pair.draft, **va.ENGINE_CONFIGS["structured"].options, **extra)


def _requests(n: int) -> list:
    s = STATE["structured"]
    return [Request(s.prompt, s.params, s.num_draft_tokens, seed=i) for i in range(n)]


def test_as_shipped_draft_model_emits_tokens_outside_the_grammar():
    """Pinned (docs/findings/vllm.md, "structured"): with probabilistic drafts as shipped, vLLM's sampler emits a
    token the grammar forbids (token 0, "a", after "b" or "ab"), its scheduler's matcher rejects it and vLLM ends the
    request with finish_reason "error" (v1/core/sched/scheduler.py:2186-2196): 54 of 200 seeded requests here. If this
    test fails, vLLM changed: re-run the structured certificates."""
    from specverify.adapters.boundary.finish import EngineStoppedEarly

    decoder = _structured_decoder()
    try:
        with pytest.raises(EngineStoppedEarly, match="finish_reason 'error'"):
            decoder(_requests(200))
    finally:
        decoder.close()


def test_structured_reaches_cut_drafts_inside_the_grammar():
    decoder = _structured_decoder(workaround=WORKAROUNDS)
    try:
        assert "text-grammar" in decoder.capabilities and "grammar" not in decoder.capabilities
        done = decoder(_requests(200))
        state = decoder.engine_info["state"]
    finally:
        decoder.close()
    assert state["structured_requests"] >= 1 and state["drafts_cut"] >= 1, state
    grammar, vocab = structured_grammar(), STATE["structured"].models().target.vocab
    for c in done:
        text = vocab.text(c.tokens)
        assert grammar.dfa.step(0, text) is not None, (c.tokens, c.finish_reason)
        if c.finish_reason == "eos":
            assert re.fullmatch(STRUCTURED_PATTERN, text), c.tokens


def test_probabilistic_drafts_cut_by_the_grammar_shift_the_law():
    """Pinned finding (docs/findings/vllm.md, "structured"): with the three workarounds, ``draft_model``'s
    probabilistic drafts under a grammar are rejected on the law (p ~ 1e-9 at quick, sequential), while ``eagle``'s
    one-hot drafts certify exact in the same preset. vLLM cuts a draft the grammar forbids and samples that position
    from the masked target row instead of rejecting the draft (whose residual is the right law). If this test fails,
    vLLM changed: re-run the structured certificates."""
    from specverify import certify

    option = "workaround=" + json.dumps(WORKAROUNDS)
    cert = certify(
        "specverify.adapters.vllm:draft_model", scenarios=["structured"], level="quick", isolation="none",
        models="checkpoint", engine_config="structured", engine_options=[option],
    )  # fmt: skip
    va.close_all()
    (result,) = [r for r in cert.scenarios if r.scenario == "structured"]
    assert result.covered and not result.passed and result.pvalue is not None and result.pvalue < 1e-6, result


def test_grammar_cut_drafts_makes_probabilistic_drafts_exact_under_the_grammar():
    """The opt-in workaround of finding 12 (``grammar-cut-drafts``, ``patches.keep_cut_drafts``): the
    drafts the grammar cuts are kept as ``-1`` drafts, rejected by ``padded-drafts``, so the cut position is drawn
    from the residual of the drafter's row; the same scenario as above then passes, with drafts cut (the state
    reached)."""
    from specverify import certify

    workaround = WORKAROUNDS + ["padded-drafts", "padded-draft-probs", "grammar-cut-drafts"]
    cert = certify(
        "specverify.adapters.vllm:draft_model", scenarios=["structured"], level="quick", isolation="none",
        models="checkpoint", engine_config="structured", engine_options=["workaround=" + json.dumps(workaround)],
    )  # fmt: skip
    va.close_all()
    (result,) = [r for r in cert.scenarios if r.scenario == "structured"]
    assert result.covered and result.passed, result
    info = cert.engine
    assert info["state"]["drafts_cut"] >= 1 and info["effective"]["3"]["grammar_cut_drafts"] is True, info
