"""The vLLM adapter's engine configurations (``--engine-config NAME``, docs/adapters.md "Engine configurations") and
the evidence each reads from the engine that its state was reached (``decoder.engine_info["state"]``).

Each preset is a set of engine options of :data:`specverify.adapters.vllm.methods.COMMON_OPTIONS`, the scenarios
that create its state (the checkpoint matrix's configuration scenarios,
``matrix_checkpoint.CONFIGURATION_SCENARIOS``: ``one-token-prompt``, the prompt ``(0,)``, which the scheduler pads
with ``-1`` drafts when it is admitted while others run (finding 13 without any cache hit); ``second-block``, 28
tokens, whose first round needs a second 32-token KV block after admission; ``long-prompt``, 31 tokens, whose first
round's drafts straddle a block boundary; then ``multi-turn``, turn 2 of that conversation, 33 tokens, whose first
block turn 1's decoding wrote) and the counts that show the state. File:line refer to vLLM 0.32.0.

=====================  ===================================================  ==========================================
configuration          engine options                                       evidence (``engine_info["state"]``)
=====================  ===================================================  ==========================================
``prefix-cache``       none: vLLM's default, prefix caching on              ``cached_tokens`` >= 33, ``prefix_hits``
``no-prefix-cache``    ``enable_prefix_caching=false``                      none (``cached_tokens`` stays 0)
``chunked-prefill``    ``max_num_batched_tokens=64`` (``max_num_seqs`` 64)   ``partial_prefills`` >= 1
``preempt``            ``num_gpu_blocks_override=32``                       ``preemptions`` >= 1
``parallel-n``         ``parallel_n=true``: identical unseeded requests     ``parallel_requests`` >= 1
                       of a call are one vLLM request with ``n = k``
``patched``            every workaround of ``patches``                      none
``structured``         ``structured_outputs=true``: ``text-grammar``,       ``structured_requests`` >= 1,
                       a ``RegexGrammar`` sent as a regex                   ``drafts_cut`` >= 1
=====================  ===================================================  ==========================================

- ``cached_tokens`` sums ``RequestOutput.num_cached_tokens`` (outputs.py:153, set from the scheduler's
  ``num_cached_tokens``, v1/core/sched/scheduler.py) over every request; ``prefix_hits`` counts requests with any.
  vLLM caches whole blocks only (block size 32 here) and never the last prompt token, so a hit needs a prompt of at
  least 33 tokens: ``multi-turn``'s.
- ``partial_prefills`` counts the requests a scheduling step left with part of their prompt still to compute
  (``num_computed_tokens < num_prompt_tokens`` after ``Scheduler.schedule``, which advances it,
  v1/core/sched/scheduler.py:1616-1629): a wrapper around that one method of the engine's scheduler, counting only.
  A split prefill of a *seeded* request crashes vLLM on CPU (finding 3, v1/worker/gpu_model_runner.py:3502), so
  ``chunked-prefill`` as shipped is ``invalid`` on the seeded scenarios; ``chunked-prefill-unseeded`` adds
  ``declare_seed=false`` (the decoder does not declare ``seed``, so every request is sent unseeded and the law of
  the rest is certified; recorded in the certificate's options).
- ``preemptions`` is the delta of vLLM's own counter ``vllm:num_preemptions`` (v1/metrics/loggers.py:738, counted
  from the scheduler's PREEMPTED events, v1/metrics/stats.py:576) over the decoder's calls. Thirty-two blocks of 32
  tokens admit 32 ``second-block`` requests (prompt and γ lookahead: one block each), each of which needs a second
  block for its first round, so the scheduler preempts running requests (v1/core/sched/scheduler.py:797-830: the
  last admitted first) and resumes them by recomputing their prompt and output (their first block is not full, so
  nothing of theirs is cached).
- ``parallel_requests`` counts vLLM requests with ``n > 1`` whose output held ``n`` completions, and
  ``parallel_samples`` those completions. vLLM fans an unseeded ``n``-request out into child requests
  (v1/engine/parallel_sampling.py:52-81; seeded children get ``seed + index``, so only unseeded requests are packed).
  The certifier's collision test pairs requests (2i, 2i + 1) of a call, which are siblings of one packed request here.

- ``structured_requests`` counts the distinct vLLM requests with structured outputs whose drafts the scheduler
  validated, and ``drafts_cut`` the draft tokens it cut: ``Scheduler.update_draft_token_ids`` keeps the longest
  grammar-valid prefix of each request's drafts (``StructuredOutputManager.validate_tokens``,
  v1/core/sched/scheduler.py:2550-2569, v1/structured_output/__init__.py:310-328); a wrapper around that one method of
  the in-process engine's manager, counting only. The scenarios ``structured`` and ``greedy-structured``
  (``matrix_checkpoint``) run under a regex the unmasked draft often violates.

- ``padded_steps`` counts the scheduling steps in which a request was given only ``-1`` drafts, and
  ``padded_requests`` the requests so padded in their first step (finding 13): the scheduler pads a new request with
  one token to compute (a prefix hit that covers all of its prompt but the last token, or a one-token prompt while
  others run) to ``1 + γ`` tokens with ``-1`` drafts (v1/core/sched/scheduler.py:1131-1153, :1371-1375). vLLM counts
  that step as a verification round of γ drafts, none accepted, in its per-request and aggregate counters; its token
  is a target sample, as a prefill's is, so the adapter drops that round from the request's ``accepted``
  (``mapping.completion``), which keeps ``prefill_tokens = 1`` true for padded requests, and the aggregate
  counters, which keep it, then read one round more per padded request (the counters check shows it). Read by a
  wrapper around the in-process scheduler's ``schedule`` (:func:`record_scheduled_drafts`), counting only.
- ``short_rounds`` counts the steps in which a running request was scheduled with fewer drafts than its drafter
  proposed, and ``short_requests`` those requests: a step's token budget (``max_num_batched_tokens``, small under
  ``chunked-prefill``) cuts the last scheduled requests' drafts (v1/core/sched/scheduler.py:703-712, :861-872), and
  with none left the step is a plain decode step, which vLLM's per-request counters do not count (:2113). The law is
  untouched, but those rounds are not rounds of γ drafts, so the request's ``accepted`` is not reported
  (``mapping.completion``, ``short``); the same wrapper reads them.

``async-scheduling`` (forced off on CPU, platforms/cpu.py:331) and ``dynamic-gamma`` (Model Runner V2 only, which
needs Triton) are listed as unreachable here.
"""

