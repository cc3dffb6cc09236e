"""The set-up of the candidate generators transformers 5.25 selects beyond assisted generation and prompt lookup, one
class per mode of ``TransformersDecoder`` (``OWN_SETUP``), with the models each needs built from seeded specs beside
the checkpoint family's target (never from a hub).

Line numbers refer to transformers 5.25.0 as installed (``generation/utils.py`` = U, ``generation/
candidate_generator.py`` = C). ``GenerationMixin._get_candidate_generator`` (U:1297-1418) picks, in this order:
``EarlyExitCandidateGenerator`` when ``assistant_early_exit`` is set (U:1313), prompt lookup (U:1322),
``MTPCandidateGenerator`` when ``use_mtp`` (U:1336), ``SinglePositionMultiTokenCandidateGenerator`` for a Gemma 4
assistant (U:1346-1360), ``DFlashTokenCandidateGenerator`` when ``speculation_type == "dflash"`` (U:1361), the two
different-tokenizer generators when ``tokenizer`` and ``assistant_tokenizer`` are both passed (U:1311, 1369-1407:
``UniversalSpeculativeDecodingGenerator`` when sampling, ``AssistedCandidateGeneratorDifferentTokenizers`` when
greedy), else ``AssistedCandidateGenerator``.

- ``EarlyExit`` (mode ``early_exit``): the target drafts for itself with its first ``exit_layer`` layers, its final
  norm and LM head (C:1178-1234: ``get_candidates`` sets ``base_model.config.num_hidden_layers`` to the exit layer
  around an assisted ``generate`` of the model itself; Llama's forward runs ``self.layers[:num_hidden_layers]``,
  models/llama/modeling_llama.py:393). The drafting model is the target object, so γ, the constant schedule and the
  confidence threshold 0 are set on the *target's* ``generation_config`` (C:115-119 read them from the assistant,
  which is the target). The draft keeps its own ``DynamicCache`` (C:126-130 leave the target's cache out). The
  family's target has one layer, so the only early exit is ``exit_layer=0``: embeddings → final norm → LM head (a
  law of the last token only); a toy model has no layers and is refused.
- ``Universal`` (mode ``universal``): the draft is the family's draft with a **second tokenizer over the same strings
  with other ids** plus one string the target lacks (``"aa"``; a tokenizer with a merge the target does not have),
  the draft checkpoint rewritten to those ids (``universal_draft_dir``: embedding and LM-head rows permuted, one
  seeded row added). Its vocabulary size therefore differs from the target's, which transformers requires before it
  takes the different-tokenizer path (U:1906-1917: equal sizes with an ``assistant_tokenizer`` are refused as "not
  required"; the refusal is pinned in the tests). At temperature > 0 transformers runs USD (U:1371-1393): the
  assistant's LM head is pruned to the strings both vocabularies hold (C:739-757), its drafts are mapped id by id
  (C:816-835) and its logits spread onto the target's vocabulary with -inf elsewhere (C:837-854), so speculative
  sampling sees a true draft law. At temperature 0 it runs ``AssistedCandidateGeneratorDifferentTokenizers``
  (U:1394-1404): text round trips through both tokenizers (C:492-509, 559-637) and greedy matching. Both tokenizers
  handed to ``generate`` are Unigram models (equal scores, so the fewest pieces win), the target's with the
  family's own id table: the family's word-level tokenizer cannot encode a concatenation ("ab" + "a" is the text
  "aba", no word of its table; its ``unk_token`` is not in the table), which the text round trips need (pinned in
  the tests).

  ``AssistedCandidateGeneratorDifferentTokenizers`` bounds the *assistant's* new tokens by ``num_assistant_tokens``
  (C:524) and hands back as many *target* tokens as that text re-encodes to (C:613-631), so a round can hold more
  drafts than the request's γ (docs/findings/transformers.md, finding 12). γ is therefore not the protocol's
  number of drafts on that path, and the decoder reports no ``accepted`` for its calls (``UNBOUNDED_DRAFTS``):
  the shape's acceptance is "not reported", as DESIGN's partial-capability rule asks, while USD's sampled rounds
  (one target id per assistant id) keep theirs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from specverify.errors import InvalidArgument, check

__all__ = [
    "OWN_SETUP",
    "UNBOUNDED_DRAFTS",
    "EXTRA_STRING",
    "UNIVERSAL_FORMAT",
    "universal_permutation",
    "universal_draft_dir",
]

EXTRA_STRING = "aa"  # the one string the universal draft's tokenizer holds and the target's does not
UNIVERSAL_FORMAT = 1  # bump when the universal draft's recipe changes: part of its directory's hash
_SEED = 20261206


def _need_checkpoint(model, mode: str, role: str = "target") -> Path:
    path = getattr(model, "path", None)
    if path is None:
        raise InvalidArgument(
            f"{role}={model!r}: mode {mode!r} needs a checkpoint model (CheckpointPairSpec(...).build()); a toy model "
            "has no layers, embeddings or tokenizer for this generator to use. Certify it with --models checkpoint."
        )
    return Path(path)


class _Setup:
    """What a mode adds to ``TransformersDecoder``: its models, its ``generate()`` arguments and what it ran."""

    model: object
    assistant: object = None

    def configure(self, config, kwargs: dict, request) -> None:  # the GenerationConfig and generate() kwargs
        raise NotImplementedError

    def before_call(self, request) -> None:
        pass

    def effective(self) -> dict:
        return {}


class EarlyExit(_Setup):
    def __init__(self, target, draft, decoder):
        _need_checkpoint(target, "early_exit")
        self.model = decoder.load_model(target, "target")
        layers = int(self.model.config.num_hidden_layers)
        check(
            decoder.exit_layer < layers,
            f"exit_layer={decoder.exit_layer!r} must be below the target's {layers} layers (an exit at the last "
            "layer drafts with the target itself); e.g. --engine-option exit_layer=0.",
        )
        self.exit_layer = decoder.exit_layer
        self.layers = layers

    def configure(self, config, kwargs, request) -> None:
        config.assistant_early_exit = self.exit_layer

    def before_call(self, request) -> None:
        from specverify.adapters.transformers import hooks

        hooks.set_draft_length(self.model, request.num_draft_tokens)  # the drafting model is the target (C:115-119)

    def effective(self) -> dict:
        return {"exit_layer": self.exit_layer, "target_layers": self.layers}


# ------------------------------------------------------------------------------------------------- universal


def universal_permutation(size: int) -> list:
    """``perm[target_id]`` = the universal draft's id of the target's string ``target_id`` (seeded, EOS included);
    the draft's extra string takes the id ``size`` (the last)."""
    check(isinstance(size, int) and size >= 2, f"size={size!r} must be an int >= 2 (a vocabulary size).")
    perm = np.random.default_rng(_SEED).permutation(size)
    if (perm == np.arange(size)).all():  # never the identity: the ids must differ
        perm = np.roll(perm, 1)
    return [int(i) for i in perm]


