"""WordPiece tokenization that reproduces the original BERT `FullTokenizer` token for token.

The original google-research/bert tokenizer runs two stages:

1. Basic tokenization of a text: drop NUL, U+FFFD and control characters (categories Cc and Cf,
   except tab, newline and carriage return), map whitespace (space, \\t, \\n, \\r, category Zs) to
   a space, put spaces around every CJK ideograph, split on whitespace, and for uncased models
   lower-case each word, decompose it (NFD) and drop non-spacing marks (category Mn). Finally split
   off punctuation: every ASCII character that is not a letter, digit or space, plus every
   character of a Unicode category P*.
2. WordPiece of each word: words longer than `max_input_chars_per_word` characters (200, the
   default of the original `FullTokenizer`) become `[UNK]`; otherwise greedy
   longest-match-first over the vocabulary with "##" marking pieces that continue a word; a
   word with any piece that matches nothing becomes a single `[UNK]`.

This module gives the same output as that code, faster: the per-character rules are applied
through `str.translate` tables filled lazily, and WordPiece results are cached per word. The
same per-character rules are exported as code-point tables (`char_normalization_table`,
`final_sigma_pattern`) from which `bert_tf.text.layers.BertTokenizerLayer` builds its in-graph
equivalent.
"""

import functools
import hashlib
import json
import re
import unicodedata

import numpy as np

from bert_tf import fileio

# Tokens every BERT vocabulary must contain. Their ids are always looked up, never assumed:
# Google's vocabularies have [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, while
# vocabularies made by `bert_tf.text.build_vocab` put them at 0..4 in this order.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Code-point ranges the original treats as CJK ideographs (one token per character).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

_MAX_UNICODE = 0x110000
_CAPITAL_SIGMA = "\u03a3"
_FINAL_SIGMA = "\u03c2"
# Words are cached after WordPiece; the cache is dropped when it reaches this many entries so
# that a long run over a large corpus cannot grow memory without bound.
_WORD_CACHE_LIMIT = 500_000


# ----------------------------------------------------------------------------------------------
# Per-character rules of the original BasicTokenizer.
# ----------------------------------------------------------------------------------------------


def is_cjk_char(cp):
    """Returns True if code point `cp` lies in one of the original's CJK ideograph ranges."""
    for low, high in CJK_RANGES:
        if low <= cp <= high:
            return True
    return False