from __future__ import annotations

from specverify.adapters.vllm import patches
from specverify.protocol import EngineConfig

__all__ = ["ENGINE_CONFIGS", "DEFAULT_ENGINE_CONFIG", "STATE_SCENARIOS", "LONG_SCENARIOS", "new_state",
           "count_outputs", "packed", "count_partial_prefills", "count_grammar_cuts", "record_scheduled_drafts",
           "record_preempted", "request_key", "preemptions"]  # fmt: skip

#: The checkpoint matrix's configuration scenarios (specverify.certification.matrix_checkpoint.CONFIGURATION_SCENARIOS)
STATE_SCENARIOS = ("one-token-prompt", "second-block", "long-prompt", "multi-turn")
#: added to the prefix-cache presets: a 65-token turn 2 shares two whole blocks, so a drafter that drops a hit's
#: last block (EAGLE, EAGLE-3, MTP: v1/core/single_type_kv_cache_manager.py:609-626) still reads one from the cache
LONG_SCENARIOS = ("long-prompt-63", "multi-turn-65")
CHUNK_BUDGET = 64  # tokens per step: two of the configuration scenarios' prompts do not fit
STRUCTURED_SCENARIOS = ("structured", "greedy-structured")
PREEMPT_BLOCKS = 32  # blocks of 32 tokens: 32 second-block requests admitted, each needing a second block

