"""The server adapter on a stand-in HTTP server (``standin``): faults mapped to ``invalid`` with a ``curl`` line,
the retry rule, timeouts, a parameter the server ignores caught by the honour check, the API key kept out of every
record, and a correct server certified. No engine."""

import json
import os
import time

import pytest

from specverify.adapters.server import DIALECTS, ServerDecoder, ServerFault, ServerUnavailable
from specverify.adapters.server.client import Client, Post, curl_line, host_of
from specverify.adapters.server.metrics import spec_counters
from specverify.adapters.server.process import redact, template_fields
from specverify.errors import InvalidArgument, ProtocolViolation
from specverify.oracles.pairs import ToyPairSpec
from specverify.params import SamplingParams
from specverify.protocol import Request
from tests.adapters.server.standin import StandIn

OPENAI = DIALECTS["openai"]


@pytest.fixture(scope="module")
def pair():
    return ToyPairSpec(vocab_size=6).build()


@pytest.fixture
def standin(pair):
    servers = []

    def make(**kwargs):
        server = StandIn(pair.target, pair.draft, **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def _decoder(pair, server, **options):
    return ServerDecoder(pair.target, pair.draft, dialect=OPENAI, method="test", url=server.url, **options)


def _requests(n, seed=None, **fields):
    return [Request((0, 1), SamplingParams(max_tokens=4, **fields), 3, None if seed is None else seed + i)
            for i in range(n)]  # fmt: skip


def test_correct_server_declares_what_it_honours_and_answers_in_order(pair, standin):
    server = standin()
    decoder = _decoder(pair, server)
    assert {"temperature", "top_k", "top_p", "min_p", "seed", "bad_token_ids", "stop", "batch"} <= decoder.capabilities
    requests = _requests(12, seed=100)
    out = decoder(requests)
    again = decoder(requests)
    assert [c.tokens for c in out] == [c.tokens for c in again]  # seeded: the same draws, in request order
    assert all(c.finish_reason in ("eos", "length") for c in out)
    info = decoder.engine_info
    assert info["requested"]["seed_probe"] == "reproducible"
    assert info["version"] == "stand-in 1.0" and info["requested"]["mode"] == "attached"
    assert info["requested"]["host"] == server.url.removeprefix("http://")
    assert info["state"]["requests"] == 24
    metrics = decoder.reported_metrics()
    assert metrics.num_draft_tokens == 3 * metrics.num_drafts > 0


def test_ignored_fields_are_caught_and_not_declared(pair, standin):
    """One stand-in that drops four fields (one honour check, ~1 s here): each is caught, the others declared."""
    ignored = ("top_k", "min_tokens", "bad_token_ids", "stop")
    decoder = _decoder(pair, standin(fault="ignore-" + ",".join(ignored)))
    assert not set(ignored) & decoder.capabilities
    assert {"temperature", "top_p", "min_p"} <= decoder.capabilities
    not_covered = decoder.engine_info["requested"]["not_covered"]
    assert "did not keep only the argmax" in not_covered["top_k"]
    assert all(not_covered[field] for field in ignored)
    with pytest.raises(InvalidArgument, match="top_k"):
        decoder(_requests(1, top_k=2))


def test_5xx_is_invalid_naming_the_request_and_a_curl_line(standin):
    server = standin(fault="5xx")
    client = Client(server.url)
    with pytest.raises(ServerFault, match=r"HTTP 500.*out of memory.*Reproduce: curl -sS -X POST") as info:
        client.post(Post("/v1/completions", {"prompt": [0, 1], "max_tokens": 4}, seeded=True))
    assert isinstance(info.value, ProtocolViolation)  # the certifier's invalid
    assert '"prompt": [0, 1]' in str(info.value)


def test_malformed_json_is_invalid(pair, standin):
    server = standin()
    decoder = _decoder(pair, server, honour=False)
    server.fault = "malformed"
    with pytest.raises(ServerFault, match=r"not JSON.*Reproduce: curl"):
        decoder(_requests(2, seed=1))


def test_dropped_connection_retried_for_seeded_requests_only(pair, standin):
    server = standin(fault="drop-once")
    client = Client(server.url, retries=2)
    answer = client.post(Post("/v1/completions", {"prompt": [0], "max_tokens": 2, "seed": 5}, seeded=True))
    assert answer["choices"][0]["token_ids"] and client.retried == 1 and client.discarded == 0
    server = standin(fault="drop-once")
    client = Client(server.url, retries=2)
    with pytest.raises(ServerFault, match="before any response.*unseeded: never retried"):
        client.post(Post("/v1/completions", {"prompt": [0], "max_tokens": 2}, seeded=False))
    assert client.retried == 0 and client.discarded == 1


def test_always_dropping_server_fails_after_the_retries(standin):
    server = standin(fault="drop")
    client = Client(server.url, retries=2)
    with pytest.raises(ServerFault, match="connection failed before any response"):
        client.post(Post("/v1/completions", {"prompt": [0], "max_tokens": 2, "seed": 1}, seeded=True))
    assert client.retried == 2 and server.completions == 3


def test_slow_server_times_out_and_a_patient_client_waits(standin):
    server = standin(fault="slow", delay_s=0.6)
    with pytest.raises(ServerFault, match=r"no answer within timeout_s=0.2 s"):
        Client(server.url, timeout_s=0.2).post(Post("/v1/completions", {"prompt": [0], "max_tokens": 2}, seeded=True))
    answer = Client(server.url, timeout_s=5).post(Post("/v1/completions", {"prompt": [0], "max_tokens": 2},
                                                       seeded=True))  # fmt: skip
    assert answer["choices"][0]["token_ids"]


def test_requests_in_flight_are_bounded(standin):
    server = standin(fault="slow", delay_s=0.15)
    client = Client(server.url, max_in_flight=3, timeout_s=10)
    posts = [Post("/v1/completions", {"prompt": [0], "max_tokens": 2, "seed": i}, seeded=True) for i in range(6)]
    started = time.perf_counter()
    answers = client.post_many(posts)
    elapsed = time.perf_counter() - started
    assert len(answers) == 6 and [b["seed"] for b in server.bodies] != []
    assert elapsed >= 2 * 0.15  # 6 requests, 3 at a time: two waves at least
    assert sorted(b["seed"] for b in server.bodies) == list(range(6))


def test_dead_server_is_invalid_and_an_unreachable_one_cannot_set_up(pair, standin):
    server = standin(fault="die-after", die_after=10**6)
    decoder = _decoder(pair, server, honour=False, timeout_s=2.0, retries=1)
    server.die_after = 0
    with pytest.raises(ServerFault):
        decoder(_requests(3, seed=1))
    with pytest.raises(ServerUnavailable, match="did not answer GET /health"):
        Client("http://127.0.0.1:9").wait_ready("/health", timeout_s=0.5)


def test_api_key_from_the_environment_never_in_a_record(pair, standin, monkeypatch):
    secret = "sk-test-5ecret-value"
    monkeypatch.setenv("SPECVERIFY_TEST_KEY", secret)
    server = standin()
    decoder = _decoder(pair, server, api_key_env="SPECVERIFY_TEST_KEY", honour=False)
    decoder(_requests(2, seed=3))
    assert server.headers[-1]["Authorization"] == f"Bearer {secret}"  # sent to the server
    records = json.dumps(decoder.engine_info) + repr(decoder.servers[0].client)
    server.fault = "5xx"
    with pytest.raises(ServerFault) as info:
        decoder(_requests(1, seed=3))
    message = str(info.value)
    assert "$SPECVERIFY_TEST_KEY" in message
    assert secret not in records and secret not in message
    with pytest.raises(InvalidArgument, match="credentials"):
        Client("http://user:pw@127.0.0.1:1")
    monkeypatch.delenv("SPECVERIFY_TEST_KEY")
    with pytest.raises(InvalidArgument, match="not set"):
        Client(server.url, api_key_env="SPECVERIFY_TEST_KEY")


def test_launch_line_redacted_and_template_checked():
    assert redact(["srv", "--api-key", "k1", "--token=t2", "--port", "8"], secrets=("s3",)) == (
        "srv --api-key *** --token=*** --port 8"
    )
    assert redact(["srv", "--x", "has-s3-inside"], secrets=("s3",)) == "srv --x has-***-inside"
    assert template_fields("serve {target} --port {port} -n {gamma}") == {"target", "port", "gamma"}
    with pytest.raises(InvalidArgument, match="port"):
        template_fields("serve {target}")
    with pytest.raises(InvalidArgument, match="placeholders"):
        template_fields("serve {target} --port {port} {weights}")


def test_host_only_and_curl_line():
    assert host_of("https://gpu-7.example:8000/v1?x=1") == "gpu-7.example:8000"
    line = curl_line("http://h:1", "/generate", {"a": "it's"}, "KEY")
    assert line.startswith("curl -sS -X POST http://h:1/generate") and '"Authorization: Bearer $KEY"' in line


def test_prometheus_spec_counters_summed_over_labels():
    text = (
        'vllm:spec_decode_num_drafts_total{engine="0"} 4\nvllm:spec_decode_num_drafts_total{engine="1"} 1\n'
        'vllm:spec_decode_num_drafts_created{engine="0"} 1.7e9\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 2\n'
        "vllm:other_total 9\n"
    )
    assert spec_counters(text) == {"num_drafts": 5.0, "num_accepted_tokens_per_pos": [0.0, 2.0]}


def test_dialect_bodies_map_only_set_fields(pair):
    request = Request((0, 1), SamplingParams(max_tokens=3, top_k=2, bad_token_ids=(4,)), 3, 7)
    ctx = {"model": "m", "vocab_size": 6, "strings": tuple(pair.target.vocab.strings), "rng": None}
    body = OPENAI.body(request, ctx)
    assert body["top_k"] == 2 and "temperature" not in body and body["seed"] == 7
    assert body["allowed_token_ids"] == [0, 1, 2, 3, 5] and body["return_token_ids"] is True
    sglang = DIALECTS["sglang"].body(request, ctx)
    assert sglang["input_ids"] == [0, 1] and sglang["sampling_params"]["max_new_tokens"] == 3
    tgi = DIALECTS["tgi"].body(request, ctx)
    assert tgi["parameters"]["details"] is True and tgi["parameters"]["top_k"] == 2
    parsed = OPENAI.parse(
        {"choices": [{"logprobs": {"tokens": ["token_id:3", "token_id:5"]}, "finish_reason": "stop"}]}
    )
    assert parsed[0].tokens == (3, 5)
    with pytest.raises(ValueError):
        OPENAI.parse({"choices": [{"text": "ab"}]})


def test_correct_server_certifies_exact(pair, standin):
    """The reference decoder behind HTTP: the core scenarios at quick level, in process. Unseeded (declare_seed
    False) and packed with ``n`` (parallel_n): one HTTP request per seeded draw would take ~80 s here. No honour
    probes (the tests above check them; ~1 s here)."""
    from specverify import certify

    made = []

    def factory(target, draft):
        server = StandIn(target, draft)
        made.append(server)
        decoder = ServerDecoder(target, draft, dialect=OPENAI, method="standin", url=server.url, max_in_flight=4,
                                parallel_n=True, declare_seed=False, honour=False)  # fmt: skip
        close = decoder.close

        def closing():
            close()
            server.close()

        decoder.close = closing
        return decoder

    cert = certify(factory, level="quick", seed=3, isolation="none",
                   scenarios=["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy"])  # fmt: skip
    assert cert.verdict == "exact", cert.verdict
    assert cert.engine["requested"]["dialect"] == "openai" and cert.engine["requested"]["parallel_n"]
    assert sum(len(s.bodies) for s in made) < 5000  # packed: far fewer requests than draws


def test_streamed_answers_equal_whole_ones_and_a_repeated_or_lost_delta_is_caught(pair, standin):
    pytest.importorskip("hypothesis", reason="fuzz.streaming needs hypothesis")
    from specverify.fuzz.properties import PropertyFailure
    from specverify.testing.servers import check_server_streaming

    server = standin()
    decoder = _decoder(pair, server, stream=True)  # the seed probe says whether seeded answers can be compared
    assert "stream" in decoder.capabilities
    stops = [Request((p,), SamplingParams(max_tokens=4, temperature=0.0, stop=("ba",)), 3) for p in range(5)]
    seeded = _requests(4, seed=20)
    assert check_server_streaming(decoder, stops + seeded) == 9
    out = decoder(seeded)  # a streamed call: the chunks as the server cut them, concatenating to the tokens
    assert all(c.stream and sum(c.stream, ()) == c.tokens for c in out)
    for fault in ("stream-repeat", "stream-lose"):
        server.fault = fault
        with pytest.raises(PropertyFailure, match=r"(?s)streaming.*Reproduce: curl"):
            check_server_streaming(decoder, seeded)
    with pytest.raises(InvalidArgument, match="one draw"):
        check_server_streaming(decoder, _requests(1))


def test_vllm_workaround_environment_binds_or_stops_the_process(tmp_path):
    import subprocess
    import sys

    from specverify.adapters.server.factories import workaround_env

    assert workaround_env(None) == {}
    env = workaround_env("expand-kernel")
    assert env["SPECVERIFY_VLLM_WORKAROUND"] == '["expand-kernel"]' and "vllm_site" in env["PYTHONPATH"]
    with pytest.raises(InvalidArgument, match="process-global"):
        workaround_env("stop-metrics")
    try:
        import vllm  # noqa: F401
    except ImportError:  # without vLLM the binding fails: the process must stop, never run without it
        done = subprocess.run([sys.executable, "-c", "print('ran')"], env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 3 and "ran" not in done.stdout
        assert "cannot bind the vLLM workaround" in done.stderr


def test_a_connection_the_server_closed_while_idle_is_not_reused(standin, monkeypatch):
    """uvicorn closes kept-alive connections idle for 5 s; a request on such a connection fails before any response,
    which the retry rule may not resend when unseeded: the client opens a fresh connection after IDLE_S instead."""
    from specverify.adapters.server import client as client_module

    monkeypatch.setattr(client_module, "IDLE_S", 0.2)
    server = standin(idle_close_s=0.3)
    client = Client(server.url, retries=0)
    post = Post("/v1/completions", {"prompt": [0], "max_tokens": 2}, seeded=False)
    client.post(post)
    time.sleep(0.5)  # the server has closed the idle connection by now
    assert client.post(post)["choices"][0]["token_ids"] and client.discarded == 0


def test_vllm_serve_dtype_is_checked_before_any_server_starts(pair):
    from specverify.adapters.server import vllm_serve_plain

    with pytest.raises(InvalidArgument, match="two-sample"):
        vllm_serve_plain(pair.target, pair.draft, dtype="int8")


def test_managed_server_started_from_a_template_recorded_without_secrets_and_stopped(pair, standin):
    """The managed process is ``proxy.py`` (standard library only: it starts in a fraction of a second) relaying to
    a stand-in in this process; ``standin.main`` runs the stand-in itself as a process (the slow tests below)."""
    import sys
    from pathlib import Path

    from specverify.adapters.server import managed

    proxy = Path(__file__).with_name("proxy.py")
    template = f"{sys.executable} -I {proxy} --to {standin().url} --port {{port}} --api-key s3cr3t-value"
    decoder = managed(pair.target, pair.draft, template=template, startup_timeout_s=60, honour=False)
    process = next(iter(decoder.servers.values())).process
    try:
        assert decoder([Request((0, 1), SamplingParams(max_tokens=3), 3, 5)])[0].tokens
        info = decoder.engine_info
        assert info["requested"]["mode"] == "managed" and "--api-key ***" in info["requested"]["launch"]
        assert "s3cr3t-value" not in json.dumps(info) and info["state"]["servers_started"] == 1
    finally:
        decoder.close()
    assert process.proc.poll() is not None  # stopped with close()


def test_managed_server_that_never_gets_ready_is_a_set_up_failure_and_is_stopped(pair, monkeypatch):
    import sys

    from specverify.adapters.server import managed, process

    started = []
    monkeypatch.setattr(process.ManagedServer, "__init__", _recording(process.ManagedServer.__init__, started))
    template = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1"  # no /health: 404 forever
    with pytest.raises(ServerUnavailable, match=r"did not answer GET /health within 1 s.*launch: .*http.server"):
        managed(pair.target, pair.draft, template=template, startup_timeout_s=1)
    assert started and started[0].proc.poll() is not None


def _recording(init, made):
    def wrapped(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    return wrapped


@pytest.mark.slow  # starts five stand-in processes (~10 s)
def test_managed_servers_beyond_the_process_cap_are_stopped_least_recently_used_first(pair, monkeypatch):
    import sys

    from specverify.adapters.server import decoder as decoder_module
    from specverify.adapters.server import managed

    monkeypatch.setenv(decoder_module.MAX_LIVE_ENV, "2")
    template = f"{sys.executable} -m tests.adapters.server.standin --port {{port}} --gamma {{gamma}}"
    made = managed(pair.target, pair.draft, template=template, startup_timeout_s=60, honour=False)
    try:
        for gamma in (1, 2, 3, 1):
            assert made([Request((0, 1), SamplingParams(max_tokens=3), gamma, 5)])[0].tokens
            assert len(decoder_module._LRU) <= 2 and len(made.servers) <= 2
        assert list(made.servers) == [3, 1]  # each new γ stopped the least recently used: 3, then 1, then 2
        assert made.engine_info["state"]["stopped_for_room"] == 3 and made.engine_info["state"]["servers_started"] == 5
    finally:
        made.close()
    assert not decoder_module._LRU
