"""Chunking invariance of the text layer: a streamed token sequence must not depend on how it was cut into deltas.

A speculative engine commits several tokens per round, so everything above the sampler (the incremental
detokenizer, the stop-string matcher, reasoning and tool-call parsers) receives multi-token deltas where a plain
engine feeds one token at a time. The exactness of the token law (the rest of specverify) says nothing about this
layer: the same tokens, cut differently, must give the same streamed text and the same final result.

- ``StreamConsumer``: the protocol of a consumer (``feed(token_ids, last=...)`` -> a delta, ``result()``);
  ``make_consumer`` is any zero-argument callable returning a fresh one.
- ``chunkings`` (a hypothesis strategy of delta sizes: one token per delta, a fixed round, random splits),
  ``split_deltas``, ``run_stream`` (one run: the deltas, the concatenated text per channel, the result).
- ``check_chunking``: raise ``PropertyFailure("streaming")`` unless a chunking streams what the reference chunking
  (default: one token per delta) streams; the failure carries a minimal reproducer.
- ``recorded_run``, ``check_runs``: the same comparison for deltas an engine cut itself (a server's streamed
  events against its non-streamed response), where the harness cannot choose the chunking.
- ``toy_bpe_tokenizer``: a small BPE tokenizer trained locally (byte-level or metaspace), with extra added tokens,
  for consumers that need a real ``tokenizers``/``transformers`` tokenizer without a download.

Importing this module imports hypothesis; transformers and tokenizers only inside ``toy_bpe_tokenizer``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Protocol, Sequence, Union, runtime_checkable

from hypothesis import strategies as st

from specverify.errors import check
from specverify.fuzz.properties import PropertyFailure

__all__ = [
    "StreamConsumer",
    "StreamRun",
    "chunkings",
    "split_deltas",
    "run_stream",
    "check_chunking",
    "minimal_chunking",
    "recorded_run",
    "check_runs",
    "toy_bpe_tokenizer",
]

Delta = Union[None, str, Mapping[str, str]]
TEXT = "text"  # the channel of a consumer whose deltas are plain strings


@runtime_checkable
class StreamConsumer(Protocol):
    """One streamed request's consumer (an incremental detokenizer, a stop matcher, a reasoning or tool parser).

    ``feed(token_ids, last=...)`` takes the next delta of token ids (``last=True`` with the final one: engines send
    the finish flag with the last delta, not after it) and returns what it streams for it: ``None``, a ``str``
    (channel ``"text"``) or a mapping ``{channel: text}`` (e.g. ``content``, ``reasoning``, ``tool[0].arguments``).
    ``result()``, called once after the last feed, returns the final result (anything comparable with ``==``: the
    full text, the kept token ids, the stop reason, the parsed message). A consumer that finishes early (a stop
    string) ignores later feeds, as an engine drops a finished request's remaining tokens.
    """

    def feed(self, token_ids: list[int], *, last: bool) -> Delta: ...

    def result(self) -> object: ...


@dataclass(frozen=True)
class StreamRun:
    """One run of a consumer over ``tokens`` cut into deltas of ``sizes``.

    ``deltas`` are the normalized deltas (``{channel: text}``, empty texts dropped), ``text`` their concatenation per
    channel, ``result`` what ``result()`` returned.
    """

    sizes: tuple[int, ...]
    deltas: tuple[dict[str, str], ...] = field(repr=False)
    text: dict[str, str]
    result: object


def _check_tokens(tokens) -> tuple[int, ...]:
    check(
        isinstance(tokens, Sequence)
        and not isinstance(tokens, (str, bytes))
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens),
        f"tokens={tokens!r} must be a sequence of token ids (ints >= 0); pass e.g. tokenizer.encode(text).",
    )
    return tuple(int(t) for t in tokens)


def _check_sizes(sizes, num_tokens: int) -> tuple[int, ...]:
    check(
        isinstance(sizes, Sequence)
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in sizes)
        and sum(sizes) == num_tokens,
        f"sizes={sizes!r} must be delta sizes (ints >= 1) summing to len(tokens)={num_tokens}; "
        "draw them with chunkings(len(tokens)).",
    )
    return tuple(int(s) for s in sizes)


def _check_factory(make_consumer) -> None:
    check(
        callable(make_consumer),
        f"make_consumer={make_consumer!r} must be a zero-argument callable returning a fresh StreamConsumer "
        "(a class, a functools.partial, a lambda).",
    )


def chunkings(num_tokens: int, *, max_size: Optional[int] = None) -> st.SearchStrategy[tuple[int, ...]]:
    """Delta sizes cutting ``num_tokens`` tokens: one per delta, a fixed round of k (the last one shorter), or a
    random split; no delta is longer than ``max_size`` (default ``num_tokens``; γ + 1 for a speculative engine
    with γ draft tokens, which commits 1..γ + 1 tokens per round). Shrinks towards fewer, longer deltas."""
    check(
        isinstance(num_tokens, int) and not isinstance(num_tokens, bool) and num_tokens >= 0,
        f"num_tokens={num_tokens!r} must be an int >= 0 (the length of the token sequence).",
    )
    check(
        max_size is None or (isinstance(max_size, int) and not isinstance(max_size, bool) and max_size >= 1),
        f"max_size={max_size!r} must be None or an int >= 1 (the longest delta, e.g. num_draft_tokens + 1).",
    )
    if num_tokens == 0:
        return st.just(())
    top = min(max_size or num_tokens, num_tokens)
    rounds = st.integers(0, top - 1).map(lambda j: _rounds(num_tokens, top - j))  # shrinks towards k = top
    return st.one_of(rounds, _random_split(num_tokens, top))


def _rounds(num_tokens: int, size: int) -> tuple[int, ...]:
    full, rest = divmod(num_tokens, size)
    return (size,) * full + ((rest,) if rest else ())


@st.composite
def _random_split(draw, num_tokens: int, top: int) -> tuple[int, ...]:
    sizes, size = [], 0
    for position in range(num_tokens):
        size += 1
        # a cut is a drawn True: shrinking (towards False) merges deltas
        if size == top or position == num_tokens - 1 or draw(st.booleans()):
            sizes.append(size)
            size = 0
    return tuple(sizes)


def split_deltas(tokens: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """``tokens`` cut into consecutive deltas of ``sizes``."""
    tokens = _check_tokens(tokens)
    sizes = _check_sizes(sizes, len(tokens))
    cuts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    return [list(tokens[a:b]) for a, b in zip(cuts, cuts[1:])]


def _normalize(delta: Delta, index: int) -> dict[str, str]:
    if delta is None:
        return {}
    if isinstance(delta, str):
        return {TEXT: delta} if delta else {}
    if isinstance(delta, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in delta.items()):
        return {k: v for k, v in delta.items() if v}
    raise PropertyFailure(
        "streaming", f"delta {index} is {delta!r}: a consumer's feed must return None, a str or a {{str: str}} mapping"
    )


def run_stream(make_consumer: Callable[[], StreamConsumer], tokens: Sequence[int], sizes: Sequence[int]) -> StreamRun:
    """Run a fresh consumer over ``tokens`` cut into ``sizes`` (an empty sequence: one empty ``last`` delta)."""
    _check_factory(make_consumer)
    deltas = split_deltas(tokens, sizes) or [[]]
    consumer = make_consumer()
    out = tuple(_normalize(consumer.feed(d, last=i == len(deltas) - 1), i) for i, d in enumerate(deltas))
    text: dict[str, str] = {}
    for delta in out:
        for channel, piece in delta.items():
            text[channel] = text.get(channel, "") + piece
    return StreamRun(tuple(sizes), out, text, consumer.result())


def _differs(a: StreamRun, b: StreamRun) -> Optional[str]:
    for channel in sorted(set(a.text) | set(b.text)):
        if a.text.get(channel, "") != b.text.get(channel, ""):
            return f"channel {channel!r}: {a.text.get(channel, '')!r} != {b.text.get(channel, '')!r}"
    if a.result != b.result:
        return f"result: {a.result!r} != {b.result!r}"
    return None


def minimal_chunking(
    make_consumer: Callable[[], StreamConsumer],
    tokens: Sequence[int],
    sizes: Sequence[int],
    reference: StreamRun,
) -> StreamRun:
    """A run that still differs from ``reference``, with ``sizes`` split as far as it goes: greedily cut a delta in
    two while the difference stays. What is left are the deltas whose multi-token arrival matters."""
    run = run_stream(make_consumer, tokens, sizes)
    changed = True
    while changed:
        changed = False
        for i, size in enumerate(run.sizes):
            for cut in range(1, size):
                trial = run_stream(make_consumer, tokens, run.sizes[:i] + (cut, size - cut) + run.sizes[i + 1 :])
                if _differs(reference, trial):
                    run, changed = trial, True
                    break
            if changed:
                break
    return run


def check_chunking(
    make_consumer: Callable[[], StreamConsumer],
    tokens: Sequence[int],
    sizes: Sequence[int],
    *,
    reference: Optional[Sequence[int]] = None,
    minimize: bool = True,
) -> StreamRun:
    """Raise ``PropertyFailure("streaming")`` unless ``tokens`` cut into ``sizes`` stream the same text per channel
    and the same ``result()`` as cut into ``reference`` (default: one token per delta, how a plain engine streams).

    Returns the run of ``sizes``. The failure's message is a reproducer (the tokens, both chunkings, both texts and
    results); with ``minimize`` the failing chunking is first split as far as the difference stays
    (``minimal_chunking``). The failure also carries ``tokens`` and ``runs`` (reference run, failing run).

    >>> class Letters:  # token id i streams the i-th letter; this one keeps only a delta's last token
    ...     def feed(self, token_ids, *, last):
    ...         return {"text": "".join(chr(97 + t) for t in token_ids), "last": chr(97 + token_ids[-1])}
    ...     def result(self):
    ...         return None
    >>> run_stream(Letters, [0, 1, 2], (2, 1)).text
    {'text': 'abc', 'last': 'bc'}
    >>> check_chunking(Letters, [0, 1, 2], (3,))
    Traceback (most recent call last):
    ...
    specverify.fuzz.properties.PropertyFailure: [streaming] ...channel 'last': 'abc' != 'ac'...[1, 2])...
    """
    _check_factory(make_consumer)
    tokens = _check_tokens(tokens)
    sizes = _check_sizes(sizes, len(tokens))
    reference = _check_sizes((1,) * len(tokens) if reference is None else reference, len(tokens))
    base, run = run_stream(make_consumer, tokens, reference), run_stream(make_consumer, tokens, sizes)
    if _differs(base, run) is None:
        return run
    if minimize:
        run = minimal_chunking(make_consumer, tokens, sizes, base)
    failure = PropertyFailure(
        "streaming",
        f"{make_consumer!r}: the same tokens cut differently stream differently; {_differs(base, run)}.\n"
        f"Reproduce: run_stream(make_consumer, {list(tokens)!r}, {list(reference)!r}) vs "
        f"run_stream(make_consumer, {list(tokens)!r}, {list(run.sizes)!r})\n"
        f"  reference: text={base.text!r} result={base.result!r}\n"
        f"  chunked:   text={run.text!r} result={run.result!r}",
    )
    failure.tokens, failure.runs = tokens, (base, run)
    raise failure


def recorded_run(deltas: Sequence[tuple[Sequence[int], Delta]], result: object) -> StreamRun:
    """A run that an engine cut itself: ``deltas`` are the ``(token_ids, delta)`` pairs as received (a delta as a
    consumer's ``feed`` returns it: ``None``, a ``str`` or ``{channel: text}``), ``result`` the final result (e.g.
    the tokens and the stop reason). A non-streamed response is one pair. Normalized as ``run_stream`` does.

    >>> recorded_run([([0], "a"), ([1], None), ([2], "bc")], result="stop").text
    {'text': 'abc'}
    """
    check(
        isinstance(deltas, Sequence)
        and all(isinstance(d, Sequence) and not isinstance(d, (str, bytes)) and len(d) == 2 for d in deltas),
        f"deltas={deltas!r} must be a sequence of (token_ids, delta) pairs, e.g. [([3], 'a'), ([1, 2], 'bc')].",
    )
    sizes = tuple(len(_check_tokens(ids)) for ids, _ in deltas)
    out = tuple(_normalize(delta, i) for i, (_, delta) in enumerate(deltas))
    text: dict[str, str] = {}
    for delta in out:
        for channel, piece in delta.items():
            text[channel] = text.get(channel, "") + piece
    return StreamRun(sizes, out, text, result)


def check_runs(reference: StreamRun, run: StreamRun, *, reproduce: str = "") -> StreamRun:
    """Raise ``PropertyFailure("streaming")`` unless ``run`` streams the same text per channel and ends in the same
    result as ``reference`` (``check_chunking``'s comparison, for runs whose chunking was not chosen, such as
    ``recorded_run``'s). ``reproduce`` goes into the message (how to get both runs again). Returns ``run``.

    >>> whole = recorded_run([([0, 1], "ab")], result="length")
    >>> check_runs(whole, recorded_run([([0], "a"), ([1], "")], result="length"), reproduce="seed 7")
    Traceback (most recent call last):
    ...
    specverify.fuzz.properties.PropertyFailure: [streaming] ...channel 'text': 'ab' != 'a'...Reproduce: seed 7...
    """
    check(
        isinstance(reference, StreamRun) and isinstance(run, StreamRun),
        f"reference={reference!r} and run={run!r} must be StreamRun (from run_stream or recorded_run).",
    )
    difference = _differs(reference, run)
    if difference is None:
        return run
    failure = PropertyFailure(
        "streaming",
        f"two runs of the same tokens stream differently; {difference}.\n"
        f"Reproduce: {reproduce or '(not given)'}\n"
        f"  reference: sizes={list(reference.sizes)!r} text={reference.text!r} result={reference.result!r}\n"
        f"  run:       sizes={list(run.sizes)!r} text={run.text!r} result={run.result!r}",
    )
    failure.runs = (reference, run)
    raise failure


_CORPUS = (
    "the quick brown fox jumps over the lazy dog. Hello world! hello, there: 12 34 567\n"
    "naïve café déjà vu — “quotes” 中文字符 测试 emoji 🙂🚀 ok\n\tindented line\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n'
)


def toy_bpe_tokenizer(
    *, kind: str = "byte_level", added_tokens: Sequence[str] = (), special_tokens: Sequence[str] = ("</s>",)
) -> object:
    """A ``transformers`` fast tokenizer with a BPE model trained locally on a fixed corpus (no download).

    Parameters
    ----------
    kind : {"byte_level", "metaspace"}
        ``byte_level``: GPT-2 style bytes (multi-byte characters span tokens, so detokenizers must hold back
        incomplete UTF-8); ``metaspace``: SentencePiece style ``▁`` word starts (decoding drops a leading space).
    added_tokens : sequence of str
        Extra non-special added tokens (e.g. ``<think>``, ``<tool_call>``): kept in decoded text.
    special_tokens : sequence of str
        Special added tokens; the first is EOS (and PAD).
    """
    check(kind in ("byte_level", "metaspace"), f"kind={kind!r} must be 'byte_level' or 'metaspace'.")
    check(
        all(isinstance(t, str) and t for t in (*added_tokens, *special_tokens)) and len(special_tokens) >= 1,
        f"added_tokens={added_tokens!r} and special_tokens={special_tokens!r} must be non-empty strings, "
        "with at least one special token (EOS).",
    )
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "byte_level":
        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        backend = Tokenizer(models.BPE(unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
        alphabet, special_tokens = sorted(set(_CORPUS) | {"▁"}), (*special_tokens, "<unk>")
    specials = [AddedToken(t, special=True, normalized=False) for t in special_tokens]
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + len(specials) + 200,
        initial_alphabet=alphabet,
        special_tokens=specials,  # ids 0.. (the model knows the unknown token)
        show_progress=False,
    )
    backend.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in added_tokens])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=special_tokens[0],
        pad_token=special_tokens[0],
        clean_up_tokenization_spaces=False,
    )