ENGINE_CONFIGS: dict = {
    "prefix-cache": EngineConfig(
        options={},
        doc="vLLM's defaults (prefix caching on); multi-turn's 32-token first block served from the cache",
        reaches={"cached_tokens": 33, "prefix_hits": 1},
        scenarios=STATE_SCENARIOS + LONG_SCENARIOS,
    ),
    "no-prefix-cache": EngineConfig(
        options={"enable_prefix_caching": False},
        doc="prefix caching off (enable_prefix_caching=False): the same scenarios, every block computed",
        scenarios=STATE_SCENARIOS + LONG_SCENARIOS,
    ),
    "chunked-prefill": EngineConfig(
        options={"max_num_batched_tokens": CHUNK_BUDGET},
        doc=f"a {CHUNK_BUDGET}-token step budget: prompts split across steps (seeded: finding 3, as shipped)",
        reaches={"partial_prefills": 1},
        scenarios=STATE_SCENARIOS,
    ),
    "chunked-prefill-unseeded": EngineConfig(
        options={"max_num_batched_tokens": CHUNK_BUDGET, "declare_seed": False},
        doc="chunked-prefill with seed undeclared: every request unseeded, around finding 3",
        reaches={"partial_prefills": 1},
        scenarios=STATE_SCENARIOS,
    ),
    "preempt": EngineConfig(
        options={"num_gpu_blocks_override": PREEMPT_BLOCKS},
        doc=f"{PREEMPT_BLOCKS} KV blocks: long concurrent requests preempted and resumed",
        reaches={"preemptions": 1},
        scenarios=STATE_SCENARIOS,
    ),
    "parallel-n": EngineConfig(
        options={"parallel_n": True},
        doc="identical unseeded requests of a call sent as one vLLM request with n = k",
        reaches={"parallel_requests": 1},
    ),
    "patched": EngineConfig(
        options={"workaround": list(patches.WORKAROUNDS)},
        doc="vLLM 0.32.0 with every workaround (expand-kernel, stop-metrics, min-tokens-bonus, padded-drafts, "
        "padded-draft-probs, missed-draft-probs, grammar-cut-drafts)",
    ),
    "structured": EngineConfig(
        options={"structured_outputs": True},
        doc="guided decoding under speculation: a text-level regex (grammar_regex) sent as structured_outputs",
        reaches={"structured_requests": 1, "drafts_cut": 1},
        scenarios=STRUCTURED_SCENARIOS,
    ),
    "async-scheduling": EngineConfig(
        doc="async scheduling (placeholder drafts)",
        unreachable="async scheduling is forced off on CPU (platforms/cpu.py:331)",
    ),
    "dynamic-gamma": EngineConfig(
        doc="dynamic γ",
        unreachable="dynamic γ exists only in Model Runner V2, which needs Triton (no CPU build)",
    ),
}
#: The configuration whose engine options equal a run without --engine-config (its matrix adds STATE_SCENARIOS).
DEFAULT_ENGINE_CONFIG = "prefix-cache"

STATE_KEYS = ("requests", "cached_tokens", "prefix_hits", "partial_prefills", "preemptions", "parallel_requests",
              "parallel_samples", "structured_requests", "drafts_cut", "padded_steps", "padded_requests",
              "short_rounds", "short_requests")  # fmt: skip


def new_state() -> dict:
    return dict.fromkeys(STATE_KEYS, 0)


def count_outputs(state: dict, outputs) -> None:
    """Add one ``generate()``'s ``RequestOutput`` s to ``state``: requests, cached tokens, hits, packed requests."""
    for output in outputs:
        cached = int(getattr(output, "num_cached_tokens", 0) or 0)
        state["requests"] += 1
        state["cached_tokens"] += cached
        state["prefix_hits"] += cached > 0
        if len(output.outputs) > 1:
            state["parallel_requests"] += 1
            state["parallel_samples"] += len(output.outputs)


