"""A SentencePiece model that prepares its text itself: ALBERT's recipe for runtimes that have
TensorFlow Text's fast SentencePiece kernel and nothing else for strings (LiteRT).

`SentencePieceTokenizer` prepares text in Python (step 2 of its recipe: whitespace, the ``''
quotes, NFKD without combining marks, lower case) before the model's own normaliser runs. The
`prepared_model_proto` of a model folds that preparation into the normaliser: its character
map sends each code point (and each sequence the model's map already rewrites) to what
preparing and then normalising it gives, plus `` and '' to '"'. SentencePiece applies the
longest matching rule at each position of the raw text, so one fast SentencePiece op gives the
Python tokenizer's pieces, except where preparing the whole text differs from preparing each
character:

- a capital sigma that ends a word lower-cases to "σ", not "ς" (`str.lower` looks at its
  neighbours);
- a combining mark between two characters that compose (Hangul jamo, the two parts of some
  Indic vowels) keeps them apart, where the Python tokenizer drops the mark and the model's
  normaliser composes them;
- invalid UTF-8 is not replaced by U+FFFD first (the pieces around a bad byte may differ).

Step 1 (special pieces written in the text): SentencePiece cuts user-defined pieces out of its
normalised text whole, so each special piece gets a stand-in, a private-use code point no text
normalises to (`standin`): a control piece ([CLS], [SEP], [MASK], <pad>) is renamed to its
stand-in and made user-defined, keeping its id; the unknown piece, which cannot be, gets a
user-defined piece of its stand-in after the vocabulary (`unknown_standin_id`), for the graph to
map to the unknown id. A rule turns a special piece written in the text into its stand-in and a
space, so the text after one starts a word as it does when the Python tokenizer segments it
alone; the lone word start SentencePiece leaves before one (`word_start_id`) is for the graph
to drop. A stand-in written in the text becomes another private-use code point, unknown to the
model as it is to the Python tokenizer. A model without a lone word-start piece, or with a
stand-in among its pieces, keeps step 1 as text (`special_ids` is empty).

Step 4 (digits before a comma) is a table over the vocabulary (`id_table`, with the unknown's
stand-in), the replacement of each id by itself, which a graph applies with gathers and a
cumulative sum.

Needs sentencepiece >= 0.2.2 (its normaliser reads and compiles rule maps).
"""

import functools
import os

import numpy as np

from bert_tf import quiet_logs
from bert_tf.protobuf_wire import bytes_field, varint_field
from bert_tf.protobuf_wire import fields as _wire_fields
from bert_tf.text.sentencepiece import WORD_START, import_library, prepare_characters

# Fields of SentencePiece's ModelProto, SentencePiece and NormalizerSpec
# (sentencepiece_model.proto).
_MODEL_PIECES, _MODEL_NORMALIZER, _MODEL_SELF_TEST = 1, 3, 4
_PIECE_TEXT, _PIECE_TYPE, _TYPE_USER_DEFINED = 1, 3, 4
# The special pieces' stand-ins (private-use code points from here on, in id order) and what
# a stand-in written in the text becomes instead.
_STANDIN_BASE, _STANDIN_ELSEWHERE = 0x10F000, "\U0010fffd"
_NORMALIZER_NAME, _NORMALIZER_CHARSMAP, _NORMALIZER_TSV = 1, 2, 6
_NORMALIZER_REMOVES_SPACES = 4
_PREPARED_NAME = b"bert_tf_prepared"


def _fields(buf):
    """A message of the model proto: its fields (protobuf_wire.fields), errors naming it."""
    return _wire_fields(buf, "SentencePiece model")


def _normalizer_spec(model_proto):
    """The NormalizerSpec's fields: dict number -> value."""
    spec = next((v for n, v, _ in _fields(model_proto) if n == _MODEL_NORMALIZER), b"")
    return {n: v for n, v, _ in _fields(spec)}


# Why a model whose normaliser keeps whitespace runs has no prepared model.
KEEPS_WHITESPACE = ("the model's normaliser keeps runs of whitespace (normalizer_spec."
                    "remove_extra_whitespaces is off), which ALBERT's preparation collapses")


def removes_extra_whitespace(model_proto):
    """Whether the model's normaliser collapses whitespace runs (SentencePiece's default,
    ALBERT's and T5's models): the prepared model relies on it for the Python tokenizer's
    whitespace rule."""
    return bool(_normalizer_spec(model_proto).get(_NORMALIZER_REMOVES_SPACES, 1))