def is_whitespace_char(char):
    """Space, tab, newline, carriage return and category Zs count as whitespace."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control_char(char):
    """Categories Cc and Cf are control characters, except tab, newline and carriage return."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation_char(char):
    """Every ASCII non-letter/digit/space character (e.g. $ ^ ` ~) and every category P* char."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def clean_char(char):
    """What the cleanup and CJK stages make of one character: "", " ", " c " or the char itself."""
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or is_control_char(char):
        return ""
    if is_whitespace_char(char):
        return " "
    if is_cjk_char(cp):
        return " " + char + " "
    return char


def split_char(char, do_lower_case):
    """What lower-casing, accent stripping and punctuation splitting make of one cleaned char.

    Lower-casing here is per character; the one context-dependent rule of `str.lower` (a capital
    sigma at the end of a word becomes a final sigma) is handled separately by the callers.
    Characters that `str.split()` treats as whitespace (e.g. U+2028) become a space, because the
    original splits words with `str.split()`.
    """
    text = char
    if do_lower_case:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    pieces = []
    for c in text:
        if is_punctuation_char(c):
            pieces.append(" " + c + " ")
        elif c.isspace():
            pieces.append(" ")
        else:
            pieces.append(c)
    return "".join(pieces)


class _LazyTranslation(dict):
    """A `str.translate` table that computes the mapping of a code point on first use."""

    def __init__(self, char_fn):
        super().__init__()
        self._char_fn = char_fn

    def __missing__(self, cp):
        char = chr(cp)
        out = self._char_fn(char)
        value = cp if out == char else (out or None)
        self[cp] = value
        return value


def _split_char_cased(char):
    return split_char(char, False)


def _punctuation_and_marks_lower(char):
    """Second-stage table for uncased text that is already lower-cased and NFD-decomposed."""
    if unicodedata.category(char) == "Mn":
        return ""
    return _split_char_cased(char)


_CLEAN_TABLE = _LazyTranslation(clean_char)
_SPLIT_TABLE_CASED = _LazyTranslation(_split_char_cased)
_SPLIT_TABLE_LOWER = _LazyTranslation(_punctuation_and_marks_lower)


def as_text(text, errors):
    """A Python tokenizer's input as str: `text` itself, or UTF-8 bytes decoded with
    `errors` ("ignore", "replace").

    Raises:
      TypeError: text is neither str nor bytes.
    """
    if isinstance(text, bytes):
        return text.decode("utf-8", errors)
    if not isinstance(text, str):
        raise TypeError(f"Expected text as str or bytes, got {type(text).__name__}.")
    return text


def basic_tokenize(text, do_lower_case=True):
    """Splits `text` into words exactly as the original BasicTokenizer does.

    Args:
      text: str, or UTF-8 bytes (undecodable bytes are dropped, as the original does).
      do_lower_case: lower-case, NFD-decompose and strip accents (uncased models).

    Returns:
      list of str words, before WordPiece.
    """
    text = as_text(text, "ignore").translate(_CLEAN_TABLE)
    if do_lower_case:
        # Whole-text lower() equals the original's per-word lower(): words are separated by
        # whitespace, which breaks the final-sigma context exactly as a word boundary does.
        text = text.lower()
        if not text.isascii():
            text = unicodedata.normalize("NFD", text)
        return text.translate(_SPLIT_TABLE_LOWER).split()
    return text.translate(_SPLIT_TABLE_CASED).split()


# ----------------------------------------------------------------------------------------------
# Code-point tables for the in-graph tokenizer.
# ----------------------------------------------------------------------------------------------

# Codes of `char_normalization_table`: keep the char, surround it with spaces, or (code >= 2)
# replace it by replacements[code - 2].
KEEP_CODE = 0
SPACED_CODE = 1
FIRST_REPLACEMENT_CODE = 2


@functools.lru_cache(maxsize=2)
def char_normalization_table(do_lower_case):
    """Per-code-point result of cleanup, CJK spacing, lower/NFD/strip and punctuation splitting.

    Args:
      do_lower_case: which variant of the rules.

    Returns:
      (codes, replacements): codes is an int32 numpy array of shape [0x110000]; code 0 keeps the
      character, 1 surrounds it with spaces, k >= 2 replaces it by replacements[k - 2] (a str,
      possibly empty). A capital sigma is lower-cased to the non-final form; run
      `final_sigma_pattern` first to get final sigmas.
    """
    codes = np.zeros([_MAX_UNICODE], dtype=np.int32)
    replacements = []
    replacement_index = {}
    # is_cjk_char's ranges as a byte per code point: the loop below asks for every one of the
    # 1.1M code points, and a scan of the ranges each time was a third of the table's build.
    cjk = bytearray(_MAX_UNICODE)
    for low, high in CJK_RANGES:
        cjk[low:high + 1] = b"\x01" * (high + 1 - low)
    for cp in range(_MAX_UNICODE):
        if 0xD800 <= cp <= 0xDFFF:  # Surrogates never come out of UTF-8 decoding.
            continue
        char = chr(cp)
        # Unassigned and private-use code points pass through every rule unchanged, except
        # unassigned ones inside the CJK ranges, which the original spaces like ideographs.
        if unicodedata.category(char) in ("Cn", "Co") and not cjk[cp]:
            continue
        out = "".join(split_char(c, do_lower_case) for c in clean_char(char))
        if out == char:
            continue
        if out == " " + char + " ":
            codes[cp] = SPACED_CODE
            continue
        if out not in replacement_index:
            replacement_index[out] = len(replacements)
            replacements.append(out)
        codes[cp] = FIRST_REPLACEMENT_CODE + replacement_index[out]
    return codes, tuple(replacements)


def ranges_to_regex_class(code_points, negate=False):
    """Builds an RE2 character class such as [\\x{41}-\\x{5a}\\x{61}] from sorted code points."""
    parts = []
    start = prev = None
    for cp in code_points:
        if prev is not None and cp == prev + 1:
            prev = cp
            continue
        if start is not None:
            parts.append(_regex_range(start, prev))
        start = prev = cp
    if start is not None:
        parts.append(_regex_range(start, prev))
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def _regex_range(start, end):
    if start == end:
        return "\\x{%x}" % start
    return "\\x{%x}-\\x{%x}" % (start, end)


@functools.lru_cache(maxsize=1)
def final_sigma_pattern():
    """An RE2 pattern that finds a capital sigma that `str.lower` would turn into a final sigma.

    Python lower-cases U+03A3 to U+03C2 when it follows a cased character (skipping
    case-ignorable ones) and is not followed by one. Which characters are cased or
    case-ignorable is read off Python's own `str.lower`, so the pattern agrees with it. Characters
    the cleanup stage deletes count as case-ignorable, because the original lower-cases words
    after they are gone. Rewrite matches with `\\1\\2\\u03c2\\3\\4` (see
    `FINAL_SIGMA_REWRITE`).

    Returns:
      str, an RE2 pattern with 4 groups: cased char, ignorables, ignorables, following char.
    """
    cased = []
    ignorable = []
    for cp in range(_MAX_UNICODE):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        if unicodedata.category(char) == "Cn":  # Unassigned: neither cased nor ignorable.
            continue
        if (char + _CAPITAL_SIGMA).lower()[-1] == _FINAL_SIGMA:
            cased.append(cp)
        elif ("A" + char + _CAPITAL_SIGMA).lower()[-1] == _FINAL_SIGMA or clean_char(char) == "":
            ignorable.append(cp)
    cased_class = ranges_to_regex_class(cased)
    ignorable_class = ranges_to_regex_class(ignorable)
    other_class = ranges_to_regex_class(sorted(cased + ignorable), negate=True)
    return "(%s)(%s*)\\x{3a3}(%s*)(%s|$)" % (cased_class, ignorable_class, ignorable_class,
                                              other_class)


FINAL_SIGMA_REWRITE = "\\1\\2" + _FINAL_SIGMA + "\\3\\4"


# ----------------------------------------------------------------------------------------------
# Vocabulary files.
# ----------------------------------------------------------------------------------------------


def _read_vocab_lines(vocab_file):
    problem = fileio.not_a_file(vocab_file, f"vocab_file '{vocab_file}'")
    if problem:
        raise FileNotFoundError(problem)
    try:
        text = fileio.read_utf8(vocab_file)
    except fileio.NotUtf8Error as e:
        raise ValueError(
            f"vocab_file '{vocab_file}' is not UTF-8: undecodable byte on line {e.line}.")\
            from None
    # Only "\n" ends a line: str.splitlines() would also split on U+2028 and similar characters,
    # and the original reads the file with readline(), which splits on "\n" only.
    return text.split("\n")


def vocab_from_tokens(tokens, source="vocabulary"):
    """Checks a token list (id = position) and returns the token -> id dict.

    Args:
      tokens: sequence of str, one per id.
      source: how to name the vocabulary in error messages (a file name or "vocabulary").

    Raises:
      ValueError: if empty, a token is empty or repeated, or a special token is missing.
    """
    if not tokens:
        raise ValueError(f"{source} is empty; expected one token per line.")
    vocab = {}
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ValueError(f"{source}: token at line {index + 1} is {type(token).__name__}, "
                             "expected str.")
        if not token:
            raise ValueError(f"{source}: line {index + 1} is empty; expected one token per line.")
        if token in vocab:
            raise ValueError(f"{source}: duplicate token '{token}' on lines {vocab[token] + 1} "
                             f"and {index + 1}.")
        vocab[token] = index
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise ValueError(f"{source} lacks the special token(s) {', '.join(missing)}; a BERT "
                         f"vocabulary must contain {', '.join(SPECIAL_TOKENS)}.")
    return vocab


def read_vocab_tokens(vocab_file):
    """Reads a vocabulary file into its list of tokens (id = line number - 1), unchecked.

    Each line is stripped of surrounding whitespace, as the original does; blank lines at the end
    of the file are ignored.
    """
    lines = [line.strip() for line in _read_vocab_lines(vocab_file)]
    # A byte-order mark (Windows editors write one) is not part of the first token.
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:].strip()
    while lines and not lines[-1]:
        lines.pop()
    return lines


def vocab_digest(vocab_file):
    """Hex SHA-256 of a vocabulary's tokens, one per line with "\\n" endings: the same for
    copies that differ only in line endings, a byte-order mark or surrounding whitespace (and
    equal to the file's own SHA-256 when it is written that way, as bert_tf writes it)."""
    text = "".join(token + "\n" for token in read_vocab_tokens(vocab_file))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def vocab_difference(base_file, vocab_file):
    """None when `vocab_file` holds the tokens of `base_file` in their order (tokens appended
    after them are fine: a vocabulary extended for new words); else the first difference, as
    "id 5 is 'cat', not 'the'"."""
    base, tokens = read_vocab_tokens(base_file), read_vocab_tokens(vocab_file)
    if tokens[:len(base)] == base:
        return None
    index = next((i for i, (a, b) in enumerate(zip(base, tokens)) if a != b), len(tokens))
    got = repr(tokens[index]) if index < len(tokens) else "the end of the file"
    return f"id {index} is {got}, not {base[index]!r}"


def load_vocab(vocab_file):
    """Loads a BERT vocabulary file: one token per line, id = line number - 1.

    Args:
      vocab_file: path of the vocab.txt file (local, or any tf.io.gfile URL such as gs://).

    Returns:
      dict token (str) -> id (int), in file order.

    Raises:
      FileNotFoundError: `vocab_file` does not exist.
      ValueError: the file is not UTF-8, is empty, has an empty line or a duplicate token (the
        message names the line numbers), or lacks one of [PAD] [UNK] [CLS] [SEP] [MASK].
    """
    return vocab_from_tokens(read_vocab_tokens(vocab_file), source=f"vocab_file '{vocab_file}'")


# ----------------------------------------------------------------------------------------------
# Checkpoint casing check.
# ----------------------------------------------------------------------------------------------

# Names of Google's released checkpoints (the directory holding bert_model.ckpt).
_UNCASED_CHECKPOINTS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
    "wwm_uncased_L-24_H-1024_A-16",
)
_CASED_CHECKPOINTS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
    "wwm_cased_L-24_H-1024_A-16",
)
_CHECKPOINT_NAME_RE = re.compile(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint, flag="--init_checkpoint"):
    """Raises if `do_lower_case` contradicts the name of a released Google checkpoint.

    The casing of a model is not stored in bert_config.json, so (like the original) this reads
    it off the checkpoint's directory name, e.g. `.../uncased_L-12_H-768_A-12/bert_model.ckpt`.
    Unknown names and an empty `init_checkpoint` are accepted silently.

    Args:
      do_lower_case: bool, the --do_lower_case flag.
      init_checkpoint: str or None, the --init_checkpoint flag.
      flag: the flag `init_checkpoint` came from, named in the message.

    Raises:
      ValueError: naming both flags and the value to use instead.
    """
    if not init_checkpoint:
        return
    match = _CHECKPOINT_NAME_RE.match(init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)
    if model_name in _UNCASED_CHECKPOINTS and not do_lower_case:
        kind, wanted = "lower-cased (uncased)", True
    elif model_name in _CASED_CHECKPOINTS and do_lower_case:
        kind, wanted = "cased", False
    else:
        return
    raise ValueError(
        f"--do_lower_case={not wanted} contradicts {flag}={init_checkpoint}: "
        f"'{model_name}' is a {kind} model, so pass --do_lower_case={wanted} to tokenize as it "
        "was pre-trained.")


