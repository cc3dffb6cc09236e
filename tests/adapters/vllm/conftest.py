"""The vLLM adapter's tests: the ``*_engine.py`` modules need vLLM (they skip without it; .ci/vllm runs them), every
other module runs anywhere, the main suite included."""

import pytest


@pytest.fixture
def vllm_0_32_on_cpu(monkeypatch):
    """The workaround checks ask the installed vLLM its version and whether Triton is present: answered as vLLM 0.32.0
    on CPU (the version the workarounds were read for), so the option checks run without vLLM."""
    from specverify.adapters.vllm import patches

    monkeypatch.setattr(patches, "vllm_version", lambda: patches.PATCHED_VERSION)
    monkeypatch.setattr(patches, "has_triton", lambda: False)
