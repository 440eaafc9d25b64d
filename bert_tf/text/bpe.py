"""Byte-level BPE read from a Hugging Face `tokenizer.json` (GPT-2, RoBERTa, ModernBERT), in Python.

A text goes through the same stages as in the `tokenizers` library, each as it defines them:

1. Added tokens: those with `normalized: false` (usually the special ones) are found in the raw
   text, then the rest of the text is normalized (NFC, ...) and tokens with `normalized: true`
   are found in it. Matching is leftmost-longest; `lstrip` / `rstrip` widen a match over the
   whitespace beside it, and a `single_word` token only matches between non-word characters.
2. Every piece of text between added tokens is split into words by the GPT-2 pattern
   `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`
   (after a space is put in front when `add_prefix_space` is set).
3. Each word's UTF-8 bytes start as one symbol each; BPE then merges, one at a time, the
   adjacent pair with the lowest merge rank (leftmost on ties) until no pair has a rank.

Character classes are explicit code-point ranges read off Python's `unicodedata`
(letters: categories L*, numbers: N*, whitespace: the Unicode White_Space property), so this
module and the in-graph layer (`bert_tf.text.bpe_layer`) agree with each other exactly; they
agree with `tokenizers` for every character assigned in Python's Unicode version.

`load_tokenizer_json` also reads WordPiece tokenizer.json files (BERT) into the existing
`WordpieceTokenizer`, so a command can take either kind of file.
"""

import dataclasses
import functools
import hashlib
import json
import os
import re
import unicodedata

from bert_tf import fileio
from bert_tf.file_names import TOKENIZER_FILE
from bert_tf.text import tokenization

_MAX_UNICODE = 0x110000
# The Unicode White_Space property: what `\s` means to the Rust regex and Oniguruma engines
# `tokenizers` uses (str.isspace() differs: it includes U+001C..U+001F).
WHITE_SPACE = (tuple(range(0x09, 0x0E)) + (0x20, 0x85, 0xA0, 0x1680) + tuple(range(0x2000, 0x200B))
               + (0x2028, 0x2029, 0x202F, 0x205F, 0x3000))
CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
# Names a special token's role is read from when a directory has no tokenizer_config.json.
_ROLE_NAMES = {
    "cls": ("[CLS]", "<s>", "<cls>"),
    "sep": ("[SEP]", "</s>", "<sep>"),
    "pad": ("[PAD]", "<pad>", "<|padding|>"),
    "mask": ("[MASK]", "<mask>"),
    "unk": ("[UNK]", "<unk>"),
}
# Words are cached after BPE; the cache is dropped at this size so memory stays bounded.
_WORD_CACHE_LIMIT = 500_000


@functools.lru_cache(maxsize=1)
def bytes_to_unicode():
    """GPT-2's byte -> printable character map: list of 256 one-character str, by byte value.

    Printable Latin-1 bytes map to themselves; the other 68 to U+0100 onwards, in byte order
    (so the space 0x20 is "Ġ" U+0120 and the newline "Ċ" U+010A).
    """
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD))
                 + list(range(0xAE, 0x100)))
    chars, extra = [], 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(0x100 + extra))
            extra += 1
    return chars


@functools.lru_cache(maxsize=1)
def _unicode_to_bytes():
    return {c: b for b, c in enumerate(bytes_to_unicode())}


def token_bytes(token):
    """The bytes a byte-level token stands for ("Ġhello" -> b" hello"); None if it has a
    character outside the byte map (an added token such as "[CLS]" maps to itself)."""
    table = _unicode_to_bytes()
    try:
        return bytes(table[c] for c in token)
    except KeyError:
        return None


def _class_of(code_points):
    """A character class body ("\\x{41}-\\x{5a}...") for sorted code points, for `re` and RE2."""
    parts = []
    start = prev = None
    for cp in list(code_points) + [None]:
        if prev is not None and cp == prev + 1:
            prev = cp
            continue
        if start is not None:
            parts.append("\\x{%x}" % start if start == prev else "\\x{%x}-\\x{%x}" % (start, prev))
        start = prev = cp
    return "".join(parts)


