"""llama-server's streamed deltas against its own non-streamed response, through the streaming harness's comparison
(``specverify.fuzz.streaming.recorded_run`` / ``check_runs``). Black-box: the server cuts the deltas itself, so the
chunking is not chosen; speculation (γ 1, γ 4, no draft) and the seeds vary what it commits per round. Runs in the
llama.cpp venv of .ci/llamacpp (docs/findings/streaming.md, section llama.cpp):

    SPECVERIFY_LLAMACPP_BIN=<build>/bin LLAMA_CPP_LIB_PATH=<build>/bin OMP_NUM_THREADS=1 \\
        .venv-llama/bin/python -m pytest tests/adapters/llamacpp/test_streaming_engine.py -q

The property, per seeded request (``stream: true`` against ``stream: false`` on the same server): the events'
``content`` concatenates to the response's ``content``, their ``tokens`` to its ``tokens``, and the final event's
``stop_type`` / ``stopping_word`` are the response's; a stop string spanning several events is cut as without
streaming, and nothing past it is streamed. It holds except for finding L1 (a request that ends by ``n_predict``
while its text ends in the beginning of a stop string streams less text), which the same test pins exactly.
"""

import http.client
import importlib.util
import json
import os

import pytest

from specverify.adapters.llamacpp.common import BIN_ENV

HAVE_GGUF = importlib.util.find_spec("gguf") is not None
HAVE_SERVER = bool(os.environ.get(BIN_ENV)) and os.access(os.path.join(os.environ[BIN_ENV], "llama-server"), os.X_OK)
needs_server = pytest.mark.skipif(
    not (HAVE_GGUF and HAVE_SERVER),
    reason=f"llama-server not found (or gguf not installed): set {BIN_ENV} to llama.cpp's bin directory, "
    "in the venv .ci/llamacpp builds",
)
SERVERS = {"plain": None, "gamma1": 1, "gamma4": 4}  # None: no draft model (no speculation)
ALPHABET = "ab "  # the toy vocabulary's text: 'a', 'b', 'ab', ' ', 'ba', EOS ''


# ------------------------------------------------------------------------------------------------ engine


@pytest.fixture(scope="module")
def pair():
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    return CHECKPOINT_PAIRS["main"].build()


def _start(target, draft, gamma):
    """One llama-server as the llama.cpp factories start it (``launch_template``, 4 slots), through the server
    adapter's managed process; ``draft`` None: no draft model."""
    import shlex

    from specverify.adapters.llamacpp.server import launch_template
    from specverify.adapters.server.client import Client
    from specverify.adapters.server.process import ManagedServer, free_port

    port = free_port()
    values = {"target_gguf": target, "draft_gguf": draft or "", "gamma": gamma, "host": "127.0.0.1", "port": port}
    line = launch_template(4, draft is not None).format(**{k: shlex.quote(str(v)) for k, v in values.items()})
    server = ManagedServer(shlex.split(line), port)
    try:
        Client(server.url).wait_ready("/health", timeout_s=60.0, alive=server.dead)
    except BaseException:
        server.close()
        raise
    return server


@pytest.fixture(scope="module")
def servers(pair):
    from specverify.adapters.boundary.gguf_export import gguf_file

    target, draft = str(gguf_file(pair.target, "toy")), str(gguf_file(pair.draft, "toy"))
    live = {}
    try:
        for name, gamma in SERVERS.items():
            live[name] = _start(target, None if gamma is None else draft, gamma or 1)
        yield live
    finally:
        for server in live.values():
            server.close()


def _body(pair, prompt, params, seed):
    from specverify.adapters.server.dialects import DIALECTS
    from specverify.protocol import Request

    request = Request(tuple(prompt), params, 1, seed=seed)
    body = DIALECTS["llamacpp"].body(request, {"vocab_size": pair.target.vocab.size, "rng": None})
    body["seed"] = seed  # the grid's seeds as they are (the factories hash a request's seed: llamacpp_seed)
    body["cache_prompt"] = False  # every request evaluates its prompt afresh: the two answers are comparable
    return body


def _post(server, body, path="/completion"):
    """The raw answer on a connection of its own (the server closes a streamed response's connection)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    assert response.status == 200, (response.status, raw[:500], body)
    return raw.decode()


def _events(raw):
    """The SSE events of a streamed answer, in order (``data: {...}`` blocks; the OpenAI endpoints end with
    ``data: [DONE]``, kept as the string ``"[DONE]"``)."""
    blocks = [b for b in raw.split("\n\n") if b.strip()]
    assert all(b.startswith("data: ") for b in blocks), blocks
    return [b[len("data: ") :] if b == "data: [DONE]" else json.loads(b[len("data: ") :]) for b in blocks]


def _ask(server, body):
    """(non-streamed response, streamed events) for the same request."""
    response = json.loads(_post(server, dict(body, stream=False)))
    return response, _events(_post(server, dict(body, stream=True)))


def _runs(response, events):
    """Both answers as harness runs: the response one delta, the events one delta each; result = the tokens, the
    stop type and the stopping word (from the final event)."""
    from specverify.fuzz.streaming import recorded_run

    final = events[-1]
    tokens = tuple(t for e in events for t in e["tokens"])
    streamed = recorded_run(
        [(e["tokens"], e["content"]) for e in events], (tokens, final["stop_type"], final["stopping_word"])
    )
    whole = recorded_run(
        [(response["tokens"], response["content"])],
        (tuple(response["tokens"]), response["stop_type"], response["stopping_word"]),
    )
    return whole, streamed


def _cut_text(strings, tokens, stops):
    """The canonical text (DESIGN.md): the tokens' strings, cut at the earliest start of any stop string."""
    text = "".join(strings[t] for t in tokens)
    starts = [text.find(s) for s in stops if s in text]
    return text[: min(starts)] if starts else text