# ----------------------------------------------------------------------------------------------
# The tokenizer.
# ----------------------------------------------------------------------------------------------


class WordpieceTokenizer:
    """BERT's full tokenizer (basic tokenization + WordPiece), identical to the original.

    Args:
      vocab_file: path of a vocab.txt (one token per line), or a list of tokens (id = index).
      do_lower_case: lower-case and strip accents (uncased models). Must match the checkpoint.
      max_input_chars_per_word: words with more characters (not bytes) than this become
        `unk_token`; 200 as in the original `FullTokenizer`.
      unk_token: the token for words WordPiece cannot cover; must be in the vocabulary.

    Examples:

    >>> tok = WordpieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                           "un", "##aff", "##able", ",", "hello"])
    >>> tok.tokenize("Hello, unaffable!")
    ['hello', ',', 'un', '##aff', '##able', '[UNK]']
    >>> tok.decode(tok.encode("unaffable"))
    'unaffable'
    """

    def __init__(self, vocab_file, do_lower_case=True, max_input_chars_per_word=200,
                 unk_token="[UNK]"):
        if isinstance(vocab_file, (list, tuple)):
            tokens = list(vocab_file)
            self.vocab = vocab_from_tokens(tokens)
            self.vocab_file = None
        else:
            tokens = read_vocab_tokens(vocab_file)
            self.vocab = vocab_from_tokens(tokens, source=f"vocab_file '{vocab_file}'")
            self.vocab_file = vocab_file
        if unk_token not in self.vocab:
            raise ValueError(f"unk_token '{unk_token}' is not in the vocabulary.")
        if max_input_chars_per_word < 1:
            raise ValueError(
                f"max_input_chars_per_word must be >= 1, got {max_input_chars_per_word}.")
        self.inv_vocab = tokens
        self.do_lower_case = bool(do_lower_case)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.unk_token = unk_token
        self.unk_id = self.vocab[unk_token]
        self.pad_id = self.vocab["[PAD]"]
        self.cls_id = self.vocab["[CLS]"]
        self.sep_id = self.vocab["[SEP]"]
        self.mask_id = self.vocab["[MASK]"]
        # No piece can be longer than the longest vocabulary entry, which bounds the inner loop.
        self._max_piece_chars = max(
            len(t) - 2 if t.startswith("##") else len(t) for t in tokens)
        self._word_cache = {}
        self._span_cache = {}

    # The bert_tf.text.Tokenizer interface: what callers ask instead of testing the kind.
    kind = "WordPiece"
    # A piece maps back to characters inside its word (the original's answer alignment).
    subword_offsets = True

    @property
    def vocab_size(self):
        return len(self.inv_vocab)

    def digest(self):
        """Hex SHA-256 of the tokens, one per line (vocab_digest of the vocab.txt it amounts to,
        whether read from a vocab.txt or a tokenizer.json); casing is not part of it."""
        text = "".join(token + "\n" for token in self.inv_vocab)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def fingerprint(self):
        """Hex SHA-256 of everything the ids depend on: tokens, casing, word length limit and
        unknown token (a key for caches of tokenized data)."""
        parts = [self.inv_vocab, self.do_lower_case, self.max_input_chars_per_word,
                 self.unk_token]
        return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()

    def encode_word(self, word, first=False):
        """Ids of one whitespace-separated word of a longer text: list of int. WordPiece
        tokenizes a word the same wherever it stands, so `first` changes nothing."""
        del first
        return self.encode(word)

    def encode_line(self, line):
        """Ids of one corpus line (a sentence of pre-training text): list of int."""
        return self.encode(line)

    def continuation_ids(self):
        """Ids of the tokens that continue a word (whole-word masking joins them to the word
        before): the "##" pieces. frozenset of int."""
        return frozenset(i for t, i in self.vocab.items() if t.startswith("##"))

    def span_forms(self, text):
        """The space-joined tokens `text` appears as among the pieces of a longer text that
        holds it (SQuAD's answer alignment): set of str."""
        return {" ".join(self.tokenize(text))}

    def basic_tokenize(self, text):
        """Words of `text` (str or UTF-8 bytes) before WordPiece: list of str."""
        return basic_tokenize(text, self.do_lower_case)

    def _word_pieces(self, word):
        """(pieces, ids) of one basic-tokenized word, cached."""
        cached = self._word_cache.get(word)
        if cached is not None:
            return cached
        pieces = self._greedy_pieces(word)
        result = (pieces, [self.vocab[p] for p in pieces])
        if len(self._word_cache) >= _WORD_CACHE_LIMIT:
            self._word_cache.clear()
        self._word_cache[word] = result
        return result

    def _greedy_pieces(self, word):
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        vocab = self.vocab
        pieces = []
        start = 0
        n = len(word)
        while start < n:
            end = min(n, start + self._max_piece_chars)
            piece = None
            while end > start:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in vocab:
                    piece = candidate
                    break
                end -= 1
            if piece is None:
                return [self.unk_token]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize_words(self, text):
        """WordPiece tokens grouped by word: list (words) of lists of str."""
        return [self._word_pieces(w)[0] for w in self.basic_tokenize(text)]

    def piece_spans(self, text):
        """Where each token of `tokenize(text)` lies in `text` (a str): tuple of (start, end)
        character offsets, end exclusive, cached per text, as
        `BertTokenizerLayer.tokenize_with_offsets` gives them in the graph: a piece covers the
        characters its normalized ones come from (an accented letter, an uncased Hangul
        syllable's jamo), an [UNK] its whole word.
        """
        cached = self._span_cache.get(text)
        if cached is not None:
            return cached
        spans = tuple(self._piece_spans(text))
        if len(self._span_cache) >= _WORD_CACHE_LIMIT:
            self._span_cache.clear()
        self._span_cache[text] = spans
        return spans

    def _piece_spans(self, text):
        # The normalized text, character by character, with the input character each comes
        # from; normalization never joins characters across whitespace.
        normalized, source = [], []
        for i, char in enumerate(text):
            out = "".join(split_char(c, self.do_lower_case) for c in clean_char(char))
            normalized.append(out)
            source.extend([i] * len(out))
        runs = [m.span() for m in re.finditer(r"\S+", "".join(normalized))]
        words = self.basic_tokenize(text)
        spans = []
        if [end - start for start, end in runs] != [len(w) for w in words]:
            # Context-dependent lower-casing changed a length: every piece spans the text.
            return [(0, len(text))] * len(self.tokenize(text))
        for (start, end), word in zip(runs, words):
            pieces = self._word_pieces(word)[0]
            if pieces == [self.unk_token]:
                spans.append((source[start], source[end - 1] + 1))
                continue
            for k, piece in enumerate(pieces):
                length = len(piece) - (2 if k else 0)
                spans.append((source[start], source[start + length - 1] + 1))
                start += length
        return spans

    def tokenize(self, text):
        """WordPiece tokens of `text` (str or UTF-8 bytes): list of str."""
        tokens = []
        for word in self.basic_tokenize(text):
            tokens.extend(self._word_pieces(word)[0])
        return tokens

    def encode(self, text):
        """WordPiece ids of `text`: list of int (no [CLS]/[SEP]; see `pack_inputs`)."""
        ids = []
        for word in self.basic_tokenize(text):
            ids.extend(self._word_pieces(word)[1])
        return ids

    def convert_tokens_to_ids(self, tokens):
        """Ids of `tokens`; tokens not in the vocabulary map to the unknown token's id."""
        vocab, unk = self.vocab, self.unk_id
        return [vocab.get(t, unk) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        """Tokens of `ids` (ints). Raises ValueError naming an id outside [0, vocab_size)."""
        inv, size = self.inv_vocab, len(self.inv_vocab)
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < size:
                raise ValueError(f"Token id {i} is outside the vocabulary [0, {size}).")
            out.append(inv[i])
        return out

    def decode(self, ids, skip_special_tokens=False):
        """Joins the tokens of `ids` with spaces, merging "##" pieces into the previous token.

        The result is the basic-tokenized text (lower-cased for uncased vocabularies, punctuation
        separated by spaces), not the original string.

        Args:
          ids: sequence of int.
          skip_special_tokens: drop [PAD], [CLS], [SEP] and [MASK] first.
        """
        tokens = self.convert_ids_to_tokens(ids)
        if skip_special_tokens:
            specials = {"[PAD]", "[CLS]", "[SEP]", "[MASK]"}
            tokens = [t for t in tokens if t not in specials]
        words = []
        for token in tokens:
            if token.startswith("##") and len(token) > 2 and words:
                words[-1] += token[2:]
            else:
                words.append(token)
        return " ".join(words)