@functools.lru_cache(maxsize=1)
def _category_classes():
    """Major Unicode category ("L", "N", "M") -> class body of its code points, from one pass
    over Python's unicodedata. Surrogates are excluded (UTF-8 text never holds them)."""
    found = {"L": [], "N": [], "M": []}
    for cp in range(_MAX_UNICODE):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        points = found.get(unicodedata.category(chr(cp))[0])
        if points is not None:
            points.append(cp)
    return {major: _class_of(points) for major, points in found.items()}


def character_classes():
    """(letters, numbers, whitespace): class bodies with RE2's \\x{...} escapes.

    Letters are the code points of categories L*, numbers N* (per Python's unicodedata);
    whitespace is White_Space.
    """
    classes = _category_classes()
    return classes["L"], classes["N"], _class_of(WHITE_SPACE)


def mark_class():
    """Combining marks (categories M*): a class body with RE2's \\x{...} escapes."""
    return _category_classes()["M"]


def _python_class(body):
    """An RE2 class body in Python `re` syntax (\\x{41} -> \\U00000041)."""
    return re.sub(r"\\x\{([0-9a-f]+)\}", lambda m: "\\U%08x" % int(m.group(1), 16), body)


@functools.lru_cache(maxsize=1)
def gpt2_pattern():
    """The GPT-2 pre-tokenizer pattern, compiled for Python `re` (which has the lookahead)."""
    letters, numbers, space = (_python_class(b) for b in character_classes())
    alternatives = [re.escape(c) for c in CONTRACTIONS] + [
        f" ?[{letters}]+", f" ?[{numbers}]+", f" ?[^{space}{letters}{numbers}]+",
        f"[{space}]+(?![^{space}])", f"[{space}]+"]
    return re.compile("|".join(alternatives))


def re2_split_pattern():
    """The GPT-2 pattern for RE2 (no lookahead): whitespace is matched one character at a
    time, and a space before a non-space joins it as in GPT-2; `bpe_layer` then rebuilds the
    runs that `\\s+(?!\\S)` takes."""
    letters, numbers, space = character_classes()
    alternatives = [re.escape(c) for c in CONTRACTIONS] + [
        f" ?[{letters}]+", f" ?[{numbers}]+", f" ?[^{space}{letters}{numbers}]+", f"[{space}]"]
    return "|".join(alternatives)


# ----------------------------------------------------------------------------------------------
# tokenizer.json
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AddedToken:
    """One entry of tokenizer.json's "added_tokens" (flags as `tokenizers` defines them)."""
    id: int
    content: str
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = True
    special: bool = False


@dataclasses.dataclass(frozen=True)
class BpeSpec:
    """What a byte-level BPE tokenizer.json says, checked: everything both faces need.

    Attributes:
      vocab: tuple of str, token of each id (ids are 0..len-1; a gap is "").
      merges: tuple of (left, right) str pairs, by rank.
      added_tokens: tuple of AddedToken.
      normalizer: tuple of steps, each "NFC", "NFD", "NFKC", "NFKD" or "Lowercase".
      add_prefix_space: the ByteLevel pre-tokenizer's option.
      use_regex: whether the ByteLevel pre-tokenizer splits words with the GPT-2 pattern.
      ignore_merges: a word that is a vocabulary entry is that entry (BPE's option).
      unk_id: id of the BPE model's unk_token, or None (bytes missing from the vocabulary are
        dropped, as `tokenizers` does).
      special_ids: dict role ("cls", "sep", "pad", "mask", "unk") -> id, of the roles found.
      source: how errors name the file.
      data: the parsed tokenizer.json (what in-graph layers store in their config).
      roles: the role -> token overrides it was read with, or None.
    """
    vocab: tuple
    merges: tuple
    added_tokens: tuple
    normalizer: tuple
    add_prefix_space: bool
    use_regex: bool
    ignore_merges: bool
    unk_id: object
    special_ids: dict
    source: str
    data: dict = dataclasses.field(repr=False, compare=False, default=None)
    roles: dict = None


def _error(source, message):
    return ValueError(f"{source}: {message}")


def _normalizer_steps(node, source):
    if node is None:
        return ()
    kind = node.get("type")
    if kind == "Sequence":
        return tuple(s for n in node.get("normalizers", []) for s in _normalizer_steps(n, source))
    if kind in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase"):
        return (kind,)
    raise _error(source, f"normalizer type '{kind}' is not supported for byte-level BPE "
                         "(expected NFC, NFD, NFKC, NFKD, Lowercase or a Sequence of them).")


