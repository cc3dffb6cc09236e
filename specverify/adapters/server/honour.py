"""The honour check: before certifying, ask the server whether it honours each field its dialect maps.

A server that accepts a field and ignores it (a ``top_k`` that is parsed and dropped) would be certified on a law it
never ran, so every field the dialect maps is probed with a value whose effect is certain, and only the fields whose
probes show the effect are declared; the others read "not covered" with the probe's reason (never dropped silently).

Probes run on a handful of short prompts at ``max_tokens`` 4, first greedy (temperature 0, unseeded) as the baseline:

- ``temperature``: 8 greedy requests with different seeds all equal the baseline, and 16 seeded requests at
  temperature 1 are not all equal (a server sampling at temperature 0 or at 1 whatever it is sent fails one of them);
- ``seed``: each of 16 seeds sent twice at temperature 1 gives the same tokens twice. Evidence only: a seed changes
  no law, so the decoder declares ``seed`` whatever the answer (seeded requests may take another code path, whose
  law is tested) and records it; the certifier's reproducibility check is the verdict on it;
- ``top_k`` (1), ``top_p`` (0.01), ``min_p`` (1.0): 16 seeded requests at temperature 1 with the cut all equal the
  greedy baseline (the cut keeps only the argmax). A server that ignores the cut samples the whole law: all 16 equal
  the baseline with probability p^16, p the baseline's probability (the temperature probe shows p < 1);
- ``bad_token_ids``: banning the baseline's first token changes the first token, and no banned id appears;
- ``stop``: the text of the baseline's first token as a stop string ends the output after that token;
- ``min_tokens`` (= ``max_tokens``): a prompt whose greedy baseline ends with EOS early gives ``max_tokens`` tokens,
  no EOS before; where none does, 64 samples at temperature 1 of a prompt whose samples end early at least 4 times
  without it must never end early with it (an ignoring server passes with probability (1 - q)^64, q its early-EOS
  rate: a false pass only lets the min-tokens scenarios run, whose law test then rejects the server);
- ``repetition_penalty`` (50), ``frequency_penalty`` (2), ``presence_penalty`` (2): the greedy output changes on at
  least one probe prompt (an ignored penalty leaves every greedy output as it was).

A probe that cannot decide (no prompt where the effect would show) leaves its field undeclared, "could not be
checked". A refusal (an HTTP error) or a server fault on a probe also leaves it undeclared, with the server's message.
Nothing here imports an engine or the certifier.
"""

from __future__ import annotations

from typing import Callable, Sequence

from specverify.params import SamplingParams
from specverify.protocol import Request

__all__ = ["probe_prompts", "honour_check", "PROBED"]

MAX_TOKENS = 4
SAMPLES = 16
PROBED = (
    "temperature",
    "seed",
    "top_k",
    "top_p",
    "min_p",
    "bad_token_ids",
    "stop",
    "min_tokens",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
)
_CUTS = {"top_k": 1, "top_p": 0.01, "min_p": 1.0}
_PENALTIES = {"repetition_penalty": 50.0, "frequency_penalty": 2.0, "presence_penalty": 2.0}


def probe_prompts(vocab) -> list:
    """Short prompts of ordinary tokens (never EOS) of ``vocab``."""
    ordinary = [t for t in range(vocab.size) if t != vocab.eos_token_id][:5]
    singles = [(t,) for t in ordinary]
    pairs = [(a, b) for a, b in zip(ordinary, ordinary[1:] + ordinary[:1])]
    return singles + pairs


def _req(prompt, seed=None, **fields) -> Request:
    return Request(tuple(prompt), SamplingParams(max_tokens=MAX_TOKENS, **fields), 1, seed)