def _unigram_tokenizer(table: dict, eos_text: str):
    """A fast tokenizer: a Unigram model over ``table`` ({string: id}, ids 0..n-1), equal scores, EOS special."""
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    pieces = sorted(table.items(), key=lambda kv: kv[1])
    check([i for _, i in pieces] == list(range(len(pieces))), f"table={table!r} must hold the ids 0..n-1.")
    backend = Tokenizer(models.Unigram([(text, -1.0) for text, _ in pieces], unk_id=None))
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens([AddedToken(eos_text, special=True, normalized=False)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos_text,
        bos_token=eos_text,
        pad_token=eos_text,
        clean_up_tokenization_spaces=False,
    )


def target_table(vocab) -> dict:
    """The target's {string: id} table (the family's, EOS as ``</s>``)."""
    from specverify.oracles.checkpoint_tokenizer import EOS_TOKEN

    return {(EOS_TOKEN if i == vocab.eos_token_id else text): i for i, text in enumerate(vocab.strings)}


def draft_table(vocab) -> dict:
    """The universal draft's {string: id} table: the target's strings at ``universal_permutation`` ids, plus
    ``EXTRA_STRING`` at the last id."""
    perm = universal_permutation(vocab.size)
    table = {text: perm[i] for text, i in target_table(vocab).items()}
    check(EXTRA_STRING not in table, f"EXTRA_STRING={EXTRA_STRING!r} must not be a target string.")
    table[EXTRA_STRING] = vocab.size
    return table


def universal_draft_dir(draft_path: Path, vocab) -> Path:
    """The family draft at ``draft_path`` rewritten to ``draft_table(vocab)`` (rows permuted, one seeded row for the
    extra string), with that tokenizer, cached beside the checkpoints as ``universal-<hash>`` (written once)."""
    from safetensors.numpy import load_file

    from specverify.oracles.checkpoint import cache_root, publish_directory

    draft_path = Path(draft_path)
    digest = hashlib.sha256(f"{draft_path.name}|{vocab.size}|{UNIVERSAL_FORMAT}|{_SEED}".encode()).hexdigest()[:20]
    final = cache_root() / f"universal-{digest}"
    if final.is_dir():
        return final

    def write(tmp: Path) -> None:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        from specverify.oracles.checkpoint_tokenizer import quiet_transformers

        stored = load_file(str(draft_path / "model.safetensors"))
        perm = universal_permutation(vocab.size)
        rng = np.random.default_rng(_SEED)
        state = dict(stored)
        for name in ("model.embed_tokens.weight", "lm_head.weight"):
            rows = stored[name]
            out = np.empty((vocab.size + 1, rows.shape[1]), dtype=np.float32)
            out[perm] = rows
            out[vocab.size] = rng.normal(0.0, float(rows.std()), rows.shape[1])
            state[name] = out
        config = LlamaConfig.from_pretrained(str(draft_path))
        config.vocab_size = vocab.size + 1
        eos = perm[vocab.eos_token_id]
        config.bos_token_id = config.eos_token_id = config.pad_token_id = eos
        with torch.device("meta"):
            model = LlamaForCausalLM(config)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True, assign=True)
        with quiet_transformers():
            model.save_pretrained(str(tmp), safe_serialization=True)
            _unigram_tokenizer(draft_table(vocab), _eos_text()).save_pretrained(str(tmp))
        meta = {
            "source": draft_path.name,
            "permutation": perm,
            "extra_string": EXTRA_STRING,
            "format": UNIVERSAL_FORMAT,
        }
        (tmp / "specverify.json").write_text(json.dumps(meta, indent=1, sort_keys=True))

    publish_directory(final, write)
    return final