def _byte_level_options(node, source):
    """(add_prefix_space, use_regex) of a ByteLevel pre-tokenizer (or a Sequence of one)."""
    if node is not None and node.get("type") == "Sequence" and len(node["pretokenizers"]) == 1:
        node = node["pretokenizers"][0]
    if node is None or node.get("type") != "ByteLevel":
        kind = None if node is None else node.get("type")
        raise _error(source, f"pre_tokenizer type '{kind}' is not supported with a BPE model "
                             "(expected ByteLevel, as GPT-2, RoBERTa and ModernBERT use).")
    return bool(node.get("add_prefix_space", False)), bool(node.get("use_regex", True))


def _template_cls_sep(node, source):
    """(cls_id, sep_id) of a post-processor of BERT's layout, or (None, None) without one."""
    if node is None:
        return None, None
    kind = node.get("type")
    if kind == "Sequence":
        found = [_template_cls_sep(n, source) for n in node.get("processors", [])]
        found = [f for f in found if f != (None, None)]
        return found[0] if found else (None, None)
    if kind == "ByteLevel":
        return None, None
    if kind == "BertProcessing":
        return node["cls"][1], node["sep"][1]
    if kind != "TemplateProcessing":
        raise _error(source, f"post_processor type '{kind}' is not supported (expected "
                             "TemplateProcessing or BertProcessing with BERT's layout).")

    def layout(items):
        out = []
        for item in items:
            if "SpecialToken" in item:
                ids = node["special_tokens"][item["SpecialToken"]["id"]]["ids"]
                out.append(ids[0] if len(ids) == 1 else None)
            else:
                out.append(item["Sequence"]["id"])
        return out

    single, pair = layout(node["single"]), layout(node["pair"])
    if (len(single) != 3 or single[1] != "A" or not isinstance(single[0], int)
            or not isinstance(single[2], int)
            or pair != [single[0], "A", single[2], "B", single[2]]):
        raise _error(source, "post_processor TemplateProcessing must be BERT's layout "
                             "'[CLS] $A [SEP]' and '[CLS] $A [SEP] $B [SEP]' (one token each).")
    return single[0], single[2]


def _special_ids(tokens_to_ids, cls_sep, roles, source):
    """Role -> id: from `roles` (role -> token, e.g. tokenizer_config.json), the
    post-processor's [CLS]/[SEP], then conventional names."""
    ids = {}
    if cls_sep[0] is not None:
        ids["cls"], ids["sep"] = cls_sep
    for role, names in _ROLE_NAMES.items():
        token = (roles or {}).get(role)
        if token is not None:
            if token not in tokens_to_ids:
                raise _error(source, f"{role}_token '{token}' is not in the vocabulary.")
            ids[role] = tokens_to_ids[token]
            continue
        if role in ids:
            continue
        for name in names:
            if name in tokens_to_ids:
                ids[role] = tokens_to_ids[name]
                break
    return ids


def _vocab_list(vocab, added, source):
    """Token of each id from the model vocab and the added tokens (added ones win)."""
    by_id = {}
    for token, index in vocab.items():
        if int(index) in by_id:
            raise _error(source, f"model.vocab gives id {int(index)} to both "
                                 f"'{by_id[int(index)]}' and '{token}'; each id must be one "
                                 "token's.")
        by_id[int(index)] = token
    for token in added:
        by_id[token.id] = token.content
    if not by_id:
        raise _error(source, "the vocabulary is empty.")
    if min(by_id) < 0:
        raise _error(source, f"negative token id {min(by_id)}.")
    out = [""] * (max(by_id) + 1)
    for index, token in by_id.items():
        out[index] = token
    return tuple(out)


def _parse_merges(merges, source):
    pairs = []
    for rank, merge in enumerate(merges):
        if isinstance(merge, str):
            parts = merge.split(" ")
        else:
            parts = list(merge)
        if len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            raise _error(source, f"model.merges[{rank}] is {merge!r}; expected \"a b\" or "
                                 "[\"a\", \"b\"].")
        pairs.append((parts[0], parts[1]))
    return tuple(pairs)


