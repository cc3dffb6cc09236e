"""The streaming harness (``specverify.fuzz.streaming``): its strategy, its runs, its argument checks, known-broken
consumers it must catch with a minimal reproducer, and transformers' ``TextIteratorStreamer`` under it."""

from __future__ import annotations

import queue

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specverify.errors import InvalidArgument
from specverify.fuzz import PropertyFailure
from specverify.fuzz.streaming import (
    StreamConsumer,
    check_chunking,
    chunkings,
    minimal_chunking,
    run_stream,
    split_deltas,
    toy_bpe_tokenizer,
)
from tests.fuzz._budget import examples, fast_and_full

STRINGS = ("a", "b", "ab", "ba", " ", "c")  # toy vocabulary: token id -> text


class Concat:
    """Correct: streams each delta's text."""

    def __init__(self):
        self.tokens = []

    def feed(self, token_ids, *, last):
        self.tokens += token_ids
        return {"text": "".join(STRINGS[t] for t in token_ids), "count": "x" * len(token_ids)}

    def result(self):
        return tuple(self.tokens)


class DfaStop:
    """Correct: the decoders' stop DFA (``reference.stops``), fed token by token, finishing at the first hit."""

    def __init__(self, stops):
        from specverify.reference.stops import stop_tables

        self.tables, self.state, self.kept, self.done = stop_tables(STRINGS, tuple(stops)), 0, [], False

    def feed(self, token_ids, *, last):
        text = ""
        for token in token_ids:
            if self.done:
                break
            self.kept.append(token)
            text += STRINGS[token]
            self.done = bool(self.tables.hit[self.state, token])
            self.state = int(self.tables.next_state[self.state, token])
        return text

    def result(self):
        return tuple(self.kept), self.done


class LastTokenOnly(Concat):
    """Broken like vLLM PR #26027's gpt-oss stream generator: only the newest token of a delta is streamed."""

    def feed(self, token_ids, *, last):
        self.tokens += token_ids
        return STRINGS[token_ids[-1]] if token_ids else None


class PerDeltaStop(DfaStop):
    """Broken: searches each delta's own text, so a stop string spanning two deltas is missed."""

    def __init__(self, stops):
        self.stops, self.kept, self.done = tuple(stops), [], False

    def feed(self, token_ids, *, last):
        if self.done:
            return None
        self.kept += token_ids
        text = "".join(STRINGS[t] for t in token_ids)
        self.done = any(s in text for s in self.stops)
        return text


@st.composite
def sized_chunkings(draw):
    num_tokens, max_size = draw(st.integers(0, 12)), draw(st.integers(1, 4))
    return num_tokens, max_size, draw(chunkings(num_tokens, max_size=max_size))


@examples(20)
@given(sized_chunkings())
def test_chunkings_cut_the_tokens_into_deltas_no_longer_than_max_size(case):
    num_tokens, max_size, sizes = case
    assert sum(sizes) == num_tokens and all(1 <= s <= max_size for s in sizes)
    assert [t for d in split_deltas(list(range(num_tokens)), sizes) for t in d] == list(range(num_tokens))


def test_run_stream_concatenates_channels_and_empty_tokens_get_one_last_delta():
    run = run_stream(Concat, [2, 0, 4, 1], (1, 3))
    assert run.text == {"text": "aba b", "count": "xxxx"} and run.result == (2, 0, 4, 1)
    assert run.deltas == ({"text": "ab", "count": "x"}, {"text": "a b", "count": "xxx"})
    seen = []

    class Spy(Concat):
        def feed(self, token_ids, *, last):
            seen.append((list(token_ids), last))
            return None

    assert run_stream(Spy, [], ()).text == {} and seen == [([], True)]
    assert isinstance(Concat(), StreamConsumer)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: run_stream(Concat, [0, -1], (2,)), "tokens="),
        (lambda: run_stream(Concat, "ab", (2,)), "tokens="),
        (lambda: run_stream(Concat, [0, 1], (1,)), "sizes="),
        (lambda: run_stream(Concat, [0, 1], (2, 0)), "sizes="),
        (lambda: run_stream(Concat(), [0], (1,)), "make_consumer="),
        (lambda: check_chunking(Concat, [0, 1], (2,), reference=(1,)), "sizes="),
        (lambda: chunkings(-1), "num_tokens="),
        (lambda: chunkings(3, max_size=0), "max_size="),
        (lambda: toy_bpe_tokenizer(kind="wordpiece"), "kind="),
        (lambda: toy_bpe_tokenizer(special_tokens=()), "special_tokens="),
    ],
)
def test_bad_arguments_raise_invalid_argument_naming_them(call, name):
    with pytest.raises(InvalidArgument, match=name):
        call()