def _is_partial_stop(window, stops):
    return any(window.endswith(s[:n]) for s in stops for n in range(1, len(s)))


def _server_streamed_text(strings, eos, tokens, stops):
    """What llama-server streams for ``tokens`` (finding L1's mechanism, server-context.cpp:1826-1859): after each
    token, a stop string in the unsent text ends it (the text before the stop is sent); else, unless the token is
    EOS, unsent text ending in a stop string's beginning is held back; else all unsent text is sent. Nothing sends
    held text when ``n_predict`` ends the request."""
    text, sent = "", 0
    for token in tokens:
        text += strings[token]
        window = text[sent:]
        starts = [window.find(s) for s in stops if s in window]
        if starts:
            return text[: sent + min(starts)]
        if token != eos and _is_partial_stop(window, stops):
            continue
        sent = len(text)
    return text[:sent]


def _reproduce(name, body):
    keep = ("prompt", "n_predict", "temperature", "seed", "stop")
    return (
        f"llama-server '{name}' (tests/adapters/llamacpp/test_streaming_engine.py's servers fixture): POST /completion "
        f"{json.dumps({k: body[k] for k in keep})} with stream false and true (all fields: the llamacpp dialect's body)"
    )


def _check_one(pair, server, name, prompt, params, seed):
    """Assert the property for one request; return whether it was finding L1's case (less text streamed)."""
    from specverify.fuzz.streaming import check_runs
    from specverify.oracles.law import first_finish

    vocab = pair.target.vocab
    body = _body(pair, prompt, params, seed)
    response, events = _ask(server, body)
    whole, streamed = _runs(response, events)
    assert all(len(e["tokens"]) == 1 and not e["stop"] for e in events[:-1]), (_reproduce(name, body), events)
    assert events[-1]["stop"] and events[-1]["tokens"] == [] and events[-1]["content"] == "", events[-1]
    tokens = tuple(response["tokens"])
    assert response["content"] == _cut_text(vocab.strings, tokens, params.stop), (_reproduce(name, body), response)
    end = first_finish(vocab, tokens, params)  # nothing past the first end, and the stop type is that end's
    assert end is not None and end[0] == len(tokens) - 1, (_reproduce(name, body), tokens, end)
    assert response["stop_type"] == {"eos": "eos", "stop": "word", "length": "limit"}[end[1]], (response, end)
    predicted = _server_streamed_text(vocab.strings, vocab.eos_token_id, tokens, params.stop)
    if predicted == response["content"]:
        check_runs(whole, streamed, reproduce=_reproduce(name, body))
        return False
    # finding L1: everything but the text agrees; the text is what the mechanism predicts, a proper prefix
    assert response["stop_type"] == "limit" and streamed.result == whole.result, (_reproduce(name, body), events)
    assert streamed.text.get("text", "") == predicted, (_reproduce(name, body), streamed.text, predicted)
    return True


STOPS = [("ab a",), ("abab", "b b"), ("a a a",), ("bab",), ("  ab", "ba b"), ("aaaa", "bbbb")]


@needs_server
@pytest.mark.parametrize("name", list(SERVERS))
def test_streamed_events_concatenate_to_the_response_except_finding_l1(pair, servers, name):
    """A seeded grid per server: stop strings of 3-5 characters (longer than most rounds' text: 1-2 tokens of 1-2
    characters commit per γ 1 round), max_tokens 2-12, temperatures 1 and 0.7, four prompts."""
    from specverify.params import SamplingParams

    prompts, found, cases = [(0, 1), (3,), (1, 4, 2), (2, 2)], 0, 0
    for i, stop in enumerate(STOPS):
        for max_tokens in (2, 5, 12):
            for temperature in (1.0, 0.7):
                params = SamplingParams(temperature=temperature, max_tokens=max_tokens, stop=stop)
                for seed in range(6):
                    prompt = prompts[(seed + i) % len(prompts)]
                    found += _check_one(pair, servers[name], name, prompt, params, 1000 * i + seed)
                    cases += 1
    assert 0 < found < cases, (found, cases)  # L1 is reached, and most requests are compared in full