def read_tokenizer_json(path_or_dict, roles=None):
    """Reads a tokenizer.json: a checked BpeSpec for byte-level BPE, or the raw dict for
    WordPiece (see `load_tokenizer_json`).

    Args:
      path_or_dict: path of a tokenizer.json, or its parsed content.
      roles: optional dict role -> token (e.g. {"mask": "[MASK]"}) from tokenizer_config.json.

    Returns:
      ("bpe", BpeSpec) or ("wordpiece", dict).

    Raises:
      ValueError: the file is not JSON, its model type is neither BPE nor WordPiece, or a
        part it uses is not supported; the message names the file and the field.
    """
    if isinstance(path_or_dict, dict):
        data, source = path_or_dict, TOKENIZER_FILE
    else:
        source = f"tokenizer file '{path_or_dict}'"
        problem = fileio.not_a_file(path_or_dict, source)
        if problem:
            raise FileNotFoundError(problem)
        with fileio.open_file(path_or_dict, "rb") as f:
            raw = f.read()
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _error(source, f"not a JSON tokenizer file ({e}).") from None
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise _error(source, "no \"model\" object; expected a Hugging Face tokenizer.json.")
    kind = model.get("type")
    if kind is None and "merges" in model:
        kind = "BPE"  # Older files leave the type out.
    if kind == "WordPiece":
        return "wordpiece", data
    if kind != "BPE":
        # A Unigram file (ALBERT's, T5's) comes with the SentencePiece model it was made from.
        hint = (" (for a SentencePiece tokenizer pass its .model file, e.g. spiece.model)"
                if kind == "Unigram" else "")
        raise _error(source, f"model type '{kind}' is not supported; expected byte-level BPE "
                             f"or WordPiece{hint}.")
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise _error(source, f"model.{option}={model[option]!r} is not supported by the "
                                 "byte-level BPE tokenizer (expected null or \"\").")
    if model.get("dropout"):
        raise _error(source, f"model.dropout={model['dropout']} is not supported (BPE-dropout "
                             "is random; expected null).")
    if model.get("byte_fallback"):
        raise _error(source, "model.byte_fallback is not supported for byte-level BPE.")
    add_prefix_space, use_regex = _byte_level_options(data.get("pre_tokenizer"), source)
    decoder = data.get("decoder")
    if decoder is not None and decoder.get("type") != "ByteLevel":
        raise _error(source, f"decoder type '{decoder.get('type')}' is not supported with a "
                             "BPE model (expected ByteLevel).")
    added = tuple(AddedToken(
        id=int(t["id"]), content=t["content"], single_word=bool(t.get("single_word")),
        lstrip=bool(t.get("lstrip")), rstrip=bool(t.get("rstrip")),
        normalized=bool(t.get("normalized", True)), special=bool(t.get("special")))
        for t in data.get("added_tokens") or [])
    vocab = _vocab_list(model.get("vocab") or {}, added, source)
    tokens_to_ids = {t: i for i, t in enumerate(vocab) if t}
    cls_sep = _template_cls_sep(data.get("post_processor"), source)
    unk_token = model.get("unk_token")
    if unk_token is not None and unk_token not in tokens_to_ids:
        raise _error(source, f"model.unk_token '{unk_token}' is not in the vocabulary.")
    return "bpe", BpeSpec(
        vocab=vocab, merges=_parse_merges(model.get("merges") or [], source),
        added_tokens=added, normalizer=_normalizer_steps(data.get("normalizer"), source),
        add_prefix_space=add_prefix_space, use_regex=use_regex,
        ignore_merges=bool(model.get("ignore_merges")),
        unk_id=None if unk_token is None else tokens_to_ids[unk_token],
        special_ids=_special_ids(tokens_to_ids, cls_sep, roles, source), source=source,
        data=data, roles=dict(roles) if roles else None)


def lowercase(text):
    """`tokenizers`' Lowercase: each character's full lower-case mapping on its own (Rust's
    char::to_lowercase), so a word-final "Σ" becomes "σ", where str.lower() gives "ς"."""
    if "\u03a3" not in text:
        return text.lower()
    return "".join(c.lower() for c in text)


def normalize(text, steps):
    """Applies tokenizer.json normalizer steps ("NFC", ..., "Lowercase") to a str."""
    for step in steps:
        text = lowercase(text) if step == "Lowercase" else unicodedata.normalize(step, text)
    return text


# ----------------------------------------------------------------------------------------------
# The tokenizer.
# ----------------------------------------------------------------------------------------------


