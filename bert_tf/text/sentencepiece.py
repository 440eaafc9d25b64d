"""SentencePiece models (ALBERT's `30k-clean.model`, Hugging Face's `spiece.model`) in Python.

`SentencePieceTokenizer` reads a SentencePiece model file and tokenizes as transformers'
SentencePiece-based `AlbertTokenizer` does around the SentencePiece library (ALBERT's own
preprocessing, plus the quotes and the special tokens written in the text), with ALBERT's cut
of digit-comma pieces:

1. the special tokens written in the text ("[MASK]", "[CLS]", ...: the model's control pieces
   and its unknown piece) are split out first and keep their ids;
2. each stretch of text between them is prepared: whitespace runs become one space and the
   ends are stripped, the quotes ``...'' become '"', NFKD with the combining marks dropped
   (ALBERT strips accents whatever the casing), then lower case when `do_lower_case`;
3. SentencePiece segments it (with its own normaliser and the space marked as U+2581);
4. a piece that ends in a digit and a comma ("1990,") is cut before the comma and the
   digits re-segmented, as ALBERT's tokenizer does (so numbers read alike before a comma).

The in-graph twin is `bert_tf.text.sentencepiece_layer.SentencePieceTokenizerLayer`
(TensorFlow Text's SentencePiece op on the same model bytes); this module needs no TensorFlow.
"""

import hashlib
import re
import unicodedata

from bert_tf import fileio
from bert_tf.text import tokenization

# SentencePiece's mark of a word start (the space before a word).
WORD_START = "\u2581"

# Special roles by the names SentencePiece vocabularies give them (ALBERT: [CLS] [SEP]
# [MASK] <pad> <unk>; XLNet and T5-style models: <cls> <sep> <mask> or <s> </s>).
_ROLE_NAMES = {
    "cls": ("[CLS]", "<cls>", "<s>"),
    "sep": ("[SEP]", "<sep>", "</s>"),
    "pad": ("<pad>", "[PAD]"),
    "mask": ("[MASK]", "<mask>"),
}


def import_library():
    """The `sentencepiece` package (a dependency of bert_tf), or ImportError saying so."""
    try:
        import sentencepiece
    except ImportError:
        raise ImportError("SentencePiece models need the sentencepiece package: "
                          "pip install 'sentencepiece>=0.2.2'") from None
    return sentencepiece


# The punctuation ALBERT's whole-word rule lets a word hold (no apostrophe, "<", "=" or ">").
_WORD_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~') | {"\u20ac", "\u00a3"}
_WORD_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz") | _WORD_PUNCTUATION


def _continues_a_word(piece):
    """ALBERT's rule (see SentencePieceTokenizer.continuation_ids): bool."""
    if piece.startswith((WORD_START, "<")) or piece in _WORD_PUNCTUATION:
        return False
    return all(c.lower() in _WORD_CHARACTERS for c in piece)


def prepare_text(text, do_lower_case):
    """Step 2 of the module's recipe (str -> str): whitespace, quotes, accents, casing."""
    return prepare_characters(" ".join(text.split()), do_lower_case)


def prepare_characters(text, do_lower_case):
    """Step 2 but for whitespace (str -> str): quotes, accents, casing."""
    text = text.replace("``", '"').replace("''", '"')
    text = "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c))
    return text.lower() if do_lower_case else text


