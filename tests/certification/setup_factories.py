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


def described(target, draft):
    """The reference, describing an engine whose effective configuration is known once it has run."""
    from specverify.reference import make_decoder

    decoder = make_decoder(target, draft)
    decoder.engine_info = {"name": "toy-engine", "version": "1.0", "requested": {"mode": "fast"}}
    inner = decoder.__call__

    class Described(type(decoder)):
        def __call__(self, requests):
            self.engine_info = {**self.engine_info, "effective": {"mode": "safe"}}
            return inner(requests)

    decoder.__class__ = Described
    return decoder


def bad_engine_info(target, draft):
    from specverify.reference import make_decoder

    decoder = make_decoder(target, draft)
    decoder.engine_info = {"version": 2}  # no name, not a string
    return decoder
