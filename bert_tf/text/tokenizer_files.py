"""The tokenizer interface and the one entry point for a model's tokenizer file.

`Tokenizer` is what every Python tokenizer of bert_tf implements: `WordpieceTokenizer` (a
vocab.txt, or a WordPiece tokenizer.json), `BpeTokenizer` (a byte-level BPE tokenizer.json) and
`SentencePieceTokenizer` (a SentencePiece model, `*.model`, as ALBERT tokenizes with it).
Callers ask the tokenizer (its casing, digest, how a word or a corpus line encodes, whether
pieces map back to characters) instead of testing its type or its file's name;
`load_tokenizer` builds either from a file and `tokenizer_layer` gives its in-graph layer (whose
methods answer the same way inside the graph). This module is the one place that tells the
kinds apart: a tokenizer.json by its name (`is_tokenizer_json`), BPE by its model type, a
SentencePiece model by its name (`is_sentencepiece_model`); callers
ask what follows from the kind (`casing_to_load`: whose casing a file tokenizes with;
`records_casing` and `file_casing`: whether and how a file records its casing; `vocab_size`:
its tokens; `output_name_problem`: the name a learner's file must have;
`write_tokenizer_file`: which file a model directory carries).
"""

import json
import os
from typing import Protocol

from absl import logging

from bert_tf import fileio
from bert_tf.file_names import (ALBERT_SENTENCEPIECE_FILE, SENTENCEPIECE_FILE, TOKENIZER_FILE,
                                VOCAB_FILE)
from bert_tf.fileio import write_bytes_atomic, write_text_atomic
from bert_tf.text import bpe, sentencepiece, tokenization

# A keras-hub preset's WordPiece vocabulary.
KERAS_HUB_VOCAB = os.path.join("assets", "tokenizer", "vocabulary.txt")
SPECIAL_TOKENS_MAP = "special_tokens_map.json"


class Tokenizer(Protocol):
    """A Python tokenizer from `load_tokenizer`: WordpieceTokenizer, BpeTokenizer or
    SentencePieceTokenizer.

    Attributes:
      kind: "WordPiece", "byte-level BPE" or "SentencePiece" (for messages).
      vocab_size, vocab (token -> id), inv_vocab (id -> token): the vocabulary.
      cls_id, sep_id, pad_id, mask_id, unk_id: ids of the special roles, None where a
        tokenizer.json has no such token.
      do_lower_case: whether the input is lower-cased (a vocab.txt or SentencePiece model as
        loaded; a tokenizer.json records it).
      subword_offsets: True when a piece maps back to characters inside its word (WordPiece:
        answers are cut from the text at piece offsets); False when it maps back only to the
        whitespace word it came from (byte-level BPE, SentencePiece: answers and tags are
        whole words).
    """

    kind: str
    vocab_size: int
    vocab: dict
    inv_vocab: list
    cls_id: int | None
    sep_id: int | None
    pad_id: int | None
    mask_id: int | None
    unk_id: int | None
    do_lower_case: bool
    subword_offsets: bool

    def encode(self, text):
        """Ids of a text: list of int, without [CLS]/[SEP] (see input_packing.pack_inputs)."""

    def encode_word(self, word, first=False):
        """Ids of one whitespace-separated word as it encodes inside a longer text (`first`:
        the text's first word); the words' ids in a row are the ids of the words joined by
        single spaces."""

    def encode_line(self, line):
        """Ids of one corpus line as pre-training reads it (its words inside running text)."""

    def tokenize(self, text):
        """Tokens of a text: list of str."""

    def convert_tokens_to_ids(self, tokens):
        """Ids of tokens: list of int."""

    def convert_ids_to_tokens(self, ids):
        """Tokens of ids: list of str."""

    def decode(self, ids, skip_special_tokens=False):
        """The text of ids."""

    def continuation_ids(self):
        """frozenset of the ids that continue a word (whole-word masking joins them)."""

    def span_forms(self, text):
        """The space-joined tokens a text appears as inside a longer text: set of str."""

    def digest(self):
        """Hex SHA-256 of the vocabulary the ids index (with a BPE file's merges, added tokens
        and settings): equal for the same vocabulary in a vocab.txt or a tokenizer.json."""

    def fingerprint(self):
        """Hex SHA-256 of everything the ids depend on, casing included (cache keys)."""


def copy_vocab(vocab_file, destination):
    """Copies a vocabulary (or tokenizer) file byte for byte, atomically; nothing happens when
    both name the same file."""
    if fileio.abspath(vocab_file) == fileio.abspath(destination):
        return
    with fileio.open_file(vocab_file, "rb") as f:
        write_bytes_atomic(destination, f.read())


