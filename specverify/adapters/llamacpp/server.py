"""``llama-server`` as a decoder (``ServerDecoder``: the factories ``server_draft_model`` and its control
``server_plain``), built on the server adapter (``specverify.adapters.server``): its ``llamacpp`` dialect maps each
request onto one ``POST /completion`` and reads the answer, its client sends them (``slots`` in flight, per-request
timeouts, faults as ``invalid`` with a ``curl`` line), and its managed processes start each server from
``launch_template`` on 127.0.0.1 and a free port and stop it with ``close()`` (and at exit). What stays here is
llama.cpp's own: the launch line, the request checks, the decoder's record (``engine_info``) and ``ServerEvidence``,
the engine states its answers and ``/metrics`` show.

**llama-server** (tools/server): one server per γ (``--spec-draft-n-max`` is a server flag; per-request speculative
fields are compiled out, server-schema.cpp ``#if 0``), at most ``MAX_SERVERS`` live per decoder (the least recently
used is stopped first), with ``-np`` slots, 64 context tokens per slot, one thread (``slots`` = 4 by default; a
call's requests are sent ``slots`` at a time). Each request is one ``POST /completion`` with the prompt as token ids,
``return_tokens`` and every sampling field explicit (the dialect's body). The common sampler chain is logit bias,
then ``samplers`` in the order given; the adapter sends ``penalties, temperature, top_k, top_p, min_p``, the
canonical order (common/sampling.cpp, ``common_sampler_init``). The slot's sampler accepts the prompt tokens
(server-context.cpp, ``init_sampler``), so the penalty window is prompt + generated (``repeat_last_n`` 64). Declared
(the dialect's fields, no honour probes: each mapping was read in llama.cpp's code and is tested on the engine):
temperature max_tokens top_k top_p min_p repetition_penalty (CTRL, over prompt + generated: canonical) bad_token_ids
(``logit_bias`` [[id, false]] = -inf) stop (server stop strings on the toy text) seed batch. Not declared:
frequency/presence penalties (they count the prompt too), min_tokens (no such field), ignore_eos, grammar, stream,
accepted (the server reports only per-request totals, ``timings.draft_n`` / ``draft_n_accepted``, which are summed
into ``decoder.engine_counters`` as evidence). **Ends:** the server is asked to honour all three (EOS, ``stop``,
``n_predict``: ``process_token``, server-context.cpp:1814-1942, stops the slot at the first), so the adapter cuts
nothing (``specverify.adapters.boundary.finish``): tokens past an end are returned for the certifier to report, an early
stop raises ``EngineStoppedEarly`` (with the server's ``stop_type``). **Prefill** (``prefill_tokens`` = 1, speculative
server): the slot samples its first token from the prompt's evaluation (server-context.cpp:3818-3837) before any draft
is made (:2983, slots in ``SLOT_STATE_GENERATING`` only); declared although the server reports no rounds.

**Engine configurations and their evidence** (``ServerDecoder(slots=, cache_prompt=)``; the presets are in
``configs``). ``cache_prompt`` (a request field, true by default: server-task.h:53) makes
the slot keep the KV entries of the longest common prefix of its last request's tokens and the new prompt
(server-context.cpp:3198-3200; a prompt met whole is evaluated from its last token, :3382-3386); false evaluates
every prompt from its start (:3262-3264). Each response reports the tokens so reused, ``timings.cache_n``
(``n_prompt_cached``, server-context.cpp:3390, server-common.cpp:86), and the slot that served it, ``id_slot``
(server-task.cpp:345). Every server runs with ``--metrics``; after each call the adapter reads ``/metrics``:
``n_decode_total`` and ``n_busy_slots_per_decode``, the mean number of slots busy per ``llama_decode``
(server-context.cpp:4053-4058, server-task.cpp:1586), whose excess over 1 shows decode calls that served
several slots at once. ``engine_info["state"]`` (``ServerEvidence``): ``requests``, ``cache_hit_requests``
(``cache_n`` > 0), ``cached_prompt_tokens``, ``long_prefix_hits`` (``cache_n`` ≥ 32), ``distinct_slots``,
``decode_calls``, ``parallel_slot_decodes``.
"""

from __future__ import annotations

import http.client
import shlex
from typing import Sequence

from specverify.adapters.llamacpp.common import LONG_PREFIX, N_CTX, check_request, executable
from specverify.adapters.server.decoder import ServerDecoder as HttpDecoder
from specverify.adapters.server.dialects import DIALECTS
from specverify.adapters.server.metrics import parse_prometheus
from specverify.errors import check
from specverify.protocol import Request

