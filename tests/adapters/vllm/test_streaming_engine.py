"""The streaming harness (``specverify.fuzz.streaming``) against vLLM 0.32.0's text layer, in the vLLM venv:

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_streaming_engine.py -q -p no:cacheprovider

The consumers are the engine's own objects, driven as its output processor and chat serving drive them
(``vllm/v1/engine/output_processor.py``, ``vllm/entrypoints/openai/chat_completion/serving.py``): the incremental
detokenizer with its stop strings, then a ``Parser`` (reasoning and tool calls) fed each delta's text and token ids.
Tokenizers are ``toy_bpe_tokenizer``'s, trained here with the marker tokens the parsers look up. Findings S1 and S2
are docs/findings/streaming.md's; llama.cpp is not covered (the same page says why).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: run it with .venv-vllm (see .ci/run)")

from specverify.fuzz import PropertyFailure  # noqa: E402
from specverify.fuzz.streaming import check_chunking, chunkings, run_stream, toy_bpe_tokenizer  # noqa: E402

THINK, END = "<think>", "</think>"
MARKERS = (THINK, END, "<tool_call>", "</tool_call>", "<seed:think>", "</seed:think>")
WORDS = ("a", " b", "\n", "ok", " the fox", "é", "🙂", " 12", "中")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "%s"}}\n</tool_call>'
XML_CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\n%s\n</parameter>\n</function>\n</tool_call>"
CITIES = ("Paris", "Köln", "a b", "東京")


def fuzz(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture(scope="module", autouse=True)
def quiet_vllm():
    logging.disable(logging.ERROR)  # tool parsers log every partial JSON they cannot parse yet
    yield
    logging.disable(logging.NOTSET)


@pytest.fixture(scope="module")
def tokenizers():
    kinds = ("byte_level", "metaspace")
    return {k: toy_bpe_tokenizer(kind=k, added_tokens=MARKERS, special_tokens=("</s>", "<extra>")) for k in kinds}


class SlowTokenizer:
    """The same tokenizer as vLLM sees a non-fast one: ``SlowIncrementalDetokenizer`` instead of ``DecodeStream``."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def __len__(self):
        return len(self._tokenizer)


def detokenizer(tokenizer, prompt, **sampling):
    from vllm import SamplingParams
    from vllm.v1.engine.detokenizer import IncrementalDetokenizer

    request = SimpleNamespace(
        request_id="r", prompt_token_ids=list(prompt), prompt_embeds=None, sampling_params=SamplingParams(**sampling)
    )
    return IncrementalDetokenizer.from_new_request(tokenizer, request)


class Detokenizer:
    """The output processor's use of the detokenizer: ``update`` (stop strings; ``stop_terminated`` when the delta
    holds EOS, after which the engine core sends nothing), the delta's ids trimmed past a stop string
    (``_trim_surplus_tokens``), then ``get_next_output_text(finished, delta=True)``. Streams the text and the ids."""

    def __init__(self, tokenizer, prompt, eos, sampling):
        self.detok, self.eos, self.stop, self.done = detokenizer(tokenizer, prompt, **sampling), eos, None, False
        self.delta_ids = []

    def feed(self, token_ids, *, last):
        if self.done:
            return None
        eos = self.eos in token_ids
        if eos:
            token_ids = token_ids[: token_ids.index(self.eos) + 1]
        before = self.detok.num_output_tokens()
        self.stop = self.detok.update(token_ids, eos)
        self.done = eos or self.stop is not None
        self.delta_ids = token_ids[: self.detok.num_output_tokens() - before]
        text = self.detok.get_next_output_text(last or self.done, True)
        return {"text": text, "token_ids": "".join(f"{t} " for t in self.delta_ids)}

    def result(self):
        return self.detok.output_text, tuple(self.detok.output_token_ids), self.stop


