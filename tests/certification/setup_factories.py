"""Factories that fail at set-up, one way each (importable, so the worker process can load them)."""

import os


def returns_a_string(target, draft):
    return "not a decoder"


def dies_inside(target, draft):
    os._exit(7)  # the worker process ends inside the factory: nothing was made, so nothing can be certified


def bad_prefill(target, draft):
    from specverify.reference import make_decoder

    decoder = make_decoder(target, draft)
    decoder.prefill_tokens = -1
    return decoder