def _with_charsmap(model_proto, charsmap):
    """The model with its normaliser's character map replaced (and renamed; its rule text and
    self-test samples, which describe the old map, dropped). A model without a normaliser
    (SentencePiece's defaults) gets one."""
    fields = _fields(model_proto)
    if not any(number == _MODEL_NORMALIZER for number, _, _ in fields):
        fields.append((_MODEL_NORMALIZER, b"", b""))
    out = bytearray()
    for number, value, raw in fields:
        if number == _MODEL_SELF_TEST:
            continue
        if number != _MODEL_NORMALIZER:
            out += raw
            continue
        spec = bytearray(bytes_field(_NORMALIZER_NAME, _PREPARED_NAME)
                         + bytes_field(_NORMALIZER_CHARSMAP, charsmap))
        for n, _, field in _fields(value):
            if n not in (_NORMALIZER_NAME, _NORMALIZER_CHARSMAP, _NORMALIZER_TSV):
                spec += field
        out += bytes_field(_MODEL_NORMALIZER, bytes(spec))
    return bytes(out)


_USER_DEFINED = varint_field(_PIECE_TYPE, _TYPE_USER_DEFINED)


def _user_defined_piece(text, fields=()):
    """A SentencePiece message: `text`, user-defined, with the other `fields` (raw) kept."""
    return bytes_field(_MODEL_PIECES, bytes_field(_PIECE_TEXT, text.encode("utf-8"))
                        + b"".join(fields) + _USER_DEFINED)


def _with_standins(model_proto, renamed, new_piece=None):
    """The model with the pieces of `renamed` (dict id -> text) renamed and user-defined, and
    a user-defined piece of the text `new_piece` after the others when given."""
    fields = _fields(model_proto)
    last = max(k for k, (number, _, _) in enumerate(fields) if number == _MODEL_PIECES)
    out, index = bytearray(), 0
    for k, (number, value, raw) in enumerate(fields):
        if number == _MODEL_PIECES:
            if index in renamed:
                raw = _user_defined_piece(renamed[index], [
                    field for n, _, field in _fields(value) if n not in (_PIECE_TEXT,
                                                                          _PIECE_TYPE)])
            index += 1
        out += raw
        if k == last and new_piece is not None:
            out += _user_defined_piece(new_piece)
    return bytes(out)


def word_start_id(tokenizer):
    """The id of the lone word-start piece ("\u2581"), or None."""
    return tokenizer.vocab.get(WORD_START)


def standin(index):
    """The stand-in of the `index`-th of `special_ids`: str (one private-use code point)."""
    return chr(_STANDIN_BASE + index)


def special_ids(tokenizer):
    """The special pieces (control pieces and the unknown piece) the prepared model cuts out of
    the text, in id order: tuple of int; empty when the model keeps step 1 as text (no lone
    word-start piece, or a stand-in among its pieces)."""
    ids = tuple(sorted(i for i in tokenizer.special_token_ids if tokenizer.inv_vocab[i].strip()))
    standins = [standin(k) for k in range(len(ids))] + [_STANDIN_ELSEWHERE]
    if word_start_id(tokenizer) is None or any(s in tokenizer.vocab for s in standins):
        return ()
    return ids


def unknown_standin_id(tokenizer):
    """The id of the prepared model's piece for "<unk>" written in the text (vocab_size: one
    past the vocabulary), or None when the model keeps step 1 as text."""
    return tokenizer.vocab_size if tokenizer.unk_id in special_ids(tokenizer) else None


def standin_ids(tokenizer):
    """The ids of the prepared model's stand-ins: frozenset of int (the control pieces' ids,
    and `unknown_standin_id`)."""
    ids = set(special_ids(tokenizer)) - {tokenizer.unk_id}
    unknown = unknown_standin_id(tokenizer)
    return frozenset(ids if unknown is None else ids | {unknown})


