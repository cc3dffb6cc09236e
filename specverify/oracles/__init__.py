"""Toy models with exactly known laws, and the exact law of complete outputs by enumeration."""

from specverify.oracles.law import ExactLaw, exact_law, first_finish, greedy_outcome, visible_text
from specverify.oracles.models import (BatchCache, ToyCache, ToyModel, Vocab, draft_copy, draft_near, make_vocab,
                                       random_target)

__all__ = ["ExactLaw", "exact_law", "greedy_outcome", "first_finish", "visible_text", "Vocab", "make_vocab",
           "ToyModel", "ToyCache", "BatchCache", "random_target", "draft_near", "draft_copy"]