def missing_roles(tokenizer, roles=("cls", "sep", "pad")):
    """The special roles of `roles` ("cls", "sep", "pad", "mask", "unk") a tokenizer (or its
    layer) has no token for: list of str. A tokenizer.json may lack any; by default the roles
    packing needs ([CLS] text [SEP], padded)."""
    return [role for role in roles if getattr(tokenizer, f"{role}_id") is None]


class CasingMismatch(ValueError):
    """A do_lower_case that contradicts the casing a tokenizer.json records.

    Attributes:
      file_casing: the file's casing (True: it lower-cases).
    """

    def __init__(self, message, file_casing):
        super().__init__(message)
        self.file_casing = file_casing


def special_tokens(tokenizer):
    """{role: token} of the special roles ("cls", "sep", "pad", "mask", "unk") a tokenizer has
    a token for: what a tokenizer_config.json names as <role>_token."""
    return {role: tokenizer.inv_vocab[index] for role, index in
            (("cls", tokenizer.cls_id), ("sep", tokenizer.sep_id), ("pad", tokenizer.pad_id),
             ("mask", tokenizer.mask_id), ("unk", tokenizer.unk_id)) if index is not None}


def is_tokenizer_json(path):
    """True for a tokenizer.json (it records its casing and may be byte-level BPE), False for
    a vocab.txt: every command tells them apart by the name's ".json"."""
    return str(path).endswith(".json")


def is_sentencepiece_model(path):
    """True for a SentencePiece model file: every command tells it by the name's ".model"
    (ALBERT's 30k-clean.model, Hugging Face's spiece.model)."""
    return str(path).endswith(".model")


def records_casing(path):
    """True when the tokenizer file at `path` records its casing (a tokenizer.json), False
    when whoever reads it must be told (a vocab.txt: a model directory says it beside it)."""
    return is_tokenizer_json(path)


def output_name_problem(path, tokenizer):
    """None when `path` is a name for the file a vocabulary learner writes, as every command
    tells the kinds apart by the name: a tokenizer.json for byte-level BPE, a `.model` for
    SentencePiece, a vocab.txt (any other name) for WordPiece; else what the learner writes
    and what name is expected (str).

    Args:
      path: the output file.
      tokenizer: "wordpiece", "bpe" or "sentencepiece" (bert-tf-build-vocab --tokenizer).
    """
    kind = ("bpe" if is_tokenizer_json(path) else
            "sentencepiece" if is_sentencepiece_model(path) else "wordpiece")
    if kind == tokenizer:
        return None
    if tokenizer == "bpe":
        return "writes a tokenizer.json; expected a .json name (e.g. tokenizer.json)"
    if tokenizer == "sentencepiece":
        return "writes a SentencePiece model; expected a .model name (e.g. spiece.model)"
    return "writes a vocab.txt; expected a name ending neither in .json nor in .model"