class _AddedTokenMatcher:
    """Leftmost-longest matching of literal tokens with `tokenizers`' strip/word rules."""

    def __init__(self, tokens, contents):
        self.tokens = tokens
        order = sorted(range(len(tokens)), key=lambda i: -len(contents[i]))
        # Alternatives longest first: Python's leftmost-first alternation is then leftmost-longest.
        self._pattern = (re.compile("|".join(re.escape(contents[i]) for i in order))
                         if tokens else None)
        self._by_content = {contents[i]: tokens[i] for i in order}

    def split(self, text):
        """Pieces of `text`: list of (str, AddedToken or None), covering it in order."""
        if self._pattern is None or not text:
            return [(text, None)]
        pieces, done = [], 0
        for match in self._pattern.finditer(text):
            token = self._by_content[match.group(0)]
            start, stop = match.span()
            if token.single_word and (
                    (start > 0 and _is_word_char(text[start - 1]))
                    or (stop < len(text) and _is_word_char(text[stop]))):
                continue
            if token.lstrip:
                while start > done and _is_white_space(text[start - 1]):
                    start -= 1
            if token.rstrip:
                while stop < len(text) and _is_white_space(text[stop]):
                    stop += 1
            if done < start:
                pieces.append((text[done:start], None))
            pieces.append((text[start:stop], token))
            done = stop
        if done < len(text):
            pieces.append((text[done:], None))
        return pieces


def _is_white_space(char):
    return ord(char) in WHITE_SPACE


def _is_word_char(char):
    """Rust regex's \\w: alphabetic, marks, decimal numbers, connector punctuation."""
    category = unicodedata.category(char)
    return char.isalpha() or (category[0] in "MN" and category != "No") or category == "Pc"