def _fuzz_settings():
    from hypothesis import HealthCheck, settings

    return settings(
        max_examples=150, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


@needs_server
def test_fuzzed_requests_stream_what_the_response_holds_except_finding_l1(pair, servers):
    """Hypothesis draws the server, prompt, temperature, max_tokens, seed and one or two stop strings over the toy
    text (2-6 characters); a failure shrinks to a small request and prints its reproducer."""
    from hypothesis import given
    from hypothesis import strategies as st

    from specverify.params import SamplingParams

    stop = st.text(ALPHABET, min_size=2, max_size=6)

    @_fuzz_settings()
    @given(
        name=st.sampled_from(list(SERVERS)),
        prompt=st.lists(st.integers(0, pair.target.vocab.size - 2), min_size=1, max_size=4),
        temperature=st.sampled_from([1.0, 0.7, 0.0]),
        max_tokens=st.integers(1, 12),
        stops=st.lists(stop, min_size=1, max_size=2, unique=True),
        seed=st.integers(0, 2**31 - 1),
    )
    def run(name, prompt, temperature, max_tokens, stops, seed):
        params = SamplingParams(temperature=temperature, max_tokens=max_tokens, stop=tuple(stops))
        _check_one(pair, servers[name], name, prompt, params, seed)

    run()


@needs_server
@pytest.mark.parametrize("name", ["gamma1", "gamma4"])
def test_speculation_happened_and_events_stay_one_token_each(pair, servers, name):
    """The rounds commit several tokens (drafts accepted) and the server still sends one event per token
    (send_partial_response: ``res->tokens.assign(1, tkn.tok)``, server-context.cpp:2043-2044), so a round's tokens
    reach the client as separate deltas. A server that batched them would fail the one-token assertion in
    ``_check_one``; one that stopped speculating fails here."""
    from specverify.params import SamplingParams

    params = SamplingParams(temperature=1.0, max_tokens=12, stop=("abab",))
    accepted = 0
    for seed in range(10):
        body = _body(pair, (0, 1), params, seed)
        response, events = _ask(servers[name], body)
        accepted += int(events[-1]["timings"].get("draft_n_accepted", 0) or 0)
        assert events[-1]["timings"].get("draft_n_accepted") == response["timings"].get("draft_n_accepted")
    assert accepted > 0, accepted


@needs_server
def test_a_stop_string_across_events_is_cut_as_without_streaming(pair, servers):
    """A stop string of 4 characters completed by a later token than the one it starts in: the events before it
    hold its beginning back, the event of the completing token sends the text before the stop, nothing after."""
    from specverify.params import SamplingParams

    hits = 0
    for seed in range(40):
        params = SamplingParams(temperature=1.0, max_tokens=12, stop=("abab",))
        body = _body(pair, (0, 1), params, seed)
        response, events = _ask(servers["gamma4"], body)
        if response["stop_type"] != "word":
            continue
        text = "".join(pair.target.vocab.strings[t] for t in response["tokens"])
        start = text.find("abab")
        last = len(text) - len(pair.target.vocab.strings[response["tokens"][-1]])
        if start >= last:  # the stop string lies inside the last token: not across events
            continue
        hits += 1
        assert "".join(e["content"] for e in events) == response["content"] == text[:start], (seed, events)
        assert [t for e in events for t in e["tokens"]] == response["tokens"], (seed, events)
    assert hits >= 3, hits


@needs_server
def test_finding_l1_text_held_for_a_stop_string_is_lost_when_n_predict_ends_the_stream(pair, servers):
    """FINDING L1 (minimal): greedy, one token, a stop string that the token's text begins. Without streaming the
    content is that text; streamed, the token's event holds it back (a stop string may follow) and the final event
    carries no text, so the client never gets it. Same with and without speculation. If a llama.cpp upgrade
    flushes held text at the limit, this fails: that is the notice (and the grid test's L1 branch goes unused)."""
    from specverify.params import SamplingParams

    vocab = pair.target.vocab
    for name in SERVERS:
        body = _body(pair, (0, 1), SamplingParams(temperature=0.0, max_tokens=1), 0)
        first = json.loads(_post(servers[name], dict(body, stream=False)))["tokens"][0]
        stop = vocab.strings[first] + "!"  # begins with the token's text, never completed (no '!' in the vocabulary)
        body = _body(pair, (0, 1), SamplingParams(temperature=0.0, max_tokens=1, stop=(stop,)), 0)
        response, events = _ask(servers[name], body)
        assert response["content"] == vocab.strings[first] and response["stop_type"] == "limit", response
        assert [e["content"] for e in events] == ["", ""] and events[-1]["stop_type"] == "limit", events
        assert [t for e in events for t in e["tokens"]] == response["tokens"] == [first], events
    # the OpenAI-compatible endpoint goes through the same process_token: the same text is lost there (the
    # last server's stop string; greedy gives every server the same first token)
    oai = {"prompt": [0, 1], "max_tokens": 1, "temperature": 0.0, "stop": [stop], "seed": 0, "cache_prompt": False}
    whole = json.loads(_post(servers["plain"], dict(oai, stream=False), path="/v1/completions"))["choices"][0]
    chunks = list(_events(_post(servers["plain"], dict(oai, stream=True), path="/v1/completions")))
    assert whole["text"] == vocab.strings[first] and whole["finish_reason"] == "length", whole
    assert chunks[-1] == "[DONE]" and "".join(e["choices"][0]["text"] for e in chunks[:-1]) == "", chunks