class ChatStream(Detokenizer):
    """Chat serving's streaming loop: each delta's released text and token ids into ``Parser.parse_delta``; the
    streamed channels are content, reasoning and each tool call's name and arguments."""

    def __init__(self, tokenizer, prompt, reasoning, tool, sampling):
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        from vllm.parser import ParserManager

        super().__init__(tokenizer, prompt, -1, sampling)
        parser = ParserManager.get_parser(
            tool_parser_name=tool, reasoning_parser_name=reasoning, enable_auto_tools=bool(tool), tokenizer=tokenizer
        )
        self.parser, self.prompt = parser(tokenizer), list(prompt)
        self.request = ChatCompletionRequest(
            model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS if tool else None
        )

    def feed(self, token_ids, *, last):
        if self.done:
            return None
        text = super().feed(token_ids, last=last)["text"]
        return self.message(
            self.parser.parse_delta(text, self.delta_ids, self.request, self.prompt, finished=last or self.done)
        )

    @staticmethod
    def message(message):
        if message is None:
            return None
        out = {"content": message.content or "", "reasoning": message.reasoning or ""}
        for call in message.tool_calls or []:
            if call.function is not None:
                for field in ("name", "arguments"):
                    key = f"tool[{call.index}].{field}"
                    out[key] = out.get(key, "") + (getattr(call.function, field) or "")
        return out

    def result(self):
        return self.detok.output_text


class Factory:
    """A consumer factory whose repr is the reproducer's configuration."""

    def __init__(self, cls, tokenizer, *args, **sampling):
        self.cls, self.tokenizer, self.args, self.sampling = cls, tokenizer, args, sampling

    def __call__(self):
        return self.cls(self.tokenizer, *self.args, self.sampling)

    def __repr__(self):
        kind = "slow" if isinstance(self.tokenizer, SlowTokenizer) else "fast"
        return f"{self.cls.__name__}({kind} tokenizer, {self.args!r}, {self.sampling!r})"


# --- the detokenizer and its stop strings -------------------------------------------------------------------------


@st.composite
def detokenizer_cases(draw, tokenizers):
    tokenizer = tokenizers[draw(st.sampled_from(sorted(tokenizers)))]
    if draw(st.booleans()):
        tokens = tokenizer.encode("".join(draw(st.lists(st.sampled_from(WORDS + MARKERS), max_size=10))))
    else:  # any ids: specials, bytes that never complete a character
        tokens = draw(st.lists(st.integers(0, len(tokenizer) - 1), max_size=10))
    text = tokenizer.decode(tokens)
    cut = st.integers(0, max(0, len(text) - 1)).flatmap(lambda i: st.integers(1, 4).map(lambda n: text[i : i + n]))
    stops = draw(st.lists(st.one_of(st.sampled_from(("a", "ab", "b a", "🙂", "\n", THINK)), cut), max_size=3))
    sampling = {
        "stop": [s for s in stops if s] or None,
        "include_stop_str_in_output": draw(st.booleans()),
        "min_tokens": draw(st.sampled_from((0, 1, 3))),
        "skip_special_tokens": draw(st.booleans()),
        "spaces_between_special_tokens": draw(st.booleans()),
    }
    eos = tokenizer.eos_token_id if draw(st.booleans()) else -1
    tokenizer = SlowTokenizer(tokenizer) if draw(st.booleans()) else tokenizer
    return Factory(Detokenizer, tokenizer, [5, 6], eos, **sampling), tokens, draw(chunkings(len(tokens), max_size=5))


@pytest.mark.parametrize("n", [60, pytest.param(1500, marks=pytest.mark.slow)], ids=["fast", "full"])
def test_detokenizer_and_stop_strings_stream_the_same_under_every_chunking(tokenizers, n):
    """Fast (``DecodeStream``) and slow detokenizers, stop strings in and out of the output, ``min_tokens``, EOS in
    the delta: the text, the kept tokens and the stop reason never depend on the chunking (1500 examples hold)."""

    @fuzz(n)
    @given(detokenizer_cases(tokenizers))
    def prop(case):
        factory, tokens, sizes = case
        check_chunking(factory, tokens, sizes)

    prop()