@functools.lru_cache(maxsize=2)  # a model cased and uncased
def _prepared(model_proto, do_lower_case, specials, unknown):
    """specials: ((id, text), ...) of `special_ids`; unknown: the unknown piece's id."""
    sentencepiece = import_library()
    if not hasattr(getattr(sentencepiece, "SentencePieceNormalizer", None), "Decompile"):
        raise ImportError("A SentencePiece model for LiteRT needs sentencepiece >= 0.2.2: "
                          "pip install 'sentencepiece>=0.2.2'")
    # The model's own normalisation of a text, without its whitespace handling (prepared text
    # has none left to do; the prepared model keeps the model's flags).
    normalize = sentencepiece.SentencePieceNormalizer(
        model_proto=model_proto, add_dummy_prefix=False, escape_whitespaces=False,
        remove_extra_whitespaces=False).Normalize
    # Decompile fails on a model without a character map (an identity normaliser).
    own_rules = ([source for source, _ in
                  sentencepiece.SentencePieceNormalizer(model_proto=model_proto).Decompile()]
                 if _normalizer_spec(model_proto).get(_NORMALIZER_CHARSMAP) else [])
    chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    spaces = {ord(c): " " for c in chars if c.isspace()}

    def prepare_each(texts):
        # Whitespace becomes one space (the normaliser then collapses runs and strips the
        # ends, as the Python tokenizer's preparation does). Prepared in one string: NUL stops
        # NFKD's reordering and the final-sigma context, so each part is prepared alone.
        joined = "\x00".join(texts).translate(spaces)
        return prepare_characters(joined, do_lower_case).split("\x00")

    # A character that preparing leaves alone and the model's map does not rewrite needs no
    # rule.
    own_chars = {s for s in own_rules if len(s) == 1}
    changed = [(c, p) for c, p in zip(chars, prepare_each(chars)) if p != c or c in own_chars]
    rules = {c: t for (c, _), t in zip(changed, normalize([p for _, p in changed])) if t != c}
    sequences = [s for s in own_rules if len(s) > 1]
    rules.update(zip(sequences, normalize(prepare_each(sequences))))
    quotes = ["``", "''"]
    rules.update(zip(quotes, normalize(prepare_each(quotes))))
    for k, (_, text) in enumerate(specials):
        rules.update({text: standin(k) + " ", standin(k): _STANDIN_ELSEWHERE})
    # Compiling a map logs two INFO lines (its sizes) that only TF_CPP_MIN_LOG_LEVEL=0 asks for.
    sentencepiece.set_min_log_level(quiet_logs.min_log_level()
                                    if "TF_CPP_MIN_LOG_LEVEL" in os.environ else 1)
    try:
        spec = sentencepiece.SentencePieceNormalizer(
            norm_map=sorted(rules.items())).serialized_normalizer_spec()
    finally:
        sentencepiece.set_min_log_level(quiet_logs.min_log_level())
    charsmap = next(v for n, v, _ in _fields(spec) if n == _NORMALIZER_CHARSMAP)
    renamed = {i: standin(k) for k, (i, _) in enumerate(specials) if i != unknown}
    unknown_piece = next((standin(k) for k, (i, _) in enumerate(specials) if i == unknown),
                         None)
    return _with_standins(_with_charsmap(model_proto, charsmap), renamed, unknown_piece)


def prepared_model_proto(tokenizer):
    """The model of a `SentencePieceTokenizer` with its step 2 inside the normaliser.

    Args:
      tokenizer: a `bert_tf.text.sentencepiece.SentencePieceTokenizer`.

    Returns:
      bytes: a SentencePiece model (its pieces' ids and scores unchanged, its control pieces
      renamed to user-defined stand-ins, one more piece at `unknown_standin_id`, when
      `special_ids` is not empty) whose segmentation of raw text is the tokenizer's steps 1 to
      3 once the lone word start before a user-defined piece is dropped and the unknown's
      stand-in mapped to the unknown id (see the module docstring for where it differs).

    Raises:
      ValueError: the model's normaliser keeps whitespace runs (remove_extra_whitespaces off),
        which the Python tokenizer collapses.
      ImportError: sentencepiece older than 0.2.2.
    """
    if not removes_extra_whitespace(tokenizer.model_proto):
        raise ValueError(f"{tokenizer.source}: {KEEPS_WHITESPACE}; no prepared model "
                         "reproduces that.")
    specials = tuple((i, tokenizer.inv_vocab[i]) for i in special_ids(tokenizer))
    return _prepared(tokenizer.model_proto, tokenizer.do_lower_case, specials,
                     tokenizer.unk_id)


def id_table(tokenizer):
    """What each id of the prepared model becomes: step 4 of a `SentencePieceTokenizer` per
    id, and the unknown's stand-in (`unknown_standin_id`, when there is one) the unknown id.

    Returns:
      (table, counts): int32 [V', K], row i the ids piece i becomes (itself, or its digits'
      pieces and ","), padded with -1; int32 [V'], how many of row i are used (>= 1). V' is
      the vocabulary's size, plus one with the unknown's stand-in.
    """
    rows = [[i] if i in tokenizer.special_token_ids else
            tokenizer.convert_tokens_to_ids(tokenizer.cut_digit_commas([piece]))
            for i, piece in enumerate(tokenizer.inv_vocab)]
    if unknown_standin_id(tokenizer) is not None:
        rows.append([tokenizer.unk_id])
    table = np.full([len(rows), max(len(r) for r in rows)], -1, np.int32)
    for i, row in enumerate(rows):
        table[i, :len(row)] = row
    return table, np.array([len(r) for r in rows], np.int32)