def test_a_delta_of_the_wrong_type_is_a_property_failure():
    class Bad(Concat):
        def feed(self, token_ids, *, last):
            return ["not", "a", "delta"]

    with pytest.raises(PropertyFailure, match="delta 0"):
        run_stream(Bad, [0], (1,))


def test_the_last_token_only_stream_generator_is_caught_with_a_minimal_chunking():
    tokens = [0, 1, 2, 4, 3]
    with pytest.raises(PropertyFailure) as failure:
        check_chunking(LastTokenOnly, tokens, (5,))
    reference, run = failure.value.runs
    assert failure.value.prop == "streaming" and failure.value.tokens == tuple(tokens)
    assert reference.text == {"text": "abab ba"} and sorted(run.sizes) == [1, 1, 1, 2]
    assert "Reproduce: run_stream(make_consumer, [0, 1, 2, 4, 3]" in str(failure.value)
    assert minimal_chunking(LastTokenOnly, tokens, run.sizes, reference).sizes == run.sizes


def test_a_stop_matcher_blind_across_deltas_is_caught():
    with pytest.raises(PropertyFailure, match="channel 'text'"):
        check_chunking(lambda: PerDeltaStop(("ab",)), [0, 1, 5, 5], (2, 2))  # "a" + "b": a stop only as one delta
    check_chunking(lambda: PerDeltaStop(("ab",)), [0, 1, 5, 5], (1, 1, 1, 1), reference=(1, 3))  # both blind


@fast_and_full(
    200,
    st.lists(st.integers(0, len(STRINGS) - 1), max_size=12).flatmap(
        lambda tokens: st.tuples(st.just(tokens), chunkings(len(tokens), max_size=4))
    ),
    st.lists(st.sampled_from(["ab", "b a", "c", "aa", "bab"]), min_size=1, max_size=3),
)
def test_the_stop_dfa_streams_the_same_under_every_chunking(case, stops):
    tokens, sizes = case
    check_chunking(lambda: DfaStop(stops), tokens, sizes, minimize=False)


class IteratorStreamer:
    """transformers' ``TextIteratorStreamer`` as ``generate()`` drives it: the prompt first (skipped), then each
    committed delta as one ``put`` (assisted generation puts every accepted token of a round at once), ``end()``."""

    def __init__(self, tokenizer, prompt):
        import torch
        from transformers import TextIteratorStreamer

        self.torch, self.tokenizer, self.tokens = torch, tokenizer, []
        self.streamer = TextIteratorStreamer(tokenizer, skip_prompt=True)
        self.streamer.put(torch.tensor([prompt]))

    def feed(self, token_ids, *, last):
        self.tokens += token_ids
        if token_ids:
            self.streamer.put(self.torch.tensor([token_ids]))
        if last:
            self.streamer.end()
        pieces = []
        while True:
            try:
                piece = self.streamer.text_queue.get_nowait()
            except queue.Empty:
                return "".join(pieces)
            if piece is not self.streamer.stop_signal:
                pieces.append(piece)

    def result(self):
        return self.tokenizer.decode(self.tokens)


PIECES = ["a", "b", " ", "  ", "\n", "\n\n", "the", " fox", "é", "中", "文", "🙂", "—", "“", ".", "12", "\t", "<"]


@pytest.fixture(scope="module")
def tokenizers():
    pytest.importorskip("transformers")
    return {kind: toy_bpe_tokenizer(kind=kind) for kind in ("byte_level", "metaspace")}


@st.composite
def streamer_cases(draw, tokenizers):
    tokenizer = tokenizers[draw(st.sampled_from(sorted(tokenizers)))]
    if draw(st.booleans()):  # text a model could write, or any ids (bytes that never form a character)
        tokens = tokenizer.encode("".join(draw(st.lists(st.sampled_from(PIECES), max_size=14))))
    else:
        tokens = draw(st.lists(st.integers(0, len(tokenizer) - 1), max_size=14))
    return tokenizer, tokens, draw(chunkings(len(tokens), max_size=5))


@pytest.mark.parametrize("budget", ["fast", pytest.param("full", marks=pytest.mark.slow)])
def test_text_iterator_streamer_streams_the_same_text_under_every_chunking(tokenizers, budget):
    @examples({"fast": 50, "full": 800}[budget])
    @given(streamer_cases(tokenizers))
    def prop(case):
        tokenizer, tokens, sizes = case
        check_chunking(lambda: IteratorStreamer(tokenizer, [5, 6]), tokens, sizes)

    prop()