def test_a_stop_choice_by_list_order_is_caught(tokenizers, monkeypatch):
    """Test the tester: the stop string picked by list order instead of by earliest completion (what the docstring of
    vLLM's ``check_stop_strings`` says it no longer does) streams differently once a delta completes two stops."""
    from vllm.v1.engine import detokenizer as module

    shipped = module.check_stop_strings

    def list_order(output_text, new_char_count, stop, include_in_output):
        for s in stop:
            hit = shipped(output_text, new_char_count, [s], include_in_output)
            if hit is not None:
                return hit
        return None

    tokenizer = tokenizers["byte_level"]
    tokens = [tokenizer.convert_tokens_to_ids(c) for c in "abc"]
    factory = Factory(Detokenizer, tokenizer, [5], -1, stop=["bc", "ab"])
    run = check_chunking(factory, tokens, (3,))
    assert run.result == ("", (tokens[0], tokens[1]), "ab") and run.text == {"token_ids": f"{tokens[0]} {tokens[1]} "}
    monkeypatch.setattr(module, "check_stop_strings", list_order)
    with pytest.raises(PropertyFailure, match="'bc'"):
        check_chunking(factory, tokens, (3,))


# --- reasoning and tool-call parsers ------------------------------------------------------------------------------


@st.composite
def chat_outputs(draw, tokenizer, start, end, tool_call=None):
    """Well-formed outputs: reasoning opened in the output or at the end of the prompt (chat templates with thinking
    on), or none; then content, maybe tool calls."""

    def words():
        return "".join(draw(st.lists(st.sampled_from(WORDS), max_size=4)))

    mode = draw(st.sampled_from(("start_in_output", "start_in_prompt", "no_reasoning")))
    prompt = [5, tokenizer.convert_tokens_to_ids(start)] if mode == "start_in_prompt" else [5]
    head = {"start_in_output": start + words() + end, "start_in_prompt": words() + end, "no_reasoning": ""}[mode]
    num_calls = draw(st.integers(0, 2)) if tool_call else 0
    calls = "".join(tool_call % draw(st.sampled_from(CITIES)) for _ in range(num_calls))
    tokens = tokenizer.encode(head + words() + calls)
    return prompt, tokens, draw(chunkings(len(tokens), max_size=4))


INVARIANT_PARSERS = [  # (reasoning, tool, start, end, call): the ones that hold under 150+ fuzzed outputs each
    ("qwen3", None, THINK, END, None),
    ("qwen3", "qwen3_xml", THINK, END, XML_CALL),
    ("qwen3", "hermes", THINK, END, HERMES_CALL),
    ("deepseek_v4", None, THINK, END, None),
    ("glm45", None, THINK, END, None),
    ("kimi_k2", None, THINK, END, None),
    ("minimax_m2", None, THINK, END, None),
    ("seed_oss", None, "<seed:think>", "</seed:think>", None),
    (None, "hermes", THINK, END, HERMES_CALL),
    (None, "qwen3_coder", THINK, END, XML_CALL),
]


@pytest.mark.parametrize("n", [15, pytest.param(150, marks=pytest.mark.slow)], ids=["fast", "full"])
@pytest.mark.parametrize(
    "reasoning, tool, start, end, call", INVARIANT_PARSERS, ids=[f"{r}+{t}" for r, t, *_ in INVARIANT_PARSERS]
)
def test_parsers_stream_the_same_under_every_chunking(tokenizers, reasoning, tool, start, end, call, n):
    tokenizer = tokenizers["byte_level"]

    @fuzz(n)
    @given(chat_outputs(tokenizer, start, end, call))
    def prop(case):
        prompt, tokens, sizes = case
        check_chunking(Factory(ChatStream, tokenizer, prompt, reasoning, tool), tokens, sizes)

    prop()


# --- finding S1: the start marker streams as reasoning when it shares a delta -------------------------------------


def split_opening_delta(delta_text: str, start: str, end: str, end_in_delta: bool) -> tuple[str, str]:
    """(reasoning, content) of a delta that opens reasoning: the text before the start marker is content (one token
    per delta streams it so), the text after it reasoning, up to the end marker when the delta closes it too."""
    head, _, rest = delta_text.partition(start)
    if end_in_delta and end in rest:
        reasoning, _, tail = rest.partition(end)
        return reasoning, head + tail
    return rest, head