def _eos_text() -> str:
    from specverify.oracles.checkpoint_tokenizer import EOS_TOKEN

    return EOS_TOKEN


class Universal(_Setup):
    def __init__(self, target, draft, decoder):
        import torch
        from transformers import AutoModelForCausalLM

        from specverify.oracles.checkpoint_tokenizer import quiet_transformers

        _need_checkpoint(target, "universal")
        draft_path = _need_checkpoint(draft, "universal", "draft")
        check(
            draft.vocab.size == target.vocab.size,
            f"draft vocab size {draft.vocab.size!r} must equal the target's {target.vocab.size!r} (the universal "
            "draft is the family draft rewritten to other ids).",
        )
        self.model = decoder.load_model(target, "target")
        self.path = universal_draft_dir(draft_path, target.vocab)
        with quiet_transformers():
            self.assistant = AutoModelForCausalLM.from_pretrained(
                str(self.path), dtype=torch.float32, attn_implementation="eager"
            ).eval()
        self.target_tokenizer = _unigram_tokenizer(target_table(target.vocab), _eos_text())
        self.assistant_tokenizer = _unigram_tokenizer(draft_table(target.vocab), _eos_text())
        self.fresh = decoder.assistant_cache == "fresh"
        self.greedy_assistant = self.assistant
        if self.fresh:  # before any pruning: USD prunes the assistant it is given in place (_fresh_assistant_cache)
            import copy

            self.greedy_assistant = copy.deepcopy(self.assistant)
            _fresh_assistant_cache(self.model)
        self.translator = decoder.translator
        if self.translator == "id-order":
            _id_ordered_translator(self.target_tokenizer, self.assistant_tokenizer, self.model, self.assistant)

    def configure(self, config, kwargs, request) -> None:
        kwargs["assistant_model"] = self.assistant if config.do_sample else self.greedy_assistant
        kwargs["tokenizer"] = self.target_tokenizer
        kwargs["assistant_tokenizer"] = self.assistant_tokenizer

    def before_call(self, request) -> None:
        from specverify.adapters.transformers import hooks

        hooks.set_draft_length(self.assistant, request.num_draft_tokens)
        hooks.set_draft_length(self.greedy_assistant, request.num_draft_tokens)

    def effective(self) -> dict:
        out = {"draft_checkpoint": self.path.name, "extra_draft_string": EXTRA_STRING}
        workaround = {}
        if self.fresh:
            workaround["greedy_assistant"] = "an unpruned copy, its cache dropped every round, its own processors"
        if self.translator == "id-order":
            workaround["usd_target_logits"] = "scattered in the pruned head's order"
        if workaround:
            out["workaround"] = workaround
        return out


