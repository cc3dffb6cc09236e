"""The exact acceptance law over every round of a request, by enumeration over draft paths (docs/design.md).

For a rule (``chain``: token-wise rejection sampling; ``block``: block verification, Sun et al. 2024; ``tree``: a
tree draft's multi-candidate rule) and a draft family (``drafts.py``), each round start (committed tokens, not
finished) has a finite law over (accepted drafts, tokens committed, drafts verified, next round start or complete
outcome). Chaining these laws gives, exactly and without assuming that acceptance is independent of the prefix:

- the law of the first round's accepted length;
- the expected number of rounds per request with each accepted length (the all-round histogram) and its covariance;
- per draft position, the expected number of times it was verified and accepted;
- the expected tokens and target calls per request, and their ratio, the accepted tokens per target call that a
  measurement over many requests converges to (the seed's a_j = Π c_i is shown beside it as ``product_rule``);
- the outcome law the rule implies, which equals ``exact_law`` exactly when the rule is exact (a test of the rule).

``specverify.metrics`` builds on :func:`acceptance_law`; the certifier shows its first-round law as evidence.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import scipy.stats

from specverify.errors import check
from specverify.oracles.drafts import draft_family
from specverify.oracles.round_rules import RoundContext, block_round, tree_round
from specverify.params import SamplingParams

__all__ = ["RULES", "AcceptanceLaw", "acceptance_law", "first_round_law"]

RULES = ("chain", "block", "tree")


@dataclass(frozen=True)
class AcceptanceLaw:
    """Exact acceptance statistics of one request shape under one rule (all counts are expectations per request).

    Attributes
    ----------
    gamma : int
        Drafts per round (tree depth for trees).
    rule : str
        ``chain``, ``block`` or ``tree``.
    first_round : ndarray [γ+1]
        P(m drafts accepted in the first round).
    rounds_mean, rounds_cov : ndarray [γ+1], [γ+1, γ+1]
        Expected number of rounds with m accepted drafts per request, and the covariance of those counts.
    position_verified, position_accepted : ndarray [γ]
        Expected number of rounds in which draft k was verified (judged by the target) / accepted.
    expected_rounds, expected_tokens : float
        Target calls and generated tokens per request.
    outcome_law : dict
        {(tokens, finish_reason): probability} implied by the rule (``exact_law``'s when the rule is exact).

    Notes
    -----
    The intervals use the normal approximation of a mean of n independent requests; they are valid when n times
    the smallest reported expectation is large (≥ ~20).
    """

    gamma: int
    rule: str
    first_round: np.ndarray
    rounds_mean: np.ndarray
    rounds_cov: np.ndarray
    position_verified: np.ndarray
    position_accepted: np.ndarray
    expected_rounds: float
    expected_tokens: float
    outcome_law: dict
    _mean: np.ndarray
    _cov: np.ndarray

    @property
    def tokens_per_call(self) -> float:
        """Expected tokens over expected target calls (the ratio of sums a long measurement converges to)."""
        return self.expected_tokens / self.expected_rounds

    def acceptance_rates(self) -> np.ndarray:
        """Conditional acceptance rate of each draft position given it was verified (nan where never verified)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.position_verified > 0, self.position_accepted / self.position_verified, np.nan)

    def product_rule(self) -> float:
        """The seed's E[K] = Σ_j a_j with a_j = Π_{i≤j} c_i from the conditional rates: exact only when acceptance
        does not depend on the prefix and requests never finish inside a block (compare ``tokens_per_call``)."""
        rates = np.nan_to_num(self.acceptance_rates(), nan=0.0)
        return float(1.0 + np.cumprod(rates).sum())

    def tokens_per_call_interval(self, n: int, *, alpha: float = 1e-6) -> tuple[float, float]:
        """Two-sided 1-α interval for the tokens-per-call ratio measured over ``n`` requests (delta method)."""
        check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1 (requests measured).")
        g = self.gamma
        mu_t, mu_r = self._mean[g + 1], self._mean[: g + 1].sum()
        grad = np.zeros(self._mean.size)
        grad[g + 1] = 1.0 / mu_r
        grad[: g + 1] = -mu_t / mu_r**2
        half = _z(alpha) * float(np.sqrt(max(grad @ self._cov @ grad, 0.0) / n))
        return self.tokens_per_call - half, self.tokens_per_call + half

    def rounds_pvalue(self, observed: Mapping[int, int], n: int) -> float:
        """Wald χ² p-value of an observed all-round histogram ({accepted: rounds}) summed over ``n`` requests."""
        check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1 (requests measured).")
        bad = [m for m in observed if not 0 <= m <= self.gamma]
        check(not bad, f"observed holds accepted lengths {bad!r} outside [0, {self.gamma}].")
        mean = np.array([observed.get(m, 0) for m in range(self.gamma + 1)], dtype=np.float64) / n
        diff = mean - self.rounds_mean
        support = np.diag(self.rounds_cov) > 1e-15
        if np.any(np.abs(diff[~support]) > 0):
            return 0.0  # a count the rule cannot produce
        cov = self.rounds_cov[np.ix_(support, support)]
        stat = float(n * diff[support] @ np.linalg.pinv(cov, rcond=1e-10) @ diff[support])
        rank = int(np.linalg.matrix_rank(cov, tol=1e-10))
        return float(scipy.stats.chi2.sf(stat, max(rank, 1)))