__all__ = ["ServerDecoder", "ServerEvidence", "SERVER_CAPABILITIES", "launch_template", "parse_metrics"]

N_PARALLEL = 4  # slots of a server by default
MAX_SERVERS = 4  # per decoder (one per γ); batch-composition mixes γ 1, 2, 3, 5: fewer made it restart servers
TIMEOUT_S = 60.0  # per request, and for a server to answer /health after its start
DIALECT = DIALECTS["llamacpp"]
#: the dialect's fields and ``seed``, ``batch``: what the server adapter declares for it without honour probes
SERVER_CAPABILITIES = DIALECT.maps | {"seed", "batch"}


def launch_template(slots: int, speculative: bool) -> str:
    """The ``llama-server`` line of one server, as a server adapter template (``process.PLACEHOLDERS``): ``slots``
    slots of ``N_CTX`` context tokens, one thread, F32 KV caches (the default F16 moves logits by up to 5e-3),
    ``--metrics``; ``speculative``: the draft GGUF proposing ``{gamma}`` tokens per round."""
    exe = shlex.quote(executable("llama-server")).replace("{", "{{").replace("}", "}}")
    line = (
        f"{exe} -m {{target_gguf}} --host {{host}} --port {{port}} -c {N_CTX * slots} -np {slots} -t 1 -tb 1 "
        "--no-webui --metrics -ctk f32 -ctv f32"
    )
    if speculative:
        # without --spec-type the draft model is loaded and never used ("speculative.types": "none")
        line += (
            " --spec-type draft-simple --spec-draft-model {draft_gguf} --spec-draft-n-max {gamma}"
            " --spec-draft-n-min 0 --spec-draft-p-min 0 -ctkd f32 -ctvd f32"
        )
    return line