def _id_ordered_translator(target_tokenizer, assistant_tokenizer, model, assistant) -> None:
    """The opt-in local patch for USD's logits (docs/findings/transformers.md). ``AssistantToTargetTranslator`` prunes
    the assistant's LM head to ``assistant_overlap_token_ids``, the values of ``target_to_assistant_input_ids`` in
    the order ``assistant_tokenizer.get_vocab()`` iterates (C:739-745, 787-795), so pruned logit i belongs to
    assistant id ``overlap[i]``, which is also how a drafted index is mapped (C:830-834); but
    ``get_target_logits`` scatters pruned logit i to the target id of the i-th *smallest* mapped assistant id
    (``_assistant_to_target_input_ids[mask]``, C:843-852). Unless ``get_vocab()`` happens to iterate by ascending
    id, the draft law speculative sampling is told (q) is a permutation of the one the drafts come from, and the
    output law is not the target's. The patch: build the translator transformers will reuse
    (``AssistantVocabTranslatorCache.get_translator`` with the arguments of generation/utils.py:1372-1378, cached
    per tokenizer pair) and replace its ``get_target_logits`` on that instance with one that scatters pruned logit
    i to ``_assistant_to_target_input_ids[overlap[i]]``. No transformers file changes."""
    import torch
    from transformers.generation.candidate_generator import AssistantVocabTranslatorCache

    translator = AssistantVocabTranslatorCache.get_translator(
        target_tokenizer,
        assistant_tokenizer,
        model.config.get_text_config().vocab_size,
        assistant_model=assistant,
        assistant_prune_lm_head=True,
    )
    check(translator.assistant_prune_lm_head, "the universal draft's extra string must make transformers prune.")

    def get_target_logits(assistant_logits):
        shape = (*assistant_logits.shape[:-1], translator.target_vocab_size)
        out = torch.full(shape, translator.FILTER_VALUE, device=assistant_logits.device)
        out[..., translator._assistant_to_target_input_ids[translator.assistant_overlap_token_ids]] = assistant_logits
        return out

    translator.get_target_logits = get_target_logits