def patch_opening_deltas(monkeypatch):
    """The local patch of finding S1: a multi-token delta holding the start marker (not seen before) is split by
    ``split_opening_delta`` in ``BaseThinkingReasoningParser`` (deepseek_r1, holo2, ...) and HYV4's extractor."""
    from vllm.entrypoints.generate.base.protocol import DeltaMessage
    from vllm.reasoning.basic_parsers import BaseThinkingReasoningParser
    from vllm.reasoning.hy_v4_reasoning_parser import HYV4ReasoningExtractor, ReasoningDelta

    def patched(cls, make):
        shipped = cls.extract_reasoning_streaming

        def extract_reasoning_streaming(self, previous_text, current_text, delta_text, previous, current, delta):
            if self.start_token_id in previous or self.start_token_id not in delta or len(delta) < 2:
                return shipped(self, previous_text, current_text, delta_text, previous, current, delta)
            reasoning, content = split_opening_delta(
                delta_text, self.start_token, self.end_token, self.end_token_id in delta
            )
            return make(reasoning=reasoning, content=content or None)

        monkeypatch.setattr(cls, "extract_reasoning_streaming", extract_reasoning_streaming)

    patched(BaseThinkingReasoningParser, DeltaMessage)
    patched(HYV4ReasoningExtractor, ReasoningDelta)


S1_PARSERS = ("deepseek_r1", "holo2", "hy_v4", "ernie45")


@pytest.mark.parametrize("reasoning", S1_PARSERS)
def test_finding_s1_the_start_marker_streams_as_reasoning_when_it_shares_a_delta(tokenizers, reasoning):
    """FINDING S1 (docs/findings/streaming.md): vLLM 0.32.0's BaseThinkingReasoningParser
    (reasoning/basic_parsers.py:145-148), its copy in HYV4 (hy_v4_reasoning_parser.py:222-223) and ernie45's
    end-marker branch (ernie45_reasoning_parser.py:85-101) stream ``<think>`` as reasoning when a round commits it
    with the next token; one token per delta never does."""
    tokenizer = tokenizers["byte_level"]
    tokens = tokenizer.encode("<think>step one</think>the answer")
    factory = Factory(ChatStream, tokenizer, [5], reasoning, None)
    with pytest.raises(PropertyFailure) as failure:
        check_chunking(factory, tokens, (2,) + (1,) * (len(tokens) - 2))
    reference, chunked = failure.value.runs
    assert reference.text == {"reasoning": "step one", "content": "the answer"}
    assert chunked.text["reasoning"] == "<think>step one" and chunked.sizes == (2,) + (1,) * (len(tokens) - 2)


@pytest.mark.parametrize("n", [15, pytest.param(150, marks=pytest.mark.slow)], ids=["fast", "full"])
@pytest.mark.parametrize("reasoning", S1_PARSERS[:3])
def test_finding_s1_patched_streams_the_same_under_every_chunking(tokenizers, monkeypatch, reasoning, n):
    patch_opening_deltas(monkeypatch)
    tokenizer = tokenizers["byte_level"]

    @fuzz(n)
    @given(chat_outputs(tokenizer, THINK, END, HERMES_CALL if reasoning == "deepseek_r1" else None))
    def prop(case):
        prompt, tokens, sizes = case
        tool = "hermes" if reasoning == "deepseek_r1" else None
        check_chunking(Factory(ChatStream, tokenizer, prompt, reasoning, tool), tokens, sizes)

    prop()


# --- finding S2: with a stop string, the parser gets token ids whose text is still held back ---------------------


