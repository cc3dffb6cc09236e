"""A factory module whose import raises (a missing engine dependency): a set-up failure, verdict error."""

raise RuntimeError("engine library is not configured")


def factory(target, draft):  # pragma: no cover - never reached
    return None