def translator_orders(target_tokenizer, assistant_tokenizer, vocab_size: int, assistant) -> tuple:
    """``(drafted, placed)``: for each pruned index i, the target id a draft of i becomes (C:830-834) and the target
    id whose draft probability ``get_target_logits`` gives logit i (C:843-852), from a fresh translator over a copy
    of ``assistant`` (the finding's reproducer; equal lists mean USD's q is right)."""
    import copy

    from transformers.generation.candidate_generator import AssistantToTargetTranslator

    translator = AssistantToTargetTranslator(
        target_tokenizer, assistant_tokenizer, vocab_size, copy.deepcopy(assistant), assistant_prune_lm_head=True
    )
    a2t = translator._assistant_to_target_input_ids
    drafted = [int(a2t[i]) for i in translator.assistant_overlap_token_ids.tolist()]
    placed = [int(t) for t in a2t[a2t != translator.SUPPRESS_TOKEN_ID].tolist()]
    return drafted, placed


def _fresh_assistant_cache(model) -> None:
    """The opt-in workaround for the greedy different-tokenizer generator (docs/findings/transformers.md), in two
    parts. (1) Its own assistant: a sampled call prunes the assistant model it is given *in place*
    (``AssistantVocabTranslatorCache.get_translator(..., assistant_prune_lm_head=True)``, generation/utils.py:
    1372-1378, sets a pruned LM head and a ``_MapInputEmbedding`` that embeds only the last token once mapping is on,
    C:746-757, 678-693), after which a greedy call with that model raises (a shape error in attention); so
    ``Universal`` hands greedy calls an unpruned copy made before any sampled call. (3) Its logits processors: the
    generator hands the *target's* processor instances to the assistant (C:172, 316-324); ``NoBadWordsLogitsProcessor``
    sizes its bias once, on the first scores it sees (logits_process.py:1322-1323, 1344), which are the assistant's
    (vocabulary V + 1), so the target's verification (U:4116) raises "The size of tensor a (6) must match the size
    of tensor b (7)" whenever a bad token is set; each generator gets shallow copies (their bias prepared on their
    own scores; the ids, the target's, then mask other strings of the draft: drafts only). (2) Its cache:
    ``AssistedCandidateGeneratorDifferentTokenizers.get_candidates`` records ``_last_ids_length`` in *target* tokens
    (C:552-555) while ``_update_past_and_masks`` subtracts the *assistant's* input length from it (C:299-305) and
    crops only when the result is >= 0: where the two tokenizers segment the text differently the assistant's
    cache keeps stale drafts and outgrows its input, until the assistant's forward gets no new token and raises
    ("cannot reshape tensor of 0 elements"). Here each of that generator's rounds starts without an assistant
    cache (the assistant re-reads its whole input; drafts are then those of a correct cache). Installed on the
    target *instance* over the round hook (``hooks.install_round_hook``); no transformers code changes."""
    from specverify.adapters.transformers import hooks

    hooks.install_round_hook(model)
    inner = model._get_candidate_generator

    def _get_candidate_generator(*args, **kwargs):
        generator = inner(*args, **kwargs)
        if type(generator).__name__ == "AssistedCandidateGeneratorDifferentTokenizers":
            import copy

            # (3) its own processor instances: a vocabulary-sized one (NoBadWordsLogitsProcessor) sizes its bias
            # on the first scores it sees, and the target's instances are handed to the assistant (C:172, 316-324)
            generator.logits_processor = [copy.copy(processor) for processor in generator.logits_processor]
            original = generator.get_candidates

            def get_candidates(input_ids, *a, **k):
                generator.assistant_kwargs["cache"] = None
                return original(input_ids, *a, **k)

            generator.get_candidates = get_candidates
        return generator

    object.__setattr__(model, "_get_candidate_generator", _get_candidate_generator)


# ------------------------------------------------------------------------------------------------- MTP


MTP_FORMAT = 1  # bump when the MTP target's recipe changes: part of its directory's hash


