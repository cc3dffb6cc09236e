"""The ``llama-speculative`` example as a decoder (``ExampleDecoder``: the factories ``speculative_example`` and
``speculative_example_tree``), one process per request.

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
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from typing import Sequence

import numpy as np

from specverify.adapters.boundary.finish import finish
from specverify.adapters.boundary.gguf_export import char_text, char_tokens, gguf_file
from specverify.adapters.llamacpp.common import N_CTX, SAMPLERS, check_request, executable, seed32
from specverify.errors import check
from specverify.protocol import Completion, Request

__all__ = ["ExampleDecoder", "EXAMPLE_CAPABILITIES"]

EXAMPLE_CAPABILITIES = frozenset({"temperature", "max_tokens", "top_k", "top_p", "min_p", "stop", "seed"})
_N_PREDICT = re.compile(r"n_predict\s*=\s*(\d+)")


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