class ServerDecoder:
    """``llama-server`` for one model pair; with ``speculative`` one server per γ (at most ``MAX_SERVERS`` live).
    ``slots`` the server's ``-np`` (a call's requests are sent ``slots`` at a time); ``cache_prompt`` sent with
    every request when not None (None: the server's default, true). ``engine_info["state"]`` counts what the
    responses and the server's counters show (module docstring, engine configurations). ``server`` is the server
    adapter's decoder it runs on."""

    def __init__(self, target, draft, *, speculative: bool, slots: int = N_PARALLEL, cache_prompt=None):
        check(
            isinstance(slots, int) and not isinstance(slots, bool) and 1 <= slots <= 16,
            f"slots={slots!r} must be an int in [1, 16] (llama-server's -np), e.g. --engine-option slots=4.",
        )
        check(
            cache_prompt is None or isinstance(cache_prompt, bool),
            f"cache_prompt={cache_prompt!r} must be None (the server's default) or a bool (sent with each request).",
        )
        self.vocab, self.speculative = target.vocab, speculative
        self.method = "server_draft_model" if speculative else "server_plain"
        self.slots, self.cache_prompt = slots, cache_prompt
        self.capabilities = SERVER_CAPABILITIES
        self.evidence = ServerEvidence()
        if speculative:
            self.prefill_tokens = 1  # the prompt's token comes before the first draft (module docstring)
        extra = {} if cache_prompt is None else {"cache_prompt": cache_prompt}
        # starts the first server: a failure is a set-up error, not a fault in the first call
        self.server = HttpDecoder(target, draft, dialect=DIALECT, method=self.method,
                                  template=launch_template(slots, speculative), speculative=speculative,
                                  max_in_flight=slots, timeout_s=TIMEOUT_S, startup_timeout_s=TIMEOUT_S, honour=False,
                                  extra_fields=extra, max_live=MAX_SERVERS, watch=self.evidence)  # fmt: skip

    @property
    def servers(self) -> dict:
        """The live servers by γ (0 for ``server_plain``: one for every γ): the server adapter's, each with its
        ``client`` and managed ``process`` (``process.argv``, the launch line)."""
        return self.server.servers

    @property
    def engine_counters(self) -> dict:
        """The per-request draft counts the answers reported, summed (evidence that the server speculated)."""
        counts = self.server.request_counts
        return {"draft_n": counts["draft_n"], "draft_n_accepted": counts["draft_n_accepted"],
                "requests": self.server.state["requests"]}  # fmt: skip

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: what was asked of the server and the states its responses and counters showed."""
        requested = {"method": self.method, "slots": self.slots, "cache_prompt": self.cache_prompt}
        return {"name": "llama-server", "requested": requested, "state": self.evidence.state(self.servers.values())}

    def __call__(self, requests: Sequence[Request]) -> list:
        requests = list(requests)
        for r in requests:
            check_request(r, self.capabilities, self.method, cut_before_temperature=False)
        return self.server(requests)

    def close(self) -> None:
        self.server.close()


class ServerEvidence:
    """The engine states a ``ServerDecoder``'s servers reached (module docstring, engine configurations): from each
    answer, ``timings.cache_n`` (prompt tokens reused from the slot's cache) and ``id_slot`` (the dialect's
    ``Answer.state``); from each server's ``/metrics``, read after every call, ``n_decode_total`` and
    ``n_busy_slots_per_decode`` (the reading of a stopped server stays counted). The server adapter's decoder calls
    ``observe`` after each group of a call and ``retire`` before it stops a server."""

    def __init__(self):
        self.requests = self.cache_hits = self.cached_tokens = self.long_hits = 0
        self.slot_ids: set = set()
        self.retired = {"decodes": 0.0, "parallel": 0.0}  # counters of the servers already closed
        self.latest: dict = {}  # id(live server) -> its last /metrics reading

    def observe(self, live, answers: Sequence) -> None:
        for answer in answers:
            cached = int(answer.state.get("cache_n", 0) or 0)
            self.requests += 1
            self.cache_hits += cached > 0
            self.cached_tokens += cached
            self.long_hits += cached >= LONG_PREFIX
            if answer.state.get("id_slot") is not None:
                self.slot_ids.add(int(answer.state["id_slot"]))
        self.latest[id(live)] = read_metrics(live.client)

    def retire(self, live) -> None:
        reading = self.latest.pop(id(live), None)
        if reading is not None:
            decodes, parallel = _decodes(reading)
            self.retired["decodes"] += decodes
            self.retired["parallel"] += parallel

    def state(self, live) -> dict:
        """``engine_info["state"]``: requests, cache_hit_requests, cached_prompt_tokens, long_prefix_hits (requests
        whose ``cache_n`` is at least ``LONG_PREFIX``), distinct_slots,
        decode_calls and parallel_slot_decodes (the busy slots beyond one summed over decode calls, from the mean
        the server reports: > 0 only when some llama_decode served two slots or more)."""
        decodes, parallel = self.retired["decodes"], self.retired["parallel"]
        for server in live:
            reading = self.latest.get(id(server))
            if reading is not None:
                d, p = _decodes(reading)
                decodes, parallel = decodes + d, parallel + p
        return {
            "requests": self.requests,
            "cache_hit_requests": self.cache_hits,
            "cached_prompt_tokens": self.cached_tokens,
            "long_prefix_hits": self.long_hits,
            "distinct_slots": len(self.slot_ids),
            "decode_calls": int(decodes),
            "parallel_slot_decodes": int(round(parallel)),
        }


def read_metrics(client) -> dict:
    """The server's counters (``GET /metrics`` through the server adapter's ``client``) as :func:`parse_metrics`
    gives them; ``RuntimeError`` (verdict ``invalid``) when it fails."""
    try:
        status, text = client.get_text("/metrics", timeout_s=10.0)
    except (OSError, http.client.HTTPException) as exc:
        raise RuntimeError(f"llama-server /metrics failed ({exc!r}) at {client.url}") from None
    if status != 200:
        raise RuntimeError(f"llama-server /metrics answered {status}: {text[:300]!r}")
    return parse_metrics(text)


def parse_metrics(text: str) -> dict:
    """``llamacpp:NAME VALUE`` samples of a /metrics answer as ``{NAME: float}`` (comments skipped).

    >>> parse_metrics("# HELP x\\nllamacpp:n_decode_total 12\\nllamacpp:n_busy_slots_per_decode 1.5\\n")
    {'n_decode_total': 12.0, 'n_busy_slots_per_decode': 1.5}
    """
    prefix = "llamacpp:"
    return {name[len(prefix) :]: value for name, _, value in parse_prometheus(text) if name.startswith(prefix)}


def _decodes(reading: dict) -> tuple:
    """(decode calls, busy slots beyond one summed over them) of one /metrics reading. The server prints the mean
    with 6 significant digits, so the second is good to about decode calls × 5e-6."""
    decodes = float(reading.get("n_decode_total", 0.0))
    mean_busy = float(reading.get("n_busy_slots_per_decode", 0.0))
    return decodes, max(0.0, (mean_busy - 1.0) * decodes)