def mtp_target_dir(target_path: Path) -> Path:
    """The family target at ``target_path`` with one multi-token-prediction layer added (config ``num_mtp_layers``
    = 1; weights ``model.layers.<L>.*`` for the target's L layers, the layout ``MtpModel.get_weight_conversions``
    renames to ``layers.0.mtp_block.*``, transformers/modeling_layers.py:637-656), cached beside the checkpoints as
    ``mtp-<hash>``. The Llama weights are the target's, unchanged (the law is the target's); the MTP layer is
    derived, not drawn: its block is the target's last layer, ``eh_proj`` = [I | 0] (the new token's normalised
    embedding; the hidden state is read but weighted 0) and unit norms, so it drafts like the target run over the
    sequence shifted by one token, without a fit."""
    from safetensors.numpy import load_file, save_file

    from specverify.oracles.checkpoint import cache_root, publish_directory

    target_path = Path(target_path)
    digest = hashlib.sha256(f"{target_path.name}|{MTP_FORMAT}".encode()).hexdigest()[:20]
    final = cache_root() / f"mtp-{digest}"
    if final.is_dir():
        return final

    def write(tmp: Path) -> None:
        import shutil

        config = json.loads((target_path / "config.json").read_text())
        layers = int(config["num_hidden_layers"])
        for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
            if (target_path / name).is_file():
                shutil.copy(target_path / name, tmp / name)
        state = load_file(str(target_path / "model.safetensors"))
        hidden = state["model.norm.weight"].shape[0]
        last = f"model.layers.{layers - 1}."
        mtp = f"model.layers.{layers}."
        for name in [k for k in state if k.startswith(last)]:
            state[mtp + name[len(last) :]] = state[name].copy()
        state[mtp + "enorm.weight"] = np.ones(hidden, dtype=np.float32)
        state[mtp + "hnorm.weight"] = np.ones(hidden, dtype=np.float32)
        state[mtp + "post_norm.weight"] = np.ones(hidden, dtype=np.float32)
        state[mtp + "eh_proj.weight"] = np.concatenate([np.eye(hidden), np.zeros((hidden, hidden))], 1).astype(
            np.float32
        )
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        config["num_mtp_layers"] = 1
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
        meta = {"source": target_path.name, "mtp_layers": 1, "format": MTP_FORMAT}
        (tmp / "specverify.json").write_text(json.dumps(meta, indent=1, sort_keys=True))

    publish_directory(final, write)
    return final


class Mtp(_Setup):
    """``MTPCandidateGenerator`` (C:1391-1525). Its ``MtpModel.from_pretrained`` finds the MTP weights by the
    patterns the target class lists in ``_keys_to_ignore_on_load_unexpected`` (modeling_layers.py:619-636); Llama
    lists none (an empty set, modeling_utils.py:1308), so as shipped a Llama target is refused ("does not seem to
    register any known MTP layer patterns", modeling_layers.py:634), and the classes that list patterns name fixed
    layer numbers of their released checkpoints (e.g. DeepSeek-V3 ``model\\.layers\\.61.*``,
    models/deepseek_v3/modeling_deepseek_v3.py:536), which a one-layer target cannot carry. The opt-in workaround,
    recorded in ``engine_info["effective"]["workaround"]``: the loaded target *instance* lists the pattern of its
    MTP layer. No transformers code changes."""

    def __init__(self, target, draft, decoder):
        import torch
        from transformers import AutoModelForCausalLM

        from specverify.oracles.checkpoint_tokenizer import quiet_transformers

        target_path = _need_checkpoint(target, "mtp")
        self.path = mtp_target_dir(target_path)
        with quiet_transformers():
            self.model = AutoModelForCausalLM.from_pretrained(
                str(self.path), dtype=torch.float32, attn_implementation="eager"
            ).eval()
        layers = int(self.model.config.num_hidden_layers)
        self.pattern = rf"model\.layers\.{layers}\..*"
        self.model._keys_to_ignore_on_load_unexpected = {self.pattern}  # the workaround (class docstring)

    def configure(self, config, kwargs, request) -> None:
        config.use_mtp = True

    def effective(self) -> dict:
        return {
            "target_checkpoint": self.path.name,
            "mtp_layers": 1,
            "workaround": {"mtp_weights_pattern": self.pattern},
        }