def _z(alpha: float) -> float:
    check(0 < alpha < 1, f"alpha={alpha!r} must lie in (0, 1).")
    return float(scipy.stats.norm.isf(alpha / 2))


def acceptance_law(
    target: object,
    draft: object,
    prompt: Sequence[int],
    params: SamplingParams,
    num_draft_tokens: int,
    *,
    rule: str | None = None,
    tree: tuple | None = None,
) -> AcceptanceLaw:
    """The exact acceptance law of a request under ``rule`` (default: ``tree`` for tree drafts, else ``chain``).

    ``draft`` is any draft object of ``specverify.oracles.drafts`` (or an AR toy model); ``tree`` overrides a tree
    draft's shape (children per depth, one entry per level: γ = its length).

    Examples
    --------
    >>> from specverify.oracles import draft_near, make_vocab, random_target
    >>> target = random_target(make_vocab(4), seed=0)
    >>> law = acceptance_law(target, draft_near(target, distance=0.5, seed=1), (0,), SamplingParams(max_tokens=3), 2)
    >>> bool(abs(law.first_round.sum() - 1) < 1e-12), bool(law.tokens_per_call > 1)
    (True, True)
    """
    ctx, round_law, rule = _setup(target, draft, prompt, params, num_draft_tokens, rule, tree)
    return _aggregate(ctx, round_law, rule)


def _setup(target, draft, prompt, params, num_draft_tokens, rule, tree) -> tuple:
    check(isinstance(params, SamplingParams), f"params={params!r} must be a SamplingParams.")
    check(
        isinstance(num_draft_tokens, int) and num_draft_tokens >= 1,
        f"num_draft_tokens={num_draft_tokens!r} must be an int >= 1.",
    )
    family = draft_family(draft)
    rule = rule or ("tree" if family == "tree" else "chain")
    check(rule in RULES, f"rule={rule!r} must be one of {RULES!r}.")
    check((rule == "tree") == (family == "tree"), f"rule={rule!r} needs a tree draft iff it is 'tree' (got {family}).")
    prompt = tuple(int(t) for t in prompt)
    target.vocab.check_tokens(prompt, "prompt")
    ctx = RoundContext(target, draft, prompt, params, num_draft_tokens)
    if rule == "tree":
        shape = draft.shape_for(num_draft_tokens, tree)
        ctx.gamma = len(shape)
        round_law = lambda g: tree_round(ctx, g, shape, draft.siblings)  # noqa: E731
    elif rule == "chain":
        round_law = lambda g: tree_round(ctx, g, (1,) * num_draft_tokens, "iid")  # noqa: E731
    else:
        round_law = lambda g: block_round(ctx, g)  # noqa: E731
    return ctx, round_law, rule


def first_round_law(
    target: object,
    draft: object,
    prompt: Sequence[int],
    params: SamplingParams,
    num_draft_tokens: int,
    *,
    rule: str | None = None,
    tree: tuple | None = None,
) -> np.ndarray:
    """P(m drafts accepted in the first round), m = 0..γ: :func:`acceptance_law`'s ``first_round``, computed from
    the first round alone (cheap)."""
    ctx, round_law, _ = _setup(target, draft, prompt, params, num_draft_tokens, rule, tree)
    law = np.zeros(ctx.gamma + 1)
    for (_, m, _, _), prob in round_law(()).items():
        law[m] += prob
    return law


def _z_vector(gamma: int, m: int, tokens: int, verified: int) -> np.ndarray:
    """One round's contribution: one-hot accepted length, tokens committed, positions verified, accepted."""
    z = np.zeros(3 * gamma + 2)
    z[m] = 1.0
    z[gamma + 1] = tokens
    z[gamma + 2 : gamma + 2 + verified] = 1.0
    z[2 * gamma + 2 : 2 * gamma + 2 + m] = 1.0
    return z


