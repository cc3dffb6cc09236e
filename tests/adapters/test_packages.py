"""Every engine adapter is one package under ``specverify.adapters`` beside the boundary they share (docs/design.md,
"Engine adapters and findings"): importing one loads no engine (the CLI resolves ``module:attr`` before any heavy
work), and every factory path that the README, docs, stored certificates, benchmarks, CI scripts and examples name as
``specverify.adapters.<engine>:<factory>`` resolves to the factory, which names itself by that path."""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = (
    "specverify.adapters.vllm",
    "specverify.adapters.llamacpp",
    "specverify.adapters.transformers",
    "specverify.adapters.onnxruntime_genai",
    "specverify.adapters.openvino",
    "specverify.adapters.server",
    "specverify.adapters.boundary",
)
HEAVY = ("vllm", "llama_cpp", "gguf", "transformers", "torch", "triton", "hypothesis", "onnxruntime_genai", "openvino")
SOURCES = ("README.md", "docs", "benchmarks", ".ci", "examples")  # docs holds the certificates (their "factory")
FACTORY_PATH = re.compile(r"specverify\.adapters\.[\w.]+:[A-Za-z_]\w*")


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_an_adapter_package_loads_no_engine(package):
    code = f"import sys, {package}; print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"importing {package} loaded {out.stdout.strip()}"


@pytest.mark.parametrize("package", PACKAGES[:-1])
def test_each_engine_package_exports_what_its_all_lists(package):
    module = importlib.import_module(package)
    assert module.__all__ and [n for n in module.__all__ if not hasattr(module, n)] == []
    assert not [n for n in module.__all__ if n.startswith("_")]  # private names stay in the module they live in


def _named_paths() -> dict:
    """``{module:attr: the first file naming it}`` over SOURCES; placeholders (``:NAME``, ``:FACTORY``) left out."""
    named = {}
    for source in SOURCES:
        top = ROOT / source
        for path in [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()):
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):  # images, binaries
                continue
            for found in FACTORY_PATH.findall(text):
                if not found.rpartition(":")[2].isupper():
                    named.setdefault(found, str(path.relative_to(ROOT)))
    return named


def test_every_factory_path_named_in_docs_and_scripts_resolves():
    named = _named_paths()
    assert "specverify.adapters.vllm:draft_model" in named and "specverify.adapters.transformers:assisted" in named
    broken = []
    for path, where in sorted(named.items()):
        module, attr = path.split(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            broken.append(f"{path} (named in {where}): {exc!r}")
            continue
        own = f"{factory.__module__}:{factory.__qualname__}"  # how a certificate names the callable itself
        if not callable(factory) or own != path:
            broken.append(f"{path} (named in {where}): {factory!r} names itself {own}")
    assert not broken, "\n".join(broken)