def ends_in_digit_comma(piece):
    """True for a piece step 4 cuts: longer than one character, a digit then a comma."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


class SentencePieceTokenizer:
    """A SentencePiece model file as ALBERT tokenizes with it (see the module's recipe).

    Implements `bert_tf.text.Tokenizer`.

    Args:
      model_file: path of a SentencePiece model (`*.model`), or the model's bytes.
      do_lower_case: lower-case the text before segmenting (ALBERT's released models: True).
        A SentencePiece model does not record it; a model directory says it beside the file.

    Attributes:
      cls_id, sep_id, pad_id, mask_id, unk_id: ids of the special roles (None where the model
        has no such piece).
      model_proto: the model file's bytes (what the in-graph layer and exports carry).

    Raises:
      FileNotFoundError: no such file.
      ValueError: naming the file: not a SentencePiece model, or one without an unknown piece.
    """

    kind = "SentencePiece"
    # Pieces map back only to their whitespace word: the text is normalised before SentencePiece
    # sees it (NFKD, accents dropped, its own normaliser), so character offsets inside a word
    # are not kept; answers and tags are whole words, as with byte-level BPE.
    subword_offsets = False

    def __init__(self, model_file, do_lower_case=True):
        if isinstance(model_file, bytes):
            self.source, proto = "SentencePiece model", model_file
        else:
            self.source = f"tokenizer file '{model_file}'"
            problem = fileio.not_a_file(model_file, self.source)
            if problem:
                raise FileNotFoundError(problem)
            with fileio.open_file(model_file, "rb") as f:
                proto = f.read()
        self.model_proto = proto
        self.do_lower_case = bool(do_lower_case)
        self._load()

    def _load(self):
        sentencepiece = import_library()
        processor = sentencepiece.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(self.model_proto)
        except (RuntimeError, OSError, TypeError) as e:
            detail = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise ValueError(f"{self.source}: not a SentencePiece model ({detail}).") from None
        self._processor = processor
        size = processor.get_piece_size()
        self.inv_vocab = [processor.id_to_piece(i) for i in range(size)]
        self.vocab = {}
        for index, piece in enumerate(self.inv_vocab):
            self.vocab.setdefault(piece, index)
        unk = processor.unk_id()
        if not 0 <= unk < size:
            raise ValueError(f"{self.source}: the model has no unknown piece (<unk>); bert_tf "
                             "needs one for text outside the vocabulary.")
        self.unk_id = unk
        for role, names in _ROLE_NAMES.items():
            found = next((self.vocab[n] for n in names if n in self.vocab), None)
            if role == "pad" and 0 <= processor.pad_id() < size:
                found = processor.pad_id()
            setattr(self, f"{role}_id", found)
        # Written in the text, these keep their ids (Hugging Face's special tokens): the
        # control pieces ([CLS], [SEP], [MASK], <pad>) and the unknown piece.
        self.special_token_ids = frozenset(
            [i for i in range(size) if processor.is_control(i)] + [unk])
        specials = sorted({self.inv_vocab[i] for i in self.special_token_ids},
                          key=lambda t: (-len(t), t))
        self._special_pattern = re.compile("|".join(re.escape(t) for t in specials))

    def __getstate__(self):
        # The SentencePiece processor does not pickle; worker processes rebuild it.
        state = dict(self.__dict__)
        del state["_processor"], state["_special_pattern"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._load()

    @property
    def vocab_size(self):
        return len(self.inv_vocab)

    def digest(self):
        """Hex SHA-256 of the model file's bytes (pieces, scores and normaliser)."""
        return hashlib.sha256(self.model_proto).hexdigest()

    def fingerprint(self):
        """Hex SHA-256 of the model and the casing (cache keys)."""
        return hashlib.sha256(self.model_proto + f"|lower={self.do_lower_case}".encode()
                              ).hexdigest()

    def continuation_ids(self):
        """Ids of the pieces that continue a word (whole-word and n-gram masking join them to
        the piece before), by ALBERT's rule for SentencePiece: a piece starts a word when it
        starts with U+2581 or "<", is one punctuation character, or holds any character other
        than the letters a-z (either case) and that punctuation (a digit, another script: such
        pieces are words of their own); the others continue one. frozenset of int."""
        return frozenset(i for i, piece in enumerate(self.inv_vocab)
                         if i not in self.special_token_ids and _continues_a_word(piece))

    # -- segmenting -------------------------------------------------------------------------

    def split_special_tokens(self, text):
        """Step 1: list of (str, special id or None)."""
        out, start = [], 0
        for found in self._special_pattern.finditer(text):
            if found.start() > start:
                out.append((text[start:found.start()], None))
            out.append((found.group(), self.vocab[found.group()]))
            start = found.end()
        if start < len(text):
            out.append((text[start:], None))
        return out

    @property
    def processor(self):
        """The SentencePiece library's processor of the model
        (sentencepiece.SentencePieceProcessor)."""
        return self._processor

    def segment(self, text):
        """Steps 2-4 for a stretch of text without special tokens: list of str pieces."""
        return self.cut_digit_commas(
            self._processor.encode_as_pieces(prepare_text(text, self.do_lower_case)))

    def cut_digit_commas(self, pieces):
        """Step 4 on SentencePiece's pieces (list of str): each piece that ends in a digit and
        a comma becomes its digits, segmented alone, and ","; list of str."""
        out = []
        for piece in pieces:
            if not ends_in_digit_comma(piece):
                out.append(piece)
                continue
            digits = self._processor.encode_as_pieces(piece[:-1].replace(WORD_START, ""))
            if not piece.startswith(WORD_START) and digits and digits[0].startswith(WORD_START):
                # The digits continue a word here; re-segmented alone they would start one.
                digits = digits[1:] if digits[0] == WORD_START else [digits[0][1:]] + digits[1:]
            out.extend(digits + [piece[-1]])
        return out

    def tokenize(self, text):
        """Pieces of a text: list of str ("\u2581the")."""
        text = tokenization.as_text(text, "replace")
        out = []
        for chunk, special in self.split_special_tokens(text):
            out.extend([chunk] if special is not None else self.segment(chunk))
        return out

    def encode(self, text):
        """Ids of a text: list of int, without [CLS]/[SEP]."""
        return self.convert_tokens_to_ids(self.tokenize(text))

    def encode_word(self, word, first=False):
        """Ids of one whitespace-separated word: every word, the first too, starts with
        U+2581, so the ids of the words one after another are the ids of the words joined by
        single spaces."""
        del first
        return self.encode(word)

    def encode_line(self, line):
        """Ids of one corpus line as pre-training reads it."""
        return self.encode(line)

    def span_forms(self, text):
        """The space-joined pieces `text` appears as among the words of a longer text: set
        of str (its words read alike anywhere, so one form)."""
        return {" ".join(self.tokenize(text))} if text.split() else set()

    def convert_tokens_to_ids(self, tokens):
        """Ids of pieces; a piece outside the vocabulary maps to unk_id."""
        return [self.vocab.get(token, self.unk_id) for token in tokens]

    def convert_ids_to_tokens(self, ids):
        """Pieces of ids. Raises ValueError naming an id outside [0, vocab_size)."""
        size = len(self.inv_vocab)
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < size:
                raise ValueError(f"Token id {i} is not in the vocabulary [0, {size}).")
            out.append(self.inv_vocab[i])
        return out

    def decode(self, ids, skip_special_tokens=False):
        """The text of ids (the prepared text: lower case, accents dropped); special tokens
        as written ("[MASK]") unless skipped."""
        self.convert_ids_to_tokens(ids)  # Checks the range.
        words, run = [], []
        for i in ids:
            i = int(i)
            if i in self.special_token_ids:
                if run:
                    words.append(self._processor.decode_ids(run))
                    run = []
                if not skip_special_tokens:
                    words.append(self.inv_vocab[i])
            else:
                run.append(i)
        if run:
            words.append(self._processor.decode_ids(run))
        return " ".join(w for w in words if w)