def vocab_size(path, named=None):
    """The number of tokens of the tokenizer file at `path`, whatever its kind: a vocab.txt's
    non-blank lines (counted, not checked), a tokenizer.json's or SentencePiece model's
    vocabulary (loaded, with load_tokenizer's checks).

    Args:
      path: a vocab.txt, tokenizer.json or SentencePiece model.
      named: how an error names the file (e.g. "--vocab_file=v.txt"; default the path).

    Raises:
      ValueError: starting with `named`: no such file, or a tokenizer.json or SentencePiece
        model that cannot be read.
    """
    named = named or str(path)
    if is_tokenizer_json(path) or is_sentencepiece_model(path):
        try:
            return load_tokenizer(path).vocab_size
        except (OSError, ValueError) as e:
            raise ValueError(f"{named}: {e}") from None
    problem = fileio.not_a_file(path, named)
    if problem:
        raise ValueError(problem)
    with fileio.open_file(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def file_casing(path, do_lower_case=None, named=None):
    """The casing the tokenizer file at `path` records, checked against `do_lower_case`: a
    tokenizer.json's (read); None for a vocab.txt, which records none (not read).

    Args:
      path: a vocab.txt or tokenizer.json.
      do_lower_case: the casing asked for (None: not asked).
      named: how an error names the file (e.g. "--vocab_file=t.json"; default the path).

    Raises:
      CasingMismatch: starting with `named`: a do_lower_case the tokenizer.json contradicts.
      ValueError: starting with `named`: a tokenizer.json that cannot be read.
    """
    if not records_casing(path):
        return None
    named = named or str(path)
    try:
        return load_tokenizer(path, do_lower_case).do_lower_case
    except CasingMismatch as e:
        raise CasingMismatch(f"{named}: {e}", e.file_casing) from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{named}: {e}") from None


def casing_to_load(path, do_lower_case=None, vocab_txt_casing=None):
    """The do_lower_case to load the tokenizer file at `path` with (load_tokenizer).

    A tokenizer.json records its casing: `do_lower_case` as given (None takes the file's; a
    value that contradicts the file is load_tokenizer's error). A vocab.txt (or a SentencePiece
    model, which records none either) tokenizes as it is told: `do_lower_case`, else
    `vocab_txt_casing` (None: load_tokenizer's default, lower case).

    Args:
      path: a vocab.txt, tokenizer.json or SentencePiece model.
      do_lower_case: the casing asked for (None: not asked).
      vocab_txt_casing: a vocab.txt's casing when none is asked for: a value, or a function
        of no arguments called only then (a lookup or a warning that is needed only then).

    Returns:
      True, False or None.
    """
    if do_lower_case is not None:
        return bool(do_lower_case)
    if records_casing(path):
        return None
    return vocab_txt_casing() if callable(vocab_txt_casing) else vocab_txt_casing


def find_tokenizer_file(path):
    """The tokenizer file `path` names: itself, or the spiece.model / tokenizer.json /
    vocab.txt inside it.

    A directory holding a tokenizer.json and a vocab.txt (Hugging Face BERT directories do)
    gives tokenizer.json, which also records the casing; one with a SentencePiece model and no
    vocab.txt (Hugging Face ALBERT directories, whose tokenizer.json is a Unigram model bert_tf
    does not read) gives the model, as `model_tokenizer_file` does.

    Raises:
      FileNotFoundError: naming `path` and what was looked for.
    """
    path = str(path)
    if fileio.isdir(path):
        names = (TOKENIZER_FILE, VOCAB_FILE, SENTENCEPIECE_FILE, ALBERT_SENTENCEPIECE_FILE)
        found = [os.path.join(path, n) for n in names if fileio.isfile(os.path.join(path, n))]
        if any(is_sentencepiece_model(f) for f in found) and not any(
                f.endswith(VOCAB_FILE) for f in found):
            found = [f for f in found if is_sentencepiece_model(f)]
        if found:
            return found[0]
        raise FileNotFoundError(f"tokenizer directory '{path}' holds none of {VOCAB_FILE}, "
                                f"{TOKENIZER_FILE} or {SENTENCEPIECE_FILE}.")
    if not fileio.exists(path) and not os.path.islink(path):
        raise FileNotFoundError(f"tokenizer file '{path}' does not exist (expected a vocab.txt, "
                                f"a {TOKENIZER_FILE}, a SentencePiece .model or a directory "
                                "holding one).")
    problem = fileio.not_a_file(path, f"tokenizer file '{path}'")
    if problem:  # a symbolic link that loops or is broken
        raise FileNotFoundError(problem)
    return path


def model_tokenizer_file(directory):
    """The tokenizer file a model directory holds, or None.

    vocab.txt (or a keras-hub preset's assets/tokenizer/vocabulary.txt); a tokenizer.json when
    there is no vocab.txt (ModernBERT, a converted ModernBERT run), or when it is byte-level
    BPE: a vocab.txt cannot describe a BPE model, so beside one it is a leftover. A WordPiece
    tokenizer.json beside a vocab.txt (Hugging Face BERT directories hold both) leaves the
    vocab.txt in charge, so a model directory tokenizes as the original BERT code would.
    (find_tokenizer_file, for a directory named as the tokenizer itself, prefers the json.)
    A SentencePiece model (spiece.model, or the original ALBERT release's 30k-clean.model) is
    the directory's tokenizer when there is no vocab.txt: Hugging Face ALBERT directories
    hold one beside a Unigram tokenizer.json that only it describes to bert_tf.
    """
    found = [os.path.join(directory, name)
             for name in (VOCAB_FILE, KERAS_HUB_VOCAB, SENTENCEPIECE_FILE,
                          ALBERT_SENTENCEPIECE_FILE)]
    found = [path for path in found if fileio.isfile(path)]
    if found and is_sentencepiece_model(found[0]):
        return found[0]
    found = [os.path.join(directory, name)
             for name in (VOCAB_FILE, KERAS_HUB_VOCAB, TOKENIZER_FILE)]
    found = [path for path in found if fileio.isfile(path)]
    if not found:
        return None
    if found[-1].endswith(TOKENIZER_FILE) and len(found) > 1 and _is_bpe_file(found[-1]):
        logging.warning("Tokenizing with the byte-level BPE %s, not %s beside it", found[-1],
                        found[0])
        return found[-1]
    return found[0]


def _is_bpe_file(path):
    """True when a tokenizer.json's model is BPE (an unreadable file: False, and the file
    chosen instead is read as usual)."""
    try:
        with fileio.open_file(path, "rb") as f:
            return json.loads(f.read().decode("utf-8")).get("model", {}).get("type") == "BPE"
    except (ValueError, AttributeError, OSError):
        return False


def load_tokenizer(path, do_lower_case=None):
    """The tokenizer of a vocab.txt, a tokenizer.json, or a directory holding one.

    Args:
      path: a WordPiece vocab.txt; a Hugging Face tokenizer.json (byte-level BPE as GPT-2,
        RoBERTa and ModernBERT use, or WordPiece as BERT's); a SentencePiece model (`*.model`:
        ALBERT's); or a directory with one.
      do_lower_case: for a vocab.txt or SentencePiece model, the casing (default True, as
        --do_lower_case). For a
        tokenizer.json, which records its own casing, a value that contradicts the file is an
        error; None accepts the file's.

    Returns:
      a `WordpieceTokenizer`, `BpeTokenizer` or `SentencePieceTokenizer`.

    Raises:
      FileNotFoundError: nothing at `path`.
      CasingMismatch (a ValueError): a do_lower_case the tokenizer.json contradicts.
      ValueError: a bad file (naming it and the field).
    """
    path = find_tokenizer_file(path)
    if is_sentencepiece_model(path):
        return sentencepiece.SentencePieceTokenizer(
            path, do_lower_case=True if do_lower_case is None else do_lower_case)
    if not is_tokenizer_json(path):
        return tokenization.WordpieceTokenizer(
            path, do_lower_case=True if do_lower_case is None else do_lower_case)
    tokenizer = bpe.load_tokenizer_json(path)
    if do_lower_case is None:
        return tokenizer
    file_lowercase = tokenizer.do_lower_case
    if bool(do_lower_case) != file_lowercase:
        raise CasingMismatch(
            f"do_lower_case={bool(do_lower_case)} contradicts tokenizer file '{path}', which "
            f"{'lower-cases' if file_lowercase else 'keeps case'}; leave do_lower_case unset to "
            "use the file's.", file_lowercase)
    return tokenizer


def tokenizer_difference(base_file, tokenizer_file):
    """None when `tokenizer_file` tokenizes as `base_file` does; else what differs (str).

    Two vocab.txt files: tokenization.vocab_difference (tokens appended after the base's are
    fine). Otherwise the tokenizers are compared: a byte-level BPE against a WordPiece
    vocabulary differs in kind; two BPE files by BpeTokenizer.fingerprint (vocabulary,
    merges, added tokens, settings); SentencePiece models by their bytes; WordPiece ones by
    their tokens in order. Casing is not compared here (a vocab.txt does not record it).

    Raises:
      FileNotFoundError / ValueError: a file that cannot be read as a tokenizer.
    """
    plain = [not is_tokenizer_json(f) and not is_sentencepiece_model(f)
             for f in (base_file, tokenizer_file)]
    if all(plain):
        return tokenization.vocab_difference(base_file, tokenizer_file)
    base, given = load_tokenizer(base_file), load_tokenizer(tokenizer_file)
    if base.kind != given.kind:
        return f"it is a {given.kind} tokenizer, the model's is a {base.kind} one"
    if isinstance(base, sentencepiece.SentencePieceTokenizer):
        if base.digest() == given.digest():
            return None
        return "another SentencePiece model (its bytes differ: pieces, scores or normaliser)"
    if isinstance(base, bpe.BpeTokenizer):
        if base.fingerprint() == given.fingerprint():
            return None
        if base.inv_vocab != given.inv_vocab:
            index = next((i for i, (a, b) in enumerate(zip(base.inv_vocab, given.inv_vocab))
                          if a != b), min(len(base.inv_vocab), len(given.inv_vocab)))
            got = (repr(given.inv_vocab[index]) if index < len(given.inv_vocab)
                   else "past its end")
            want = (repr(base.inv_vocab[index]) if index < len(base.inv_vocab)
                    else "past its end")
            return f"id {index} is {got}, not {want}"
        return ("the vocabularies agree but the merges, added tokens or normalizer differ "
                "(BpeTokenizer.fingerprint)")
    tokens = given.inv_vocab
    if tokens[:len(base.inv_vocab)] == base.inv_vocab:
        return None
    index = next((i for i, (a, b) in enumerate(zip(base.inv_vocab, tokens)) if a != b),
                 len(tokens))
    got = repr(tokens[index]) if index < len(tokens) else "the end of the file"
    return f"id {index} is {got}, not {base.inv_vocab[index]!r}"


def write_tokenizer_file(output_dir, tokenizer, source_file,
                         sentencepiece_name=SENTENCEPIECE_FILE):
    """Writes the tokenizer file a model directory carries (atomically); returns its path.

    The file keeps its kind: vocab.txt for WordPiece (a WordPiece tokenizer.json is written as
    the vocab.txt it amounts to, so the directory reads like any BERT model's), tokenizer.json
    for byte-level BPE (as `tokenizer` parsed it), with special_tokens_map.json beside it when
    its special-token roles came from a tokenizer_config.json beside the source; spiece.model
    for SentencePiece (the model's bytes).

    Args:
      output_dir: the directory (exists).
      tokenizer: the tokenizer of `source_file` (None for a vocab.txt, copied byte for byte;
        a tokenizer.json or SentencePiece model is then read here).
      source_file: the vocab.txt, tokenizer.json or SentencePiece model it was read from
        (None for a tokenizer built in memory).
      sentencepiece_name: the name a SentencePiece model gets (an ALBERT checkpoint's
        directory: 30k-clean.model).
    """
    if tokenizer is None and (is_tokenizer_json(source_file)
                              or is_sentencepiece_model(source_file)):
        tokenizer = load_tokenizer(source_file)
    if isinstance(tokenizer, sentencepiece.SentencePieceTokenizer):
        path = os.path.join(output_dir, sentencepiece_name)
        write_bytes_atomic(path, tokenizer.model_proto)
        return path
    if isinstance(tokenizer, bpe.BpeTokenizer):
        spec = tokenizer.spec
        path = os.path.join(output_dir, TOKENIZER_FILE)
        write_text_atomic(path, json.dumps(spec.data, ensure_ascii=False) + "\n")
        if spec.roles:
            write_text_atomic(os.path.join(output_dir, SPECIAL_TOKENS_MAP), json.dumps(
                {f"{role}_token": token for role, token in sorted(spec.roles.items())}) + "\n")
        return path
    path = os.path.join(output_dir, VOCAB_FILE)
    if source_file is None or is_tokenizer_json(source_file):
        write_text_atomic(path, "".join(token + "\n" for token in tokenizer.inv_vocab))
    elif fileio.abspath(source_file) != fileio.abspath(path):
        with fileio.open_file(source_file, "rb") as f:
            write_bytes_atomic(path, f.read())
    return path


def tokenizer_layer(tokenizer):
    """The in-graph layer equal to a Python tokenizer from `load_tokenizer`.

    Returns:
      a `BertTokenizerLayer` for a `WordpieceTokenizer`, a `BpeTokenizerLayer` for a
      `BpeTokenizer`, a `SentencePieceTokenizerLayer` for a `SentencePieceTokenizer` (a layer
      given is returned as it is); each maps tf.string [B] to int32 RaggedTensor
      [B, (tokens)] and carries cls_id, sep_id, pad_id and mask_id.

    Raises:
      TypeError: anything else.
    """
    from bert_tf.text.bpe_layer import BpeTokenizerLayer
    from bert_tf.text.layers import BertTokenizerLayer
    from bert_tf.text.sentencepiece_layer import SentencePieceTokenizerLayer

    if isinstance(tokenizer, (BertTokenizerLayer, BpeTokenizerLayer, SentencePieceTokenizerLayer)):
        return tokenizer
    if isinstance(tokenizer, sentencepiece.SentencePieceTokenizer):
        return SentencePieceTokenizerLayer(tokenizer.model_proto,
                                           do_lower_case=tokenizer.do_lower_case)
    if isinstance(tokenizer, bpe.BpeTokenizer):
        return BpeTokenizerLayer(tokenizer.spec.data, roles=tokenizer.spec.roles)
    if isinstance(tokenizer, tokenization.WordpieceTokenizer):
        return BertTokenizerLayer(
            tokenizer.inv_vocab, do_lower_case=tokenizer.do_lower_case,
            max_input_chars_per_word=tokenizer.max_input_chars_per_word,
            unk_token=tokenizer.unk_token)
    raise TypeError(f"tokenizer_layer: expected a WordpieceTokenizer, BpeTokenizer or "
                    f"SentencePieceTokenizer (or its layer), got {type(tokenizer).__name__}.")