def _z_matrix(gamma: int, keys: list) -> np.ndarray:  # T keys (next, m, tokens, verified) -> [T, 3γ+2]
    """:func:`_z_vector` of each transition, as rows."""
    m = np.array([k[1] for k in keys], dtype=np.int64)
    tokens = np.array([k[2] for k in keys], dtype=np.float64)
    verified = np.array([k[3] for k in keys], dtype=np.int64)
    z = np.zeros((len(keys), 3 * gamma + 2))
    z[np.arange(len(keys)), m] = 1.0
    z[:, gamma + 1] = tokens
    positions = np.arange(gamma)
    z[:, gamma + 2 : 2 * gamma + 2] = positions < verified[:, None]
    z[:, 2 * gamma + 2 :] = positions < m[:, None]
    return z


def round_moments(gamma: int, transitions: dict, mean: dict, second: dict) -> tuple[np.ndarray, np.ndarray]:
    """(mean [d], second moment [d, d]) of the rest of a request's vector from a round start whose law is
    ``transitions``, given those of the round starts it leads to (``mean``, ``second``; d = 3γ + 2):
    f = Σ p (z + f'), s = Σ p (z zᵀ + z f'ᵀ + f' zᵀ + s'), over the transitions at once (matrix products: the
    sums in another order than one transition at a time, equal to ~1e-15 relative)."""
    keys = list(transitions)
    prob = np.array(list(transitions.values()), dtype=np.float64)  # [T]
    z = _z_matrix(gamma, keys)  # [T, d]
    ahead = [i for i, k in enumerate(keys) if k[0][0] == "next"]
    f_next = np.zeros_like(z)
    s = np.zeros((z.shape[1], z.shape[1]))
    if ahead:
        f_next[ahead] = [mean[keys[i][0][1]] for i in ahead]
        s += np.tensordot(prob[ahead], np.array([second[keys[i][0][1]] for i in ahead]), axes=1)
    weighted = z * prob[:, None]
    cross = weighted.T @ f_next
    s += weighted.T @ z + cross + cross.T
    return prob @ (z + f_next), s


def _aggregate(ctx: RoundContext, round_law, rule: str) -> AcceptanceLaw:
    gamma = ctx.gamma
    reach = {(): 1.0}
    transitions = {}
    outcomes: dict = defaultdict(float)
    first = np.zeros(gamma + 1)
    by_length = defaultdict(list)
    by_length[0].append(())
    length = 0
    while length in by_length:  # every round commits >= 1 token or ends the request
        for g in by_length.pop(length):
            trans = round_law(g)
            transitions[g] = trans
            for (nxt, m, _, _), prob in trans.items():
                if g == ():
                    first[m] += prob
                if nxt[0] == "done":
                    outcomes[nxt[1]] += reach[g] * prob
                else:
                    if nxt[1] not in reach:
                        by_length[len(nxt[1])].append(nxt[1])
                        reach[nxt[1]] = 0.0
                    reach[nxt[1]] += reach[g] * prob
        length = min(by_length) if by_length else -1
    mean, second = {}, {}
    for g in sorted(transitions, key=len, reverse=True):
        mean[g], second[g] = round_moments(gamma, transitions[g], mean, second)
    mu, cov = mean[()], second[()] - np.outer(mean[()], mean[()])
    return law_from_moments(gamma, rule, first, mu, cov, dict(outcomes))


def law_from_moments(gamma: int, rule: str, first, mu, cov, outcome_law: dict) -> AcceptanceLaw:
    """An ``AcceptanceLaw`` from the first round's law and the mean ``mu`` / covariance ``cov`` of the per-request
    vector (accepted-length histogram [γ+1], tokens, positions verified [γ], positions accepted [γ])."""
    rounds = slice(0, gamma + 1)
    return AcceptanceLaw(
        gamma=gamma,
        rule=rule,
        first_round=first,
        rounds_mean=mu[rounds],
        rounds_cov=cov[rounds, rounds],
        position_verified=mu[gamma + 2 : 2 * gamma + 2],
        position_accepted=mu[2 * gamma + 2 :],
        expected_rounds=float(mu[rounds].sum()),
        expected_tokens=float(mu[gamma + 1]),
        outcome_law=outcome_law,
        _mean=mu,
        _cov=cov,
    )