class BpeTokenizer:
    """Byte-level BPE from a tokenizer.json, id for id equal to Hugging Face `tokenizers`.

    The interface matches `WordpieceTokenizer` (tokenize, encode, convert_tokens_to_ids,
    convert_ids_to_tokens, decode, vocab_size, cls_id / sep_id / pad_id / mask_id), so input
    packing (`pack_inputs`, `BertPackInputs`) works with either.

    Args:
      tokenizer_json: path of a tokenizer.json, its parsed dict, or a `BpeSpec`.
      roles: optional dict role ("cls", "sep", "pad", "mask", "unk") -> token, e.g. from a
        tokenizer_config.json; otherwise [CLS]/[SEP] come from the post-processor and the
        others from conventional names ([PAD], <pad>, [MASK], <mask>, ...).

    Attributes:
      cls_id, sep_id, pad_id, mask_id, unk_id: int ids of those roles, or None when the file
        has no such token.

    Examples:

    >>> tok = BpeTokenizer("tokenizer.json")  # doctest: +SKIP
    >>> tok.tokenize("Hello world")  # doctest: +SKIP
    ['Hello', 'Ġworld']
    """

    def __init__(self, tokenizer_json, roles=None):
        if isinstance(tokenizer_json, BpeSpec):
            spec = tokenizer_json
        else:
            kind, spec = read_tokenizer_json(tokenizer_json, roles)
            if kind != "bpe":
                raise ValueError(f"{tokenizer_json}: a WordPiece tokenizer.json; use "
                                 "load_tokenizer() to get a WordpieceTokenizer.")
        self.spec = spec
        self.inv_vocab = list(spec.vocab)
        self.vocab = {t: i for i, t in enumerate(spec.vocab) if t}
        byte_chars = bytes_to_unicode()
        self._byte_ids = [self.vocab.get(c) for c in byte_chars]
        self._merges = {}
        for rank, (left, right) in enumerate(spec.merges):
            ids = (self.vocab.get(left), self.vocab.get(right), self.vocab.get(left + right))
            if None in ids:
                missing = [t for t, i in zip((left, right, left + right), ids) if i is None][0]
                raise _error(spec.source, f"merge {rank} '{left} {right}' uses '{missing}', "
                                          "which is not in the vocabulary.")
            self._merges[ids[:2]] = (rank, ids[2])  # A repeated pair: the last rank wins.
        non_normalized = [t for t in spec.added_tokens if not t.normalized]
        normalized = [t for t in spec.added_tokens if t.normalized]
        self._raw_matcher = _AddedTokenMatcher(non_normalized,
                                               [t.content for t in non_normalized])
        self._normalized_matcher = _AddedTokenMatcher(
            normalized, [normalize(t.content, spec.normalizer) for t in normalized])
        ids = spec.special_ids
        self.cls_id, self.sep_id = ids.get("cls"), ids.get("sep")
        self.pad_id, self.mask_id = ids.get("pad"), ids.get("mask")
        self.unk_id = spec.unk_id if spec.unk_id is not None else ids.get("unk")
        self.special_token_ids = frozenset(t.id for t in spec.added_tokens if t.special)
        self._word_cache = {}

    # The bert_tf.text.Tokenizer interface: what callers ask instead of testing the kind.
    kind = "byte-level BPE"
    # A piece maps back only to the whitespace word it came from: its bytes need not be whole
    # characters, and the space before a word is folded into the word's first piece.
    subword_offsets = False

    @property
    def vocab_size(self):
        return len(self.inv_vocab)

    @property
    def do_lower_case(self):
        """True when the file's normalizer lower-cases (a tokenizer.json records its casing)."""
        return "Lowercase" in self.spec.normalizer

    def fingerprint(self):
        """SHA-256 of everything the ids depend on (for caches of tokenized data): str."""
        spec = self.spec
        parts = [list(spec.vocab), [list(m) for m in spec.merges],
                 [dataclasses.astuple(t) for t in spec.added_tokens], list(spec.normalizer),
                 spec.add_prefix_space, spec.use_regex, spec.ignore_merges, spec.unk_id]
        return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()

    def digest(self):
        """The fingerprint: vocabulary, merges, added tokens and settings (the casing is one of
        the normalizer's steps, so it is part of it)."""
        return self.fingerprint()

    def continuation_ids(self):
        """Ids of the tokens that continue a word (whole-word masking joins them to the word
        before): every token not starting with "Ġ" (the space; words are encoded as they read
        after one) other than special ones. frozenset of int."""
        return frozenset(i for t, i in self.vocab.items()
                         if not t.startswith("\u0120") and i not in self.special_token_ids)

    # -- stages ----------------------------------------------------------------------------

    def split_added_tokens(self, text):
        """Stage 1: list of (str, added token id or None); str pieces are normalized."""
        out = []
        for piece, token in self._raw_matcher.split(text):
            if token is not None:
                out.append((piece, token.id))
                continue
            piece = normalize(piece, self.spec.normalizer)
            out.extend((p, None if t is None else t.id)
                       for p, t in self._normalized_matcher.split(piece) if p)
        return out

    def pre_tokenize(self, piece):
        """Stage 2: the words (str) of a piece of text between added tokens."""
        if not piece:
            return []
        if self.spec.add_prefix_space and not piece.startswith(" "):
            piece = " " + piece
        if not self.spec.use_regex:
            return [piece]
        return gpt2_pattern().findall(piece)

    def word_ids(self, word):
        """Stage 3: BPE ids of one pre-tokenized word (str), cached."""
        cached = self._word_cache.get(word)
        if cached is not None:
            return cached
        data = word.encode("utf-8")
        whole = self.vocab.get("".join(bytes_to_unicode()[b] for b in data))
        if self.spec.ignore_merges and whole is not None:
            ids = [whole]
        else:
            ids = self._merge(data)
        if len(self._word_cache) >= _WORD_CACHE_LIMIT:
            self._word_cache.clear()
        self._word_cache[word] = ids
        return ids

    def _merge(self, data):
        """BPE of UTF-8 bytes: repeatedly merge the lowest-ranked adjacent pair (leftmost on
        ties), as `tokenizers`' priority queue does."""
        symbols = []
        for b in data:
            symbol = self._byte_ids[b]
            if symbol is None:
                if self.spec.unk_id is None:
                    continue  # tokenizers drops characters it cannot map when there is no unk.
                symbol = self.spec.unk_id
            symbols.append(symbol)
        merges = self._merges
        while len(symbols) > 1:
            best = None
            for i in range(len(symbols) - 1):
                found = merges.get((symbols[i], symbols[i + 1]))
                if found is not None and (best is None or found[0] < best[0]):
                    best = (found[0], i, found[1])
            if best is None:
                break
            _, i, new_id = best
            symbols[i:i + 2] = [new_id]
        return symbols

    # -- the WordpieceTokenizer interface ---------------------------------------------------

    def encode(self, text):
        """Ids of `text` (str or UTF-8 bytes): list of int, without [CLS]/[SEP]."""
        text = tokenization.as_text(text, "replace")
        ids = []
        for piece, added_id in self.split_added_tokens(text):
            if added_id is not None:
                ids.append(added_id)
                continue
            for word in self.pre_tokenize(piece):
                ids.extend(self.word_ids(word))
        return ids

    def encode_word(self, word, first=False):
        """Ids of one word of a whitespace-split sentence (CoNLL tokens), as the word
        tokenizes inside the sentence: list of int.

        Byte-level BPE folds the space before a word into its first token ("Ġworld"), so a
        word after the first is encoded with a space in front (as RoBERTa-style tagging does);
        the ids of the words, one after another, are then the ids of the words joined by
        single spaces. The first word gets a space only when the file's pre-tokenizer adds
        one (add_prefix_space).
        """
        return self.encode(word if first else " " + word)

    def encode_line(self, line):
        """Ids of one corpus line (a sentence of pre-training text): its str.split() words,
        each as it reads after a space, as `encode_word` encodes words inside a text."""
        words = line.split()
        return self.encode(" " + " ".join(words)) if words else []

    def span_forms(self, text):
        """The space-joined tokens `text` appears as among the words of a longer text that
        holds it (SQuAD's answer alignment): set of str. Its words are encoded as the longer
        text's words are (encode_word); the first word twice, with its leading space (`text`
        starts a word, "Ġ1" "8" "9" "5") and without (it starts inside one: "1895" in
        "(1895-1943)." is "Ġ(" "1" "8" "9" "5" ...)."""
        words = text.split()
        if not words:
            return set()
        rest = [i for word in words[1:] for i in self.encode_word(word)]
        return {" ".join(self.convert_ids_to_tokens(self.encode_word(words[0], first) + rest))
                for first in (False, True)}

    def tokenize(self, text):
        """Tokens of `text`: list of str in byte-level form ("Ġworld")."""
        return self.convert_ids_to_tokens(self.encode(text))

    def with_special_tokens(self, ids_a, ids_b=None):
        """[CLS] A [SEP] (B [SEP]) as the post-processor builds it: list of int."""
        if self.cls_id is None or self.sep_id is None:
            raise ValueError(f"{self.spec.source} has no [CLS]/[SEP] tokens (no post-processor "
                             "and no token named [CLS]/<s> and [SEP]/</s>).")
        out = [self.cls_id] + list(ids_a) + [self.sep_id]
        if ids_b is not None:
            out += list(ids_b) + [self.sep_id]
        return out

    def convert_tokens_to_ids(self, tokens):
        """Ids of `tokens`; unknown tokens map to unk_id (ValueError if there is none)."""
        out = []
        for token in tokens:
            index = self.vocab.get(token, self.unk_id)
            if index is None:
                raise ValueError(f"Token {token!r} is not in the vocabulary of "
                                 f"{self.spec.source}, which has no unk_token.")
            out.append(index)
        return out

    def convert_ids_to_tokens(self, ids):
        """Tokens of `ids`. Raises ValueError naming an id outside [0, vocab_size)."""
        inv, size = self.inv_vocab, len(self.inv_vocab)
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < size or not inv[i]:
                raise ValueError(f"Token id {i} is not in the vocabulary [0, {size}).")
            out.append(inv[i])
        return out

    def decode(self, ids, skip_special_tokens=False):
        """The text of `ids`: byte-level tokens back to bytes, added tokens as written.

        Invalid UTF-8 (a character cut between tokens) decodes to U+FFFD.
        """
        added = {t.id: t for t in self.spec.added_tokens}
        chunks, pending = [], bytearray()
        for i in ids:
            i = int(i)
            if skip_special_tokens and i in self.special_token_ids:
                continue
            token = self.convert_ids_to_tokens([i])[0]
            data = None if i in added else token_bytes(token)
            if data is None:
                chunks.append(pending.decode("utf-8", "replace"))
                pending = bytearray()
                chunks.append(token)
            else:
                pending += data
        chunks.append(pending.decode("utf-8", "replace"))
        return "".join(chunks)


