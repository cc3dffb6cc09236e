"""``llama-server`` as a decoder (``ServerDecoder``: the factories ``server_draft_model`` and its control
``server_plain``): one request as one ``POST /completion``, the answer as a ``Completion``, and ``ServerEvidence``,
the engine states its responses and counters show. The server process itself (start-up, HTTP, ``/metrics``,
``close_all``) is ``server_process``.

**llama-server** (tools/server): one server per γ (``--spec-draft-n-max`` is a server flag; per-request speculative
fields are compiled out, server-schema.cpp ``#if 0``), started on 127.0.0.1 and a free port with ``-np`` slots,
64 context tokens per slot, one thread (``slots`` = 4 by default; a call's requests are sent ``slots`` at a
time). Each request is one ``POST /completion`` with the prompt as token ids,
``return_tokens`` and every sampling field explicit; a call's requests are sent concurrently, one per slot.
The common sampler chain is logit bias, then ``samplers`` in the order given; the adapter sends ``penalties,
temperature, top_k, top_p, min_p``, the canonical order (common/sampling.cpp, ``common_sampler_init``). The slot's
sampler accepts the prompt tokens (server-context.cpp, ``init_sampler``), so the penalty window is prompt +
generated (``repeat_last_n`` 64). Declared: temperature max_tokens top_k top_p min_p repetition_penalty (CTRL, over
prompt + generated: canonical) bad_token_ids (``logit_bias`` [[id, false]] = -inf) stop (server stop strings on the
toy text) seed batch. Not declared:
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

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from specverify.adapters.boundary.finish import finish
from specverify.adapters.llamacpp.common import LONG_PREFIX, N_CTX, SAMPLERS, check_request, seed32
from specverify.adapters.llamacpp.gguf_export import gguf_file
from specverify.adapters.llamacpp.server_process import N_PARALLEL, Server
from specverify.errors import check
from specverify.protocol import Completion, Request

__all__ = ["ServerDecoder", "ServerEvidence", "SERVER_CAPABILITIES"]

MAX_SERVERS = 4  # per decoder (one per γ); batch-composition mixes γ 1, 2, 3, 5: fewer made it restart servers
SERVER_CAPABILITIES = frozenset(
    {
        "temperature",
        "max_tokens",
        "top_k",
        "top_p",
        "min_p",
        "repetition_penalty",
        "bad_token_ids",
        "stop",
        "seed",
        "batch",
    }
)


def _server_body(request: Request, seed: int, vocab_size: int) -> dict:
    p = request.params
    return {
        "prompt": list(request.prompt),
        "n_predict": int(p.max_tokens),
        "temperature": float(p.temperature),
        "dynatemp_range": 0.0,
        "top_k": int(p.top_k),
        "top_p": float(p.top_p),
        "min_p": float(p.min_p),
        "typical_p": 1.0,
        "top_n_sigma": -1.0,
        "xtc_probability": 0.0,
        "dry_multiplier": 0.0,
        "mirostat": 0,
        "repeat_penalty": float(p.repetition_penalty),
        "repeat_last_n": N_CTX,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "min_keep": 0,
        "n_probs": 0,
        "seed": int(seed),
        "samplers": SAMPLERS,
        "stop": list(p.stop),
        "logit_bias": [[int(t), False] for t in p.bad_token_ids if t < vocab_size],
        "ignore_eos": False,
        "return_tokens": True,
        "stream": False,
    }


class ServerDecoder:
    """``llama-server`` for one model pair; with ``speculative`` one server per γ (at most ``MAX_SERVERS`` live).
    ``slots`` the server's ``-np`` (a call's requests are sent ``slots`` at a time); ``cache_prompt`` sent with
    every request when not None (None: the server's default, true). ``engine_info["state"]`` counts what the
    responses and the server's counters show (module docstring, engine configurations)."""

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
        self.target_file = str(gguf_file(target, "toy"))
        self.draft_file = str(gguf_file(draft, "toy")) if speculative else None
        self.capabilities = SERVER_CAPABILITIES
        self.servers: dict = {}
        self.engine_counters = {"draft_n": 0, "draft_n_accepted": 0, "requests": 0}
        self.evidence = ServerEvidence()
        if speculative:
            self.prefill_tokens = 1  # the prompt's token comes before the first draft (module docstring)
        self.rng = np.random.default_rng()
        self._server(3)  # fail at set-up, not in the first call

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: what was asked of the server and the states its responses and counters showed."""
        requested = {"method": self.method, "slots": self.slots, "cache_prompt": self.cache_prompt}
        return {"name": "llama-server", "requested": requested, "state": self.evidence.state(self.servers.values())}

    def _server(self, gamma: int) -> Server:
        key = gamma if self.speculative else 0
        if key not in self.servers:
            while len(self.servers) >= MAX_SERVERS:
                self._retire(self.servers.pop(next(iter(self.servers))))
            self.servers[key] = Server(self.target_file, self.draft_file, gamma, slots=self.slots)
        return self.servers[key]

    def _retire(self, server: Server) -> None:
        try:
            self.evidence.retire(server)
        finally:
            server.close()

    def _body(self, request: Request) -> dict:
        body = _server_body(request, seed32(request.seed, self.rng), self.vocab.size)
        if self.cache_prompt is not None:
            body["cache_prompt"] = self.cache_prompt
        return body

    def __call__(self, requests: Sequence[Request]) -> list:
        requests = list(requests)
        for r in requests:
            check_request(r, self.capabilities, self.method, cut_before_temperature=False)
        out: list = [None] * len(requests)
        groups: dict = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.num_draft_tokens if self.speculative else 0, []).append(i)
        for gamma, indices in groups.items():
            server = self._server(max(gamma, 1))
            bodies = [self._body(requests[i]) for i in indices]
            with ThreadPoolExecutor(self.slots) as pool:
                answers = list(pool.map(server.complete, bodies))
            self.evidence.observe(server, answers)
            for i, answer in zip(indices, answers):
                t = answer["timings"]
                self.engine_counters["draft_n"] += int(t.get("draft_n", 0) or 0)
                self.engine_counters["draft_n_accepted"] += int(t.get("draft_n_accepted", 0) or 0)
                self.engine_counters["requests"] += 1
                done = finish(
                    answer["tokens"],
                    self.vocab,
                    requests[i].params,
                    engine="llama-server",
                    detail=f"the server's stop_type {answer['stop_type']!r}",
                )
                out[i] = Completion(done.tokens, done.finish_reason)
        return out

    def close(self) -> None:
        for server in self.servers.values():
            self._retire(server)
        self.servers.clear()


class ServerEvidence:
    """The engine states a ``ServerDecoder``'s servers reached (module docstring, engine
    configurations): from each response, ``timings.cache_n`` (prompt tokens reused from the slot's cache) and
    ``id_slot``; from each server's ``/metrics``, read after every call and when it is retired, ``n_decode_total``
    and ``n_busy_slots_per_decode``."""

    def __init__(self):
        self.requests = self.cache_hits = self.cached_tokens = self.long_hits = 0
        self.slot_ids: set = set()
        self.retired = {"decodes": 0.0, "parallel": 0.0}  # counters of the servers already closed
        self.latest: dict = {}  # id(server) -> its last /metrics reading

    def observe(self, server, answers: Sequence[dict]) -> None:
        for answer in answers:
            cached = int(answer["timings"].get("cache_n", 0) or 0)
            self.requests += 1
            self.cache_hits += cached > 0
            self.cached_tokens += cached
            self.long_hits += cached >= LONG_PREFIX
            if answer.get("id_slot") is not None:
                self.slot_ids.add(int(answer["id_slot"]))
        self.latest[id(server)] = server.metrics()

    def retire(self, server) -> None:
        reading = self.latest.pop(id(server), None)
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


def _decodes(reading: dict) -> tuple:
    """(decode calls, busy slots beyond one summed over them) of one /metrics reading. The server prints the mean
    with 6 significant digits, so the second is good to about decode calls × 5e-6."""
    decodes = float(reading.get("n_decode_total", 0.0))
    mean_busy = float(reading.get("n_busy_slots_per_decode", 0.0))
    return decodes, max(0.0, (mean_busy - 1.0) * decodes)