class AlignedChatStream(ChatStream):
    """The local patch of finding S2, at the serving boundary: text is released at token boundaries and token ids
    with their text (a token waits while any of its text is in the stop-string buffer)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.ends, self.pending, self.sent = [], [], 0
        decode_next = self.detok.decode_next

        def recording(token_id):
            piece = decode_next(token_id)
            self.ends.append(len(self.detok.output_text) + len(piece))  # output_text is extended after the call
            return piece

        self.detok.decode_next = recording

    def feed(self, token_ids, *, last):
        if self.done:
            return None
        before = self.detok.num_output_tokens()
        self.stop = self.detok.update(token_ids, False)
        self.done, finished = self.stop is not None, last or self.stop is not None
        self.pending += token_ids[: self.detok.num_output_tokens() - before]
        ends = self.ends[len(self.ends) - len(self.pending) :] if self.pending else []
        limit = len(self.detok.output_text) - (0 if finished else self.detok.stop_buffer_length)
        released = len(self.pending) if finished else sum(1 for _ in filter(lambda e: e <= limit, ends))
        text_end = len(self.detok.output_text) if finished else (ends[released - 1] if released else self.sent)
        ids, self.pending = self.pending[:released], self.pending[released:]
        text, self.sent = self.detok.output_text[self.sent : text_end], text_end
        return self.message(self.parser.parse_delta(text, ids, self.request, self.prompt, finished=finished))


STOP = {"stop": ["@@@@@@"]}  # never matches: only its hold-back of len - 1 = 5 characters acts


def test_finding_s2_a_stop_string_splits_the_text_from_its_token_ids(tokenizers):
    """FINDING S2 (docs/findings/streaming.md): with any stop string, vLLM 0.32.0 streams text up to the stop buffer
    (v1/engine/detokenizer.py:161-176) but every new token id at once (output_processor.py:440-441), so a parser
    that decides by token id and splits by text (basic_parsers.py:116-125) sees ``</think>``'s id before its text:
    reasoning leaks into content even one token per delta, and how much depends on the chunking."""
    tokenizer = tokenizers["byte_level"]
    tokens = tokenizer.encode("<think></think>a")
    factory = Factory(ChatStream, tokenizer, [5], "deepseek_r1", None, **STOP)
    with pytest.raises(PropertyFailure) as failure:
        check_chunking(factory, tokens, (1, 2))
    reference, chunked = failure.value.runs
    assert reference.text == {"content": "hink>a"}  # "<t" came with the lone start id (skipped), the rest as content
    assert chunked.text == {"reasoning": "hink>", "content": "a"}


def test_finding_s2_reaches_tool_calls_after_an_engine_based_reasoning_parser(tokenizers):
    """FINDING S2, second consumer: qwen3 + hermes lexes text, yet the ``<tool_call>`` id reaches the tool phase
    before its text, so with a stop string the marker's first characters stream as content."""
    tokenizer = tokenizers["byte_level"]
    tokens = tokenizer.encode(END + HERMES_CALL % "Paris")
    prompt = [5, tokenizer.convert_tokens_to_ids(THINK)]
    ones = (1,) * len(tokens)
    plain = run_stream(Factory(ChatStream, tokenizer, prompt, "qwen3", "hermes"), tokens, ones)
    stopped = Factory(ChatStream, tokenizer, prompt, "qwen3", "hermes", **STOP)
    assert "content" not in plain.text and plain.text["tool[0].arguments"] == '{"city": "Paris"}'
    assert run_stream(stopped, tokens, ones).text["content"] == "<tool_"
    with pytest.raises(PropertyFailure, match="channel 'content'"):
        check_chunking(stopped, tokens, (1, 2) + (1,) * (len(tokens) - 3))


S2_PIPELINES = [
    ("deepseek_r1", "hermes", HERMES_CALL),
    ("qwen3", "hermes", HERMES_CALL),
    ("qwen3", "qwen3_xml", XML_CALL),
]


@pytest.mark.parametrize("n", [15, pytest.param(200, marks=pytest.mark.slow)], ids=["fast", "full"])
@pytest.mark.parametrize("reasoning, tool, call", S2_PIPELINES, ids=[f"{r}+{t}" for r, t, _ in S2_PIPELINES])
def test_finding_s2_patched_streams_the_same_under_every_chunking(tokenizers, monkeypatch, reasoning, tool, call, n):
    patch_opening_deltas(monkeypatch)  # S1 too: deepseek_r1 has both
    tokenizer = tokenizers["byte_level"]

    @fuzz(n)
    @given(chat_outputs(tokenizer, THINK, END, call))
    def prop(case):
        prompt, tokens, sizes = case
        check_chunking(Factory(AlignedChatStream, tokenizer, prompt, reasoning, tool, **STOP), tokens, sizes)

    prop()