# ----------------------------------------------------------------------------------------------
# Loading either kind of tokenizer.
# ----------------------------------------------------------------------------------------------


def _roles_from_config(directory):
    """Role -> token from tokenizer_config.json / special_tokens_map.json beside the file."""
    roles = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = os.path.join(directory, name)
        if not fileio.isfile(path):
            continue
        try:
            with fileio.open_file(path, "r", encoding="utf-8") as f:
                config = json.load(f)
        except (ValueError, OSError):
            continue
        for role in _ROLE_NAMES:
            value = config.get(f"{role}_token")
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                roles[role] = value
    return roles


def wordpiece_tokenizer_json(tokenizer):
    """The Hugging Face tokenizer.json of a `WordpieceTokenizer`: BERT's normalizer and
    pre-tokenizer, the WordPiece model over its vocabulary, [CLS] A [SEP] (B [SEP]) and its
    special tokens, as transformers' BertTokenizerFast writes one (dict, for json.dump).
    wordpiece_from_tokenizer_json reads it back to the same tokenizer; transformers loads it
    for models whose tokenizer class reads only tokenizer.json (ModernBERT's)."""
    tokens = tokenizer.inv_vocab
    cls, sep = tokens[tokenizer.cls_id], tokens[tokenizer.sep_id]

    def special(token, type_id):
        return {"SpecialToken": {"id": token, "type_id": type_id}}

    def sequence(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}

    special_ids = sorted({tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
                          tokenizer.mask_id})
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i in special_ids],
        # strip_accents null: accents go with lower-casing, as in BERT.
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None,
                       "lowercase": tokenizer.do_lower_case},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special(cls, 0), sequence("A", 0), special(sep, 0)],
            "pair": [special(cls, 0), sequence("A", 0), special(sep, 0), sequence("B", 1),
                     special(sep, 1)],
            "special_tokens": {token: {"id": token, "ids": [index], "tokens": [token]}
                               for token, index in ((cls, tokenizer.cls_id),
                                                    (sep, tokenizer.sep_id))}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": tokenizer.unk_token,
                  "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": tokenizer.max_input_chars_per_word,
                  "vocab": {token: index for index, token in enumerate(tokens)}},
    }