def count_partial_prefills(llm, state: dict) -> None:
    """Count, in ``state["partial_prefills"]``, the requests each scheduling step leaves with part of their prompt
    to compute (the in-process engine's scheduler; counting only, nothing scheduled differently)."""
    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    original = scheduler.schedule

    def schedule(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - vLLM's signature
        out = original(*args, **kwargs)
        for request_id in out.num_scheduled_tokens:
            request = scheduler.requests.get(request_id)
            if request is not None and request.num_computed_tokens < request.num_prompt_tokens:
                state["partial_prefills"] += 1
        return out

    scheduler.schedule = schedule


def request_key(request_id: str) -> str:
    """The id ``LLM.generate`` knows a request by, from the scheduler's: vLLM appends ``-`` and 8 characters of a
    uuid to the external id (v1/engine/input_processor.py:371); a child of an ``n`` > 1 request is ``"{index}_{id}"``
    (v1/engine/parallel_sampling.py:94).

    >>> request_key("3-a5cf8b95"), request_key("1_3-a5cf8b95"), request_key("3")
    ('3', '1_3', '3')
    """
    return request_id.rsplit("-", 1)[0] if "-" in request_id else request_id


def record_scheduled_drafts(llm, state: dict, flagged: dict) -> None:
    """Read, from each scheduling step of the in-process engine, the drafts it gives each request (a wrapper around
    ``Scheduler.schedule``, counting only), into ``state`` and the id sets of ``flagged`` (:func:`request_key`):

    - a request given only ``-1`` drafts: ``padded_steps``; in its first step also ``padded_requests`` and
      ``flagged["padded"]`` (finding 13);
    - a running request scheduled with fewer drafts than its drafter proposed (the step's token budget cut them,
      v1/core/sched/scheduler.py:703-712 and :861-872; with none left the step is a plain decode step that vLLM's
      per-request counters never see, :2113): ``short_rounds``; the first time also ``short_requests`` and
      ``flagged["short"]``."""
    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    original = scheduler.schedule

    def schedule(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - vLLM's signature
        proposed = {r.request_id: len(r.spec_token_ids) for r in scheduler.running if r.spec_token_ids}
        out = original(*args, **kwargs)
        drafts = getattr(out, "scheduled_spec_decode_tokens", None) or {}
        new = {r.req_id for r in getattr(out, "scheduled_new_reqs", ())}
        for request_id, tokens in drafts.items():
            if tokens and all(int(t) == -1 for t in tokens):
                state["padded_steps"] += 1
                if request_id in new:
                    state["padded_requests"] += 1
                    flagged["padded"].add(request_key(request_id))
        scheduled = getattr(out, "num_scheduled_tokens", None) or {}
        for request_id, n in proposed.items():
            if request_id in scheduled and len(drafts.get(request_id, ())) < n:
                state["short_rounds"] += 1
                key = request_key(request_id)
                state["short_requests"] += key not in flagged["short"]
                flagged["short"].add(key)
        return out

    scheduler.schedule = schedule


def record_preempted(llm, preempted: set) -> None:
    """Add to ``preempted`` the ids (:func:`request_key`) of the requests the in-process engine's scheduler preempts: a
    wrapper around ``Scheduler._preempt_request`` (v1/core/sched/scheduler.py:1571), counting only. A preempted
    request is resumed by recomputing its prompt and output, and that step samples its next token from the target
    outside any verification round, so its per-round counts cannot be placed among its tokens
    (``mapping.completion`` reports them as not reported)."""
    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    original = scheduler._preempt_request

    def _preempt_request(request, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - vLLM's signature
        preempted.add(request_key(request.request_id))
        return original(request, *args, **kwargs)

    scheduler._preempt_request = _preempt_request


def count_grammar_cuts(llm, state: dict) -> None:
    """Count, in ``state``, the requests with structured outputs whose drafts vLLM validated against their grammar
    (``structured_requests``) and the draft tokens it cut (``drafts_cut``): a wrapper around the in-process engine's
    ``StructuredOutputManager.validate_tokens``, counting only (its result is returned unchanged)."""
    from vllm.v1.structured_output.utils import strip_speculative_padding

    manager = llm.llm_engine.engine_core.engine_core.scheduler.structured_output_manager
    original, seen = manager.validate_tokens, set()

    def validate_tokens(request, spec_tokens):  # noqa: ANN001, ANN202 - vLLM's signature
        out = original(request, spec_tokens)
        if request.use_structured_output:
            if request.request_id not in seen:
                seen.add(request.request_id)
                state["structured_requests"] += 1
            state["drafts_cut"] += len(strip_speculative_padding(list(spec_tokens))) - len(out)
        return out

    manager.validate_tokens = validate_tokens


def preemptions(metrics) -> int:
    """vLLM's cumulative ``vllm:num_preemptions`` (summed over engines) in one ``llm.get_metrics()`` snapshot."""
    return int(sum(getattr(m, "value", 0) or 0 for m in metrics if m.name == "vllm:num_preemptions"))


def packed(requests) -> list:
    """``parallel_n``: the indices of ``requests`` grouped into vLLM requests, in order of first appearance; every
    group of identical unseeded requests (prompt, params, γ) becomes one request with ``n`` = its size, and each
    seeded request stays alone (vLLM would give packed seeded children ``seed + index``), and so does a greedy one
    (vLLM refuses ``n`` > 1 at temperature 0: "n must be 1 when using greedy sampling")."""
    groups: list = []
    shared: dict = {}
    for i, request in enumerate(requests):
        if request.seed is not None or request.tree is not None or request.params.temperature == 0:
            groups.append([i])
            continue
        key = (request.prompt, request.params, request.num_draft_tokens)
        if key not in shared:
            shared[key] = len(groups)
            groups.append([])
        groups[shared[key]].append(i)
    return groups
