"""llama.cpp's own executables as decoders: ``llama-server`` (with or without a draft model) and the
``llama-speculative`` example. Part of ``specverify.adapters.llamacpp`` (see its docstring for the factories). The
server process itself (start-up, HTTP, ``/metrics``, ``close_all``) and ``ServerEvidence`` are in
``_llamacpp_server``, re-exported here.

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
``specverify.adapters.llamacpp``). ``cache_prompt`` (a request field, true by default: server-task.h:53) makes
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

**llama-speculative** (examples/speculative/speculative.cpp): one process per request, ``-np 1`` (a chain; the tree
factory ``-np 2 --spec-draft-p-split 0.1``), the
one-letter GGUF pieces (it takes text: ``-p``), ``--spec-draft-n-max`` γ, the same sampler order through
``--samplers``. The generated text is read back from stdout (the prompt echo is removed). **Ends:** the example is
asked to honour EOS and ``-n`` = ``max_tokens``; it knows no stop strings, which the adapter matches itself and cuts
at (``specverify.adapters.boundary.finish``). Tokens it writes past EOS within a round, or past ``-n``
(speculative.cpp:485 stops only once ``n_predict > params.n_predict``, after the round), are returned uncut, so the
certifier reports them (docs/findings/llamacpp.md, finding 6); ``decoder.overshoot`` counts such requests. The example
reports no rounds (no ``prefill_tokens``). The example's asynchronous logger is not drained at exit (common/log.cpp,
``common_log_main``), so a run may lose the end of its output: a run counts only when stderr ends with ``n_predict = K``
and stdout holds the prompt echo plus exactly K letters; otherwise it is replayed with the same seed (up to 30 times,
then the call is invalid). Declared: temperature max_tokens top_k top_p min_p stop seed.

**Unset fields** (docs/adapters.md): both executables send every sampling field, an unset one as its canonical
default. Their own defaults (``common_params_sampling``: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, and the
server's DRY, XTC, typical-p and top-n-sigma samplers) are another law, and neither has another way to leave a field
unset, so leaving one out would certify llama.cpp's defaults instead of its speculative path.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from specverify.adapters._llamacpp_common import check_request, executable, seed32
from specverify.adapters._llamacpp_server import (  # noqa: F401 -- re-exported: the server process and its evidence
    N_CTX,
    N_PARALLEL,
    ServerEvidence,
    _Server,
    close_all,
    parse_metrics,
    spec_args,
)
from specverify.adapters.boundary.finish import finish
from specverify.adapters.llamacpp_gguf import char_text, char_tokens, gguf_file
from specverify.errors import check
from specverify.protocol import Completion, Request

__all__ = [
    "ServerDecoder",
    "ServerEvidence",
    "ExampleDecoder",
    "SERVER_CAPABILITIES",
    "EXAMPLE_CAPABILITIES",
    "close_all",
    "parse_metrics",
    "spec_args",
]

MAX_SERVERS = 4  # per decoder (one per γ); batch-composition mixes γ 1, 2, 3, 5: fewer made it restart servers
SAMPLERS = ["penalties", "temperature", "top_k", "top_p", "min_p"]
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
EXAMPLE_CAPABILITIES = frozenset({"temperature", "max_tokens", "top_k", "top_p", "min_p", "stop", "seed"})
_N_PREDICT = re.compile(r"n_predict\s*=\s*(\d+)")


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

    def _server(self, gamma: int) -> _Server:
        key = gamma if self.speculative else 0
        if key not in self.servers:
            while len(self.servers) >= MAX_SERVERS:
                self._retire(self.servers.pop(next(iter(self.servers))))
            self.servers[key] = _Server(self.target_file, self.draft_file, gamma, slots=self.slots)
        return self.servers[key]

    def _retire(self, server: _Server) -> None:
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


class ExampleDecoder:
    """``llama-speculative`` (examples/speculative), one process per request; ``branches`` > 1 drafts a tree
    (``-np branches``, a branch splits off where the draft's next candidate has probability above ``p_split``)."""

    def __init__(self, target, draft, *, timeout_s: float = 60.0, branches: int = 1, p_split: float = 0.1):
        check(
            isinstance(branches, int) and not isinstance(branches, bool) and branches >= 1,
            f"branches={branches!r} must be an int >= 1 (llama-speculative's -np: 1 for a chain, more for a tree).",
        )
        check(
            isinstance(p_split, (int, float)) and not isinstance(p_split, bool) and 0.0 <= p_split <= 1.0,
            f"p_split={p_split!r} must be a probability in [0, 1] (--spec-draft-p-split; llama.cpp's default 0.1).",
        )
        self.vocab, self.timeout_s = target.vocab, timeout_s
        self.branches, self.p_split = branches, float(p_split)
        self.exe = executable("llama-speculative")
        self.target_file = str(gguf_file(target, "char"))
        self.draft_file = str(gguf_file(draft, "char"))
        self.capabilities = EXAMPLE_CAPABILITIES
        self.rng = np.random.default_rng()
        self.overshoot = 0  # requests whose output ran past EOS or max_tokens (returned uncut: invalid)
        self.lost_output = 0  # runs whose stdout tail was lost at exit and were replayed (findings, evidence)
        self.garbled_output: list = []  # (stdout, n_predict) of runs whose letters did not match n_predict (replayed)
        self.attempts = 30  # the loss rate was ~50 % under load: 30 losses in a row is ~1e-9
        self.factory = "speculative_example" if branches == 1 else "speculative_example_tree"

    def args(self, request: Request, seed: int) -> list:
        """The command line of one request."""
        p, eos = request.params, int(self.vocab.eos_token_id)
        return [
            self.exe, "-m", self.target_file, "--spec-draft-model", self.draft_file,
            "-p", char_text(request.prompt, eos), "-n", str(p.max_tokens),
            "--spec-draft-n-max", str(request.num_draft_tokens), "--spec-draft-n-min", "0",
            "-np", str(self.branches), "--spec-draft-p-split", repr(self.p_split),
            "-c", str(N_CTX), "-t", "1", "-ctk", "f32", "-ctv", "f32", "-ctkd", "f32", "-ctvd", "f32",
            "--temp", repr(float(p.temperature)), "--top-k", str(p.top_k),
            "--top-p", repr(float(p.top_p)), "--min-p", repr(float(p.min_p)), "--typical", "1",
            "--repeat-penalty", "1", "--samplers", ";".join(SAMPLERS), "--seed", str(seed),
        ]  # fmt: skip

    def __call__(self, requests: Sequence[Request]) -> list:
        return [self.generate(r) for r in requests]

    def generate(self, request: Request) -> Completion:
        check_request(request, self.capabilities, self.factory, cut_before_temperature=False)
        eos = int(self.vocab.eos_token_id)
        args = self.args(request, seed32(request.seed, self.rng))
        for _ in range(self.attempts):
            out, err, code = self._run(args)
            if code != 0:
                raise RuntimeError(f"llama-speculative exited with {code}: {err[-1500:]} ({args!r})")
            done = _N_PREDICT.search(err)
            if done is None:  # the asynchronous log lost its tail at exit: the same seed replays the same run
                self.lost_output += 1
                continue
            generated = self._generated(request, out, eos)
            if generated is None or len(generated) != int(done.group(1)):  # the same exit race, on stdout
                self.garbled_output.append((out, int(done.group(1))))
                continue
            done = finish(generated, self.vocab, request.params, engine="llama-speculative", cuts={"stop"})
            self.overshoot += done.passed_through > 0
            return Completion(done.tokens, done.finish_reason)
        raise RuntimeError(
            f"llama-speculative's output was lost or garbled {self.attempts} times in a row (no 'n_predict = ' line, "
            f"or not n_predict letters): {args!r}"
        )

    def _run(self, args: list) -> tuple:
        """(stdout, stderr, exit status) of one run, both streams into files: with pipes the example lost its
        output more often (finding 3)."""
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            try:
                code = subprocess.run(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"llama-speculative hung (> {self.timeout_s:g} s): {args!r}") from None
            out.seek(0)
            err.seek(0)
            return out.read(), err.read(), code.returncode

    def _generated(self, request: Request, stdout: str, eos: int):
        """The generated ids of one run's stdout (prompt echo removed), None when it is not echo + letters."""
        text = stdout.strip("\n")
        echo = char_text(request.prompt, eos)
        if not text.startswith(echo):
            return None
        try:
            return char_tokens(text[len(echo) :], eos)
        except ValueError:
            return None