# ------------------------------------------------------------------------------------------------- DFlash


def dflash_draft(model):
    """A one-layer DFlash drafter for the Llama ``model`` (``MuseGlimmerAssistantModel``, the one DFlash draft class
    transformers 5.25 ships: models/muse_glimmer_assistant/modeling_muse_glimmer_assistant.py:360-447), built in
    memory from the target's weights (deterministic, no fit): its layer's projections and MLP are the target's
    layer 0, QK norms and the other norms are 1, the context projection ``encoder.fc`` is the identity;
    ``target_layer_ids`` = [0] (the target's layer-0 output, DFlash's ``hidden_states[i + 1]``, C:1630-1636),
    ``mask_token_id`` = EOS (the noise slots' input; a real EOS never reaches the drafter, it ends the request), full
    (not sliding) attention. The block size is set per call to γ + 1 (``Dflash.before_call``): the drafter proposes
    ``block_size - 1`` tokens (C:1672-1675)."""
    import torch
    from transformers.models.muse_glimmer_assistant import MuseGlimmerAssistantConfig, MuseGlimmerAssistantModel

    tc = model.config
    eos = int(tc.eos_token_id)
    config = MuseGlimmerAssistantConfig(
        hidden_size=tc.hidden_size,
        intermediate_size=tc.intermediate_size,
        num_hidden_layers=1,
        num_attention_heads=tc.num_attention_heads,
        num_key_value_heads=tc.num_key_value_heads,
        head_dim=tc.head_dim,
        rms_norm_eps=tc.rms_norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": float(tc.rope_parameters["rope_theta"])},
        max_position_embeddings=tc.max_position_embeddings,
        sliding_window=tc.max_position_embeddings,
        layer_types=["full_attention"],
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        block_size=2,
        mask_token_id=eos,
        target_layer_ids=[0],
    )
    config._attn_implementation = "eager"
    torch.manual_seed(_SEED)  # the weights below overwrite every random initialisation; seeded all the same
    draft = MuseGlimmerAssistantModel(config).eval()
    source = model.model.layers[0]
    with torch.no_grad():
        layer = draft.layers[0]
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(layer.self_attn, name).weight.copy_(getattr(source.self_attn, name).weight)
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(layer.mlp, name).weight.copy_(getattr(source.mlp, name).weight)
        for norm in (
            layer.input_layernorm,
            layer.post_attention_layernorm,
            layer.self_attn.q_norm,
            layer.self_attn.k_norm,
            draft.norm,
            draft.encoder.output_norm_enc,
        ):
            norm.weight.fill_(1.0)
        draft.encoder.fc.weight.copy_(torch.eye(tc.hidden_size))
    return draft


class Dflash(_Setup):
    """``DFlashTokenCandidateGenerator`` (C:1528-1716) with the drafter of ``dflash_draft``."""

    def __init__(self, target, draft, decoder):
        _need_checkpoint(target, "dflash")
        self.model = decoder.load_model(target, "target")
        self.assistant = dflash_draft(self.model)

    def configure(self, config, kwargs, request) -> None:
        config.speculation_type = "dflash"
        kwargs["assistant_model"] = self.assistant

    def before_call(self, request) -> None:
        self.assistant.config.block_size = int(request.num_draft_tokens) + 1  # γ drafts a round (C:1572, 1672)

    def effective(self) -> dict:
        return {"drafter": type(self.assistant).__name__, "target_layer_ids": [0], "mask_token_id": "eos"}


