"""A stand-in HTTP server speaking the OpenAI completions dialect (token ids in, token ids out), backed by the
reference decoder on a toy pair, with faults on demand: the server adapter's client tested without any engine.

``StandIn(target, draft, fault=...)`` serves on 127.0.0.1 in a thread. ``fault``:

- None: a correct server (the reference decoder's law, seeded requests reproducible);
- ``"5xx"``: every completion answers HTTP 500; ``"malformed"``: a body that is not JSON;
- ``"drop"``: the connection is closed before any response; ``"drop-once"``: only the first completion's;
- ``"slow"``: completions wait ``delay_s`` before answering;
- ``"ignore-FIELD"`` (``top_k``, ``min_tokens``, ...): the field is accepted and dropped (a server that does not
  honour it);
- ``"die-after"``: the server stops after ``die_after`` completions;
- ``idle_close_s``: kept-alive connections idle that long are closed by the server (as uvicorn does);
- ``"stream-repeat"`` / ``"stream-lose"``: a streamed answer repeats / loses its last chunk (``stream`` bodies are
  answered as server-sent events, two tokens a chunk).
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


def params_of(body: dict, vocab_size: int, fault) -> SamplingParams:
    fields = {k: body[k] for k in _FIELDS if k in body}
    if fault is not None and fault.startswith("ignore-"):
        fields.pop(fault[len("ignore-") :], None)
    if "stop" in body and fault != "ignore-stop":
        fields["stop"] = tuple(body["stop"])
    if "allowed_token_ids" in body and fault != "ignore-bad_token_ids":
        fields["bad_token_ids"] = tuple(t for t in range(vocab_size) if t not in set(body["allowed_token_ids"]))
    return SamplingParams(max_tokens=body["max_tokens"], **fields)


class StandIn:
    def __init__(self, target, draft, *, fault=None, delay_s: float = 0.0, die_after: int = 0, gamma: int = 3,
                 idle_close_s=None, port: int = 0):  # fmt: skip
        self.decoder, self.vocab, self.gamma = make_decoder(target, draft), target.vocab, gamma
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

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fault", default=None)
    parser.add_argument("--api-key", default=None)  # accepted and ignored: a secret on the launch line
    parser.add_argument("--gamma", type=int, default=3)
    args = parser.parse_args(argv)
    pair = ToyPairSpec(vocab_size=6).build()
    server = StandIn(pair.target, pair.draft, fault=args.fault, port=args.port, gamma=args.gamma)
    server.thread.join()


if __name__ == "__main__":
    main()
