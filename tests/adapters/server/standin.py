"""A stand-in HTTP server speaking the OpenAI completions dialect (token ids in, token ids out), backed by the
reference decoder on a toy pair, with faults on demand: the server adapter's client tested without any engine.

``StandIn(target, draft, fault=...)`` serves on 127.0.0.1 in a thread. ``fault``:

- None: a correct server (the reference decoder's law, seeded requests reproducible);
- ``"5xx"``: every completion answers HTTP 500; ``"malformed"``: a body that is not JSON;
- ``"drop"``: the connection is closed before any response; ``"drop-once"``: only the first completion's;
- ``"slow"``: completions wait ``delay_s`` before answering;
- ``"ignore-FIELD"`` (``top_k``, ``min_tokens``, ...; several: ``"ignore-stop,top_k"``): the field is accepted and
  dropped (a server that does not honour it);
- ``"die-after"``: the server stops after ``die_after`` completions;
- ``idle_close_s``: kept-alive connections idle that long are closed by the server (as uvicorn does);
- ``"stream-repeat"`` / ``"stream-lose"``: a streamed answer repeats / loses its last chunk (``stream`` bodies are
  answered as server-sent events, two tokens a chunk).
- ``"hot"``: sampling requests are served at 1.25 times their temperature (greedy ones as they are): a law a
  little off the exact one, as a bf16 deployment's is;
- ``"past-end"`` / ``"early-stop"`` (``llamacpp``): one token after the end / the answer cut after its first token
  with ``stop_type`` ``word``.

``dialect="llamacpp"`` speaks llama-server's ``POST /completion`` instead (``GET /props``, ``llamacpp:`` counters in
``/metrics``; answers with ``stop_type``, ``timings.cache_n`` / ``draft_n`` / ``draft_n_accepted`` and ``id_slot``
over ``slots`` slots; ``cache_n`` is the prompt less one token when a slot meets the same prompt again and the
request does not send ``cache_prompt: false``). Run as a process (``main``) it also takes llama-server's own flags,
so a script named ``llama-server`` that runs it stands in for the executable.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.reference import make_decoder

_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty",
           "min_tokens")  # fmt: skip


_STOP_TYPE = {"eos": "eos", "stop": "word", "length": "limit", "no_token": "none"}


def ignored(fault) -> set:
    """The fields fault ``"ignore-A,B"`` drops."""
    return set(fault[len("ignore-") :].split(",")) if fault is not None and fault.startswith("ignore-") else set()


def llamacpp_params_of(body: dict, fault) -> SamplingParams:
    """A llama.cpp ``/completion`` body (every field sent) as the params the reference decoder runs."""
    banned = tuple(sorted({int(t) for t, allowed in body["logit_bias"] if allowed is False}))
    fields = {"temperature": body["temperature"], "top_k": body["top_k"], "top_p": body["top_p"],
              "min_p": body["min_p"], "repetition_penalty": body["repeat_penalty"], "stop": tuple(body["stop"]),
              "bad_token_ids": banned}  # fmt: skip
    for field in ignored(fault):
        fields.pop(field, None)
    return SamplingParams(max_tokens=body["n_predict"], **fields)


def params_of(body: dict, vocab_size: int, fault) -> SamplingParams:
    fields = {k: body[k] for k in _FIELDS if k in body}
    for field in ignored(fault):
        fields.pop(field, None)
    if "stop" in body and "stop" not in ignored(fault):
        fields["stop"] = tuple(body["stop"])
    if "allowed_token_ids" in body and "bad_token_ids" not in ignored(fault):
        fields["bad_token_ids"] = tuple(t for t in range(vocab_size) if t not in set(body["allowed_token_ids"]))
    if fault == "hot" and fields.get("temperature", 1.0) > 0:  # a law a little off the exact one (as bf16 is)
        fields["temperature"] = 1.25 * fields.get("temperature", 1.0)
    return SamplingParams(max_tokens=body["max_tokens"], **fields)


class StandIn:
    def __init__(self, target, draft, *, fault=None, delay_s: float = 0.0, die_after: int = 0, gamma: int = 3,
                 idle_close_s=None, port: int = 0, dialect: str = "openai", slots: int = 4):  # fmt: skip
        self.decoder, self.vocab, self.gamma = make_decoder(target, draft), target.vocab, gamma
        self.dialect, self.slots = dialect, slots
        self.slot_prompts: dict = {}  # llamacpp: slot -> the last prompt it served
        self.fault, self.delay_s, self.die_after = fault, delay_s, die_after
        self.completions = 0
        self.lock = threading.Lock()
        self.rng = np.random.default_rng(0)
        self.bodies: list = []
        self.headers: list = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            timeout = idle_close_s  # a kept-alive connection idle this long is closed (uvicorn: 5 s)

            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: bytes, kind="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path == "/health":
                    self._send(200, b"{}")
                elif self.path == "/props":
                    self._send(200, b'{"build_info": "stand-in llama"}')
                elif self.path == "/version":
                    self._send(200, b'{"version": "stand-in 1.0"}')
                elif self.path == "/v1/models":
                    self._send(200, b'{"data": [{"id": "toy"}]}')
                elif self.path == "/metrics":
                    self._send(200, standin.metrics().encode(), "text/plain")
                else:
                    self._send(404, b"{}")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with standin.lock:
                    standin.completions += 1
                    n = standin.completions
                    standin.bodies.append(body)
                    standin.headers.append(dict(self.headers))
                fault = standin.fault
                if fault == "die-after" and n > standin.die_after:
                    threading.Thread(target=standin.close, daemon=True).start()
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "drop" or (fault == "drop-once" and n == 1):
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "5xx":
                    return self._send(500, b'{"error": "out of memory"}')
                if fault == "malformed":
                    return self._send(200, b'{"choices": [{"text": "ab", "token_ids": [1, ')
                if fault == "slow":
                    time.sleep(standin.delay_s)
                if standin.dialect == "llamacpp":
                    return self._send(200, json.dumps(standin.complete_llamacpp(body, n)).encode())
                answer = standin.complete(body)
                if not body.get("stream"):
                    return self._send(200, json.dumps(answer).encode())
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in standin.events(answer["choices"][0]):
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def complete(self, body: dict) -> dict:
        params = params_of(body, self.vocab.size, self.fault)
        request = Request(tuple(body["prompt"]), params, self.gamma, body.get("seed"))
        with self.lock:
            outs = self.decoder([request] * int(body.get("n", 1)))
        choices = []
        for index, done in enumerate(outs):
            text = "".join(self.vocab.strings[t] for t in done.tokens)
            choices.append({"index": index, "text": text, "token_ids": list(done.tokens),
                            "finish_reason": done.finish_reason})  # fmt: skip
        return {"choices": choices}

    def complete_llamacpp(self, body: dict, n: int) -> dict:
        params = llamacpp_params_of(body, self.fault)
        request = Request(tuple(body["prompt"]), params, self.gamma, body.get("seed"))
        with self.lock:
            done = self.decoder([request])[0]
            slot = (n - 1) % self.slots
            again = self.slot_prompts.get(slot) == request.prompt and body.get("cache_prompt") is not False
            self.slot_prompts[slot] = request.prompt
        rounds = len(done.accepted or ())
        timings = {"cache_n": len(request.prompt) - 1 if again else 0, "draft_n": rounds * self.gamma,
                   "draft_n_accepted": sum(done.accepted or ())}  # fmt: skip
        tokens, stop_type = list(done.tokens), _STOP_TYPE[done.finish_reason]
        if self.fault == "past-end":  # one token more than the end allows (after EOS, or past n_predict)
            tokens.append(0)
        elif self.fault == "early-stop":  # a stop string "found" after the first token
            tokens, stop_type = tokens[:1], "word"
        text = "".join(self.vocab.strings[t] for t in tokens)
        return {"tokens": tokens, "content": text, "stop_type": stop_type, "timings": timings, "id_slot": slot}

    def events(self, choice: dict) -> list:
        """The streamed chunks of one answer: two tokens a chunk (a speculative round's multi-token delta); fault
        ``"stream-repeat"`` sends the last chunk twice, ``"stream-lose"`` drops it."""
        ids = choice["token_ids"]
        pieces = [ids[i : i + 2] for i in range(0, len(ids), 2)] or [[]]
        if self.fault == "stream-repeat":
            pieces.append(pieces[-1])
        elif self.fault == "stream-lose" and len(pieces) > 1:
            pieces.pop()
        out = []
        for k, piece in enumerate(pieces):
            last = k == len(pieces) - 1
            text = "".join(self.vocab.strings[t] for t in piece)
            out.append({"choices": [{"index": 0, "text": text, "token_ids": piece,
                                     "finish_reason": choice["finish_reason"] if last else None}]})  # fmt: skip
        return out

    def metrics(self) -> str:
        n = self.completions
        if self.dialect == "llamacpp":
            return f"# TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total {2 * n}\n" + (
                "llamacpp:n_busy_slots_per_decode 1.5\n"
            )
        return (
            "# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.\n"
            f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="toy"}} {float(n)}\n'
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="toy"}} {float(3 * n)}\n'
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="toy"}} {float(2 * n)}\n'
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="0"}} {float(n)}\n'
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="1"}} {float(n)}\n'
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="2"}} 0.0\n'
        )

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def main(argv=None) -> None:
    """``python -m tests.adapters.server.standin --port P [--fault F]``: the stand-in on the toy pair of the tests
    (``ToyPairSpec(vocab_size=6)``) as a process, for managed-mode tests."""
    import argparse

    from specverify.oracles.pairs import ToyPairSpec

    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dialect", default="openai")
    parser.add_argument("-np", type=int, default=4)  # llama-server's slots
    parser.add_argument("--spec-draft-n-max", type=int, default=None)  # llama-server's γ
    parser.add_argument("--fault", default=None)
    parser.add_argument("--api-key", default=None)  # accepted and ignored: a secret on the launch line
    parser.add_argument("--gamma", type=int, default=3)
    args, _ = parser.parse_known_args(argv)  # other llama-server flags are taken and ignored
    pair = ToyPairSpec(vocab_size=6).build()
    gamma = args.gamma if args.spec_draft_n_max is None else args.spec_draft_n_max
    server = StandIn(pair.target, pair.draft, fault=args.fault, port=args.port, gamma=gamma, dialect=args.dialect,
                     slots=args.np)  # fmt: skip
    server.thread.join()


if __name__ == "__main__":
    main()