OWN_SETUP = {"early_exit": EarlyExit, "universal": Universal, "mtp": Mtp, "dflash": Dflash}
# candidate generators whose rounds may hold more drafts than the request's γ (module docstring): no ``accepted``
UNBOUNDED_DRAFTS = frozenset({"AssistedCandidateGeneratorDifferentTokenizers"})
PREFILL_ROUND = ("mtp", "dflash")  # the first round verifies no candidate (C:1450-1451, 1618-1619): the prefill


# ------------------------------------------------------------------------------------------------- single position


class GemmaPair:
    """A tiny seeded Gemma 4 pair for ``SinglePositionMultiTokenCandidateGenerator`` (which needs a Gemma 4 target
    and a Gemma 4 assistant, C:1284-1292, U:1346-1354; no Llama of the checkpoint family can stand in):
    ``target`` (``Gemma4ForCausalLM``, two layers, per-layer inputs on), ``assistant``
    (``Gemma4AssistantForCausalLM``, γ on its generation config), both drawn from ``torch.manual_seed(seed)``
    (transformers' own initialisation), float32; ``vocab`` the toy vocabulary of ``vocab_size`` (EOS the last id);
    ``logits(prefixes)`` the target's float64 next-token logits without a cache, the oracle interface of
    ``specverify.oracles.law.exact_law``. Not a checkpoint family: no factory certifies it; the findings page and
    ``benchmarks/transformers_generator_findings.py`` use it for the single-position generator's law."""

    def __init__(self, vocab_size: int = 8, seed: int = 0, gamma: int = 3):
        import copy

        import torch
        from transformers import (
            Gemma4AssistantConfig,
            Gemma4AssistantForCausalLM,
            Gemma4ForCausalLM,
            Gemma4TextConfig,
        )

        from specverify.oracles.models import make_vocab

        check(isinstance(gamma, int) and gamma >= 1, f"gamma={gamma!r} must be an int >= 1.")
        self.vocab = make_vocab(vocab_size)
        eos = self.vocab.eos_token_id

        def text(per_layer: bool):
            return Gemma4TextConfig(
                vocab_size=vocab_size,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=16,
                max_position_embeddings=64,
                sliding_window=16,
                layer_types=["sliding_attention", "full_attention"],
                vocab_size_per_layer_input=vocab_size if per_layer else 0,
                hidden_size_per_layer_input=0,
                pad_token_id=eos,
                eos_token_id=eos,
                bos_token_id=eos,
            )

        torch.manual_seed(seed)
        self.target = Gemma4ForCausalLM(text(True)).eval()
        config = Gemma4AssistantConfig(
            text_config=text(False), backbone_hidden_size=32, num_centroids=4, centroid_intermediate_top_k=2
        )
        self.assistant = Gemma4AssistantForCausalLM(config).eval()
        self.assistant.generation_config.num_assistant_tokens = gamma
        self._reference = copy.deepcopy(self.target).double()

    def logits(self, prefixes):
        import torch

        with torch.no_grad():
            return torch.stack([self._reference(torch.tensor([list(p)])).logits[0, -1] for p in prefixes])


def without_draft_logits(model) -> None:
    """The opt-in workaround for the single-position generator's law (docs/findings/transformers.md): its drafts
    are the assistant's argmax (C:1372) while it returns the assistant's raw logits as the draft law (C:1375-1383),
    which ``_speculative_sampling`` then treats as the law the drafts were sampled from (U:4122-4129). Returning no
    logits sends ``_assisted_decoding`` to its other branch, which samples the target at each position and keeps
    the drafts up to the first mismatch (U:4131-4150): exact for any draft. Installed on ``model``'s instance over
    its ``_get_candidate_generator``; no transformers code changes."""
    inner = model._get_candidate_generator

    def _get_candidate_generator(*args, **kwargs):
        generator = inner(*args, **kwargs)
        original = generator.get_candidates

        def get_candidates(*a, **k):
            ids, _ = original(*a, **k)
            return ids, None

        generator.get_candidates = get_candidates
        return generator

    object.__setattr__(model, "_get_candidate_generator", _get_candidate_generator)