def wordpiece_from_tokenizer_json(data, source):
    """A `WordpieceTokenizer` for a WordPiece tokenizer.json (BERT's BertNormalizer rules)."""
    model = data["model"]
    vocab = model.get("vocab") or {}
    tokens = [""] * len(vocab)
    for token, index in vocab.items():
        if not 0 <= int(index) < len(vocab) or tokens[int(index)]:
            raise _error(source, f"model.vocab ids must be 0..{len(vocab) - 1}, each once; got "
                                 f"{index} for '{token}'.")
        tokens[int(index)] = token
    normalizer = data.get("normalizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        raise _error(source, f"a WordPiece model needs normalizer type 'BertNormalizer' (BERT's "
                             f"rules), got '{normalizer.get('type')}'.")
    lowercase = bool(normalizer.get("lowercase", True))
    strip_accents = normalizer.get("strip_accents")
    if strip_accents is not None and bool(strip_accents) != lowercase:
        raise _error(source, f"normalizer strip_accents={strip_accents} with lowercase="
                             f"{lowercase} has no BERT equivalent (expected null).")
    if model.get("continuing_subword_prefix", "##") != "##":
        raise _error(source, "model.continuing_subword_prefix must be '##'.")
    return tokenization.WordpieceTokenizer(
        tokens, do_lower_case=lowercase,
        max_input_chars_per_word=int(model.get("max_input_chars_per_word", 100)),
        unk_token=model.get("unk_token", "[UNK]"))


def load_tokenizer_json(path, roles=None):
    """A `BpeTokenizer` or `WordpieceTokenizer` for a tokenizer.json file.

    Args:
      path: the tokenizer.json.
      roles: dict role -> token overriding the special-token roles; by default read from a
        tokenizer_config.json / special_tokens_map.json in the same directory, if present.
    """
    if roles is None:
        roles = _roles_from_config(os.path.dirname(str(path)) or ".")
    kind, spec = read_tokenizer_json(path, roles)
    if kind == "wordpiece":
        return wordpiece_from_tokenizer_json(spec, f"tokenizer file '{path}'")
    return BpeTokenizer(spec)
