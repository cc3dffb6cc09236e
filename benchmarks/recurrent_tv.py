"""The exact TV of ``recurrent_state_not_rolled_back`` on the ``recurrent`` scenario, by enumeration of its rounds.

    python benchmarks/recurrent_tv.py [--scenario recurrent] [--check 200000]

The entry's law is a chain over rounds whose target rows come from a state that absorbed every verified input,
rejected drafts included; this script walks every round exactly (draft paths, accept/reject at each position, the
recovered or bonus token) from the canonical rows (``next_token_probs``), with the state kept both ways: restored to
the accepted prefix (the exact law, checked against ``exact_law``) and not restored (the entry's law). Draws are
keyed by (seed, position, purpose), so a later round's draft at a position reuses the uniform of the draft an
earlier round rejected there; the rejected draft, fed to the unrestored state, is correlated with that later draft,
and the walk carries the interval each rejected draft revealed of its position's uniform. It prints
both laws' TV to ``exact_law`` and, with ``--check N``, the entry's plug-in TV over N seeded draws beside it.
Nothing here is shared with the decoders but ``next_token_probs``.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from specverify.certification.matrix.scenarios import matrix
from specverify.oracles import exact_law
from specverify.oracles.toy_hash import _ROOT_KV, step_kv
from specverify.sampling import next_token_probs

_STEPS: dict = {}


def _chain(state, tokens):
    for t in tokens:
        key = (state, t)
        if key not in _STEPS:
            _STEPS[key] = int(step_kv(np.array([state], dtype=np.uint64), np.array([t]))[0])
        state = _STEPS[key]
    return state


class Walk:
    """Every round of chain speculative sampling on a recurrent target, the state restored or not."""

    def __init__(self, scenario, restore: bool):
        pair = scenario.models()
        self.target, self.draft, self.params = pair.target, pair.draft, scenario.params
        self.prompt, self.gamma, self.restore = scenario.prompt, scenario.num_draft_tokens, restore
        self.eos, self.vocab = pair.target.vocab.eos_token_id, pair.target.vocab.size
        self._p, self._q = {}, {}

    def p(self, state):  # the target row read from a state
        if state not in self._p:
            logits = self.target.head(np.array([state], dtype=np.uint64))[0]
            self._p[state] = next_token_probs(logits, self.params, prompt=self.prompt, generated=()).numpy()
        return self._p[state]

    def q(self, history):  # the draft row after a history (its KV cache is exact)
        if history not in self._q:
            logits = self.draft.logits([history])[0]
            self._q[history] = next_token_probs(logits, self.params, prompt=self.prompt, generated=()).numpy()
        return self._q[history]

    def done(self, g) -> str | None:
        if g[-1] == self.eos:
            return "eos"
        return "length" if len(g) >= self.params.max_tokens else None

    def law(self) -> dict:
        out: dict = defaultdict(float)
        self.round(out, (), _chain(int(_ROOT_KV), self.prompt[:-1]), self.prompt[-1], {}, 1.0)
        return dict(out)

    def round(self, out, g, state, last, known, mass):
        """``known``: what earlier rounds' rejected drafts revealed of the draft uniform of each position ahead."""
        for drafts, spans, weight in self.draft_paths(g, known):
            self.verify(out, g, state, last, drafts, spans, mass * weight)

    def draft_paths(self, g, known):
        """(drafts, the draft uniform's interval at each of their positions, probability) of this round's drafts:
        the draft at generated position j is the inverse-CDF draw of the uniform keyed by j, which an earlier round
        may have drawn already for a draft it rejected, so the interval it revealed conditions this draw."""
        paths = [((), (), 1.0)]
        for k in range(self.gamma):
            grown = []
            for x, spans, w in paths:
                q = self.q(self.prompt + g + x)
                lo, hi = known.get(len(g) + k, (0.0, 1.0))
                cdf = np.concatenate([[0.0], np.cumsum(q) / q.sum()])
                for t in range(self.vocab):
                    a, b = max(lo, cdf[t]), min(hi, cdf[t + 1])
                    if b > a:
                        grown.append((x + (t,), spans + ((a, b),), w * (b - a) / (hi - lo)))
            paths = grown
        return paths

    def verify(self, out, g, state, last, drafts, spans, mass):
        fed = [last, *drafts]
        states = [_chain(state, fed[: k + 1]) for k in range(self.gamma + 1)]  # after each verified position
        start = len(g)
        for k in range(self.gamma + 1):
            p = self.p(states[k])
            if k == self.gamma:  # every draft accepted: the bonus
                self.emit(out, g, states[k], p, {}, mass)
                return
            x, q = drafts[k], self.q(self.prompt + g)  # g holds the drafts accepted before k
            keep = min(1.0, p[x] / q[x])
            residual = np.clip(p - q, 0, None)
            residual = residual / residual.sum() if residual.sum() > 0 else p
            ahead = {start + j: spans[j] for j in range(k + 1, self.gamma)}  # rejected drafts' uniforms
            self.emit(out, g, states[k] if self.restore else states[-1], residual, ahead, mass * (1 - keep))
            mass *= keep
            g = g + (x,)
            if self.done(g):
                out[(g, self.done(g))] += mass
                return

    def emit(self, out, g, state, probs, known, mass):
        for y in range(self.vocab):
            if probs[y] <= 0 or mass * probs[y] == 0:
                continue
            h = g + (y,)
            reason = self.done(h)
            if reason:
                out[(h, reason)] += mass * probs[y]
            else:
                self.round(out, h, state, y, known, mass * probs[y])


def entry_tv(scenario) -> tuple[float, float]:
    """(TV of the restored walk, TV of the unrestored walk) to ``exact_law`` on ``scenario``."""
    exact = exact_law(scenario.models().target, scenario.prompt, scenario.params)
    return tv(Walk(scenario, True).law(), exact), tv(Walk(scenario, False).law(), exact)


def tv(law: dict, exact) -> float:
    total = sum(abs(law.get(o, 0.0) - p) for o, p in zip(exact.outcomes, exact.probs))
    return 0.5 * (total + sum(m for o, m in law.items() if exact.index(o) < 0))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="recurrent")
    ap.add_argument("--check", type=int, default=0, help="also draw N outcomes from the entry (plug-in TV)")
    args = ap.parse_args(argv)
    scenario = matrix("toy")[args.scenario]
    exact = exact_law(scenario.models().target, scenario.prompt, scenario.params)
    for restore in (True, False):
        start = time.perf_counter()
        law = Walk(scenario, restore).law()
        label = "restored (reference)" if restore else "not restored (recurrent_state_not_rolled_back)"
        print(f"{label}: mass {sum(law.values()):.12f}, TV to exact_law {tv(law, exact):.6f}"
              f" ({time.perf_counter() - start:.1f} s)")  # fmt: skip
    if args.check:
        from specverify.protocol import Request
        from specverify.zoo import ZOO

        pair = scenario.models()
        decoder = ZOO["recurrent_state_not_rolled_back"].factory(pair.target, pair.draft, entropy=0)
        request = Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=1)
        counts = decoder.sample(request, args.check).outcomes
        drawn = {o: c / args.check for o, c in counts.items()}
        print(f"entry, {args.check} draws: plug-in TV to the enumerated entry law {tv(drawn, _as_law(law)):.4f}")


class _as_law:
    def __init__(self, law):
        self.outcomes, self.probs = list(law), np.array(list(law.values()))
        self._index = {o: i for i, o in enumerate(self.outcomes)}

    def index(self, o):
        return self._index.get(o, -1)


if __name__ == "__main__":
    main()