class _Probe:
    """The server behind ``send`` (requests -> token tuples; raises on a fault) seen through probes."""

    def __init__(self, send: Callable, vocab):
        self.send, self.vocab = send, vocab
        self.prompts = probe_prompts(vocab)
        self.greedy = dict(zip(self.prompts, self.send([_req(p, temperature=0.0) for p in self.prompts])))

    def sampled(self, prompt, **fields) -> list:
        return self.send([_req(prompt, seed=1000 + i, temperature=1.0, **fields) for i in range(SAMPLES)])

    def temperature(self) -> str:
        prompt = self.prompts[0]
        again = self.send([_req(prompt, seed=1 + i, temperature=0.0) for i in range(8)])
        if any(t != self.greedy[prompt] for t in again):
            return "greedy requests (temperature 0) with different seeds gave different tokens"
        if len(set(self.sampled(prompt))) == 1:
            return f"{SAMPLES} seeded requests at temperature 1 all gave the same tokens"
        return ""

    def seed(self) -> str:
        prompt = self.prompts[0]
        first = self.sampled(prompt)
        if first != self.sampled(prompt):
            return "the same seeds sent twice gave other tokens"
        return ""

    def cut(self, name: str) -> str:
        prompt = self.prompts[0]
        got = self.sampled(prompt, **{name: _CUTS[name]})
        if any(t != self.greedy[prompt] for t in got):
            return f"{name}={_CUTS[name]!r} at temperature 1 did not keep only the argmax (it is ignored or other)"
        return ""

    def bad_token_ids(self) -> str:
        for prompt, greedy in self.greedy.items():
            first = greedy[0] if greedy else None
            if first is None or first == self.vocab.eos_token_id:
                continue
            got = self.send([_req(prompt, temperature=0.0, bad_token_ids=(first,))])[0]
            if first in got:
                return f"bad_token_ids=({first},) still produced token {first}"
            return ""
        return "could not be checked: no probe prompt's greedy output starts with an ordinary token"

    def stop(self) -> str:
        for prompt, greedy in self.greedy.items():
            text = self.vocab.strings[greedy[0]] if greedy else ""
            if len(greedy) < 2 or not text:
                continue
            got = self.send([_req(prompt, temperature=0.0, stop=(text,))])[0]
            if tuple(got) != tuple(greedy[:1]):
                return f"stop=({text!r},) after {greedy[:1]} gave {got!r}"
            return ""
        return "could not be checked: no probe prompt's greedy output has two tokens"

    def min_tokens(self) -> str:
        eos = self.vocab.eos_token_id

        def early(tokens) -> bool:
            return eos in tuple(tokens)[: MAX_TOKENS - 1]

        for prompt, greedy in self.greedy.items():
            if not early(greedy):
                continue
            got = self.send([_req(prompt, temperature=0.0, min_tokens=MAX_TOKENS)])[0]
            if len(got) != MAX_TOKENS or early(got):
                return f"min_tokens={MAX_TOKENS} gave {got!r} (EOS before {MAX_TOKENS} tokens)"
            return ""
        # no greedy output ends early: sampled at temperature 1, where some do
        for prompt in self.prompts[:3]:
            seeds = range(2000, 2000 + 4 * SAMPLES)
            base = self.send([_req(prompt, seed=s, temperature=1.0) for s in seeds])
            if sum(early(t) for t in base) < 4:
                continue
            got = self.send([_req(prompt, seed=s, temperature=1.0, min_tokens=MAX_TOKENS) for s in seeds])
            bad = [t for t in got if early(t) or len(t) != MAX_TOKENS]
            return f"min_tokens={MAX_TOKENS} still gave {bad[0]!r} (EOS before {MAX_TOKENS} tokens)" if bad else ""
        return "could not be checked: no probe prompt ends with EOS early, greedy or sampled"

    def penalty(self, name: str) -> str:
        changed = self.send([_req(p, temperature=0.0, **{name: _PENALTIES[name]}) for p in self.prompts])
        if all(tuple(c) == tuple(self.greedy[p]) for p, c in zip(self.prompts, changed)):
            return f"{name}={_PENALTIES[name]!r} left every greedy output unchanged (ignored)"
        return ""

    def run(self, name: str) -> str:
        if name in _CUTS:
            return self.cut(name)
        if name in _PENALTIES:
            return self.penalty(name)
        return getattr(self, name)()


def honour_check(send: Callable, vocab, fields: Sequence[str], *, on_fault: Callable = None) -> dict:
    """``{field: reason}`` for each of ``fields`` (among :data:`PROBED`): ``""`` where the server honours it, else
    why not. ``send(requests)`` returns each request's token tuple and raises on a refusal or fault; ``on_fault(exc)``
    (optional) is called after a probe's fault (a managed server restarts there). The greedy baseline's fault
    raises: a server that cannot answer greedy requests cannot be probed."""
    probe = _Probe(send, vocab)
    out = {}
    for name in fields:
        if name not in PROBED:
            continue
        try:
            out[name] = probe.run(name)
        except Exception as exc:  # noqa: BLE001 - a refusal or fault on a probe: not honoured, with the message
            out[name] = f"the server failed the probe: {str(exc)[:400]}"
            if on_fault is not None:
                on_fault(exc)
    return out
