"""Learning a byte-level BPE tokenizer.json (ModernBERT / RoBERTa style) from plain-text files.

Words are found as the tokenizer finds them (`bpe.BpeTokenizer`: the normalizer, then the GPT-2
pattern, each word's UTF-8 bytes as byte-level characters), so every learned token is one the
tokenizer can produce. The merges are learned as Hugging Face `tokenizers`' BpeTrainer learns
them: all 256 byte characters form the alphabet (any text stays encodable, nothing is [UNK]);
then, until the vocabulary is full, the most frequent adjacent pair of symbols over all words
(counted with the words' frequencies; ties go to the pair of lowest ids) becomes a new token,
merged in every word. On the same text and settings the merges equal `tokenizers`' own
(tests/text/test_bpe_trainer.py checks this against a file `tokenizers` trained).

Layout of the result: [PAD] [UNK] [CLS] [SEP] [MASK] get ids 0..4 (as `vocab_builder` gives
WordPiece vocabularies), then any extra reserved tokens, the 256 byte characters by code point,
then the learned tokens in the order they were learned. The post-processor is BERT's
"[CLS] $A [SEP]" / "[CLS] $A [SEP] $B [SEP]", and [MASK] swallows the space before it (lstrip,
as ModernBERT's), so "the [MASK] sat" puts the mask where the word "Ġcat" would be.
"""

import collections
import heapq
import json
import os

from absl import logging

from bert_tf import fileio
from bert_tf.text import bpe, corpus_files, tokenization, vocab_builder

# The alphabet: every byte, so the vocabulary can encode any text.
ALPHABET_SIZE = 256


def count_words(lines, normalizer=("NFC",), special_tokens=tokenization.SPECIAL_TOKENS):
    """Counts pre-tokenized words of `lines` as byte-level strings.

    Args:
      lines: iterable of str, each one sequence without its line ending (as `tokenizers`'
        train_from_iterator gets lines; its train(files) keeps the "\n", which adds "Ċ"
        words and pairs to count).
      normalizer: tokenizer.json normalizer steps applied first ("NFC", "Lowercase", ...).
      special_tokens: literal tokens cut out of the text before pre-tokenization (they are
        added tokens of the result, never parts of a word; `tokenizers`' trainer counts such
        text as words, so a corpus holding "[MASK]" literally learns other merges there).

    Returns:
      collections.Counter byte-level word (e.g. "Ġworld") -> count.
    """
    byte_chars = bpe.bytes_to_unicode()
    pattern = bpe.gpt2_pattern()
    raw = collections.Counter()
    for line in lines:
        for piece in _without_specials(line, special_tokens):
            raw.update(pattern.findall(bpe.normalize(piece, normalizer)))
    counts = collections.Counter()
    for word, count in raw.items():
        counts["".join(byte_chars[b] for b in word.encode("utf-8"))] += count
    return counts


def _without_specials(line, special_tokens):
    pieces = [line]
    for token in special_tokens:
        pieces = [p for piece in pieces for p in piece.split(token)]
    return pieces


class _Words:
    """The corpus's distinct words as lists of symbol ids, with each adjacent pair's count
    (weighted by word frequency) and the words it occurs in."""

    def __init__(self, words, counts):
        self.words = words  # list of list of int
        self.counts = counts  # list of int
        self.pair_counts = collections.Counter()
        self.where = collections.defaultdict(set)
        for index, symbols in enumerate(words):
            for pair in zip(symbols, symbols[1:]):
                self.pair_counts[pair] += counts[index]
                self.where[pair].add(index)

    def merge(self, pair, new_id):
        """Merges `pair` (left to right, not overlapping) in every word holding it.

        Returns: the pairs whose count grew (they need a fresh heap entry).
        """
        left, right = pair
        grown = set()
        for index in sorted(self.where.pop(pair, ())):
            old = self.words[index]
            new, i = [], 0
            while i < len(old):
                if i + 1 < len(old) and old[i] == left and old[i + 1] == right:
                    new.append(new_id)
                    i += 2
                else:
                    new.append(old[i])
                    i += 1
            if len(new) == len(old):
                continue
            # Exact bookkeeping: take the word's old pairs out and put its new pairs in.
            count = self.counts[index]
            before = collections.Counter(zip(old, old[1:]))
            after = collections.Counter(zip(new, new[1:]))
            for p, n in before.items():
                delta = after.get(p, 0) - n
                if delta:
                    self.pair_counts[p] += delta * count
                if p not in after and p != pair:
                    self.where[p].discard(index)
            for p, n in after.items():
                if n > before.get(p, 0):
                    self.pair_counts[p] += (n - before.get(p, 0)) * count
                    grown.add(p)
                self.where[p].add(index)
            self.words[index] = new
        self.pair_counts.pop(pair, None)
        return grown


def learn_merges(word_counts, num_merges, min_frequency=2, first_id=0):
    """Learns up to `num_merges` merges from byte-level word counts.

    Args:
      word_counts: dict byte-level word -> count (see `count_words`).
      num_merges: how many new tokens to learn at most.
      min_frequency: a pair seen fewer times than this is not merged (learning stops).
      first_id: id of the first alphabet character; only the order of ids matters for ties.

    Returns:
      (alphabet, merges): list of the 256 byte characters by code point, and list of (left,
      right) str pairs in the order learned (the merge ranks).
    """
    alphabet = sorted(bpe.bytes_to_unicode())
    tokens = list(alphabet)
    ids = {t: first_id + i for i, t in enumerate(alphabet)}
    names = {first_id + i: t for i, t in enumerate(alphabet)}
    words, counts = [], []
    for word, count in word_counts.items():
        words.append([ids[c] for c in word])
        counts.append(count)
    state = _Words(words, counts)
    # Max count first, then the lowest (left id, right id): heapq pops the smallest key.
    heap = [(-n, pair) for pair, n in state.pair_counts.items() if n > 0]
    heapq.heapify(heap)
    merges = []
    learned = 0
    while learned < num_merges and heap:
        negative, pair = heapq.heappop(heap)
        count = state.pair_counts.get(pair, 0)
        if count != -negative:  # Stale: the count fell since this entry was pushed.
            if count > 0:
                heapq.heappush(heap, (-count, pair))
            continue
        if count < max(min_frequency, 1):
            break
        token = names[pair[0]] + names[pair[1]]
        new_id = ids.get(token)
        if new_id is None:  # Another split of the same string may have made it already.
            new_id = first_id + len(tokens)
            ids[token] = new_id
            names[new_id] = token
            tokens.append(token)
            learned += 1
        merges.append((names[pair[0]], names[pair[1]]))
        for grown in state.merge(pair, new_id):
            n = state.pair_counts.get(grown, 0)
            if n > 0:
                heapq.heappush(heap, (-n, grown))
    return alphabet, merges


def tokenizer_json(alphabet, merges, special_tokens, do_lower_case):
    """A tokenizer.json dict: special tokens (ids 0..), alphabet, learned tokens in order."""
    vocab = {}
    for token in list(special_tokens) + list(alphabet):
        vocab.setdefault(token, len(vocab))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": t == "[MASK]",
              "rstrip": False, "normalized": False, "special": True} for t in special_tokens]

    def special(token, type_id=0):
        return {"SpecialToken": {"id": token, "type_id": type_id}}

    def sequence(name, type_id=0):
        return {"Sequence": {"id": name, "type_id": type_id}}

    steps = [{"type": "NFC"}] + ([{"type": "Lowercase"}] if do_lower_case else [])
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": steps} if len(steps) > 1 else steps[0],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]"), sequence("A"), special("[SEP]")],
            "pair": [special("[CLS]"), sequence("A"), special("[SEP]"), sequence("B", 1),
                     special("[SEP]", 1)],
            "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]}
                               for t in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{left} {right}" for left, right in merges]},
    }


def build_bpe_tokenizer(input_files, vocab_size, do_lower_case=False, *, reserved_tokens=(),
                        min_frequency=2):
    """Learns a byte-level BPE tokenizer.json from text files.

    Args:
      input_files: comma-separated globs (str) or a list of globs; UTF-8 text files, gzip or
        bzip2 compressed or not; each line is one sequence.
      vocab_size: int, the size of the result: special and reserved tokens, the 256 byte
        characters and the learned tokens (fewer when the corpus runs out of pairs seen
        `min_frequency` times).
      do_lower_case: lower-case the text first (a Lowercase normalizer after NFC); byte-level
        BPE models (ModernBERT, RoBERTa) are usually cased.
      reserved_tokens: extra special tokens placed right after [PAD] [UNK] [CLS] [SEP] [MASK].
      min_frequency: pairs seen fewer times are not merged.

    Returns:
      dict, the tokenizer.json content (`bpe.BpeTokenizer` and Hugging Face `tokenizers` read
      it).

    Raises:
      ValueError: a pattern matches no file, a file is binary or not UTF-8 (named), the files
        hold no words, or `vocab_size` leaves no room for the alphabet.
    """
    specials = list(tokenization.SPECIAL_TOKENS) + [
        t for t in reserved_tokens if t not in tokenization.SPECIAL_TOKENS]
    base = len(specials) + ALPHABET_SIZE
    if vocab_size < base:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {len(specials)} special "
                         f"tokens plus the {ALPHABET_SIZE} byte characters every byte-level BPE "
                         f"vocabulary holds ({base}).")
    files = vocab_builder.expand_input_files(input_files)
    for path in files:  # Refuse a binary or non-UTF-8 file before counting, not after.
        corpus_files.check_corpus_file(path)
    normalizer = ("NFC", "Lowercase") if do_lower_case else ("NFC",)
    counts = collections.Counter()
    for path in files:
        counts.update(count_words(vocab_builder.read_text(path).split("\n"), normalizer,
                                  specials))
    if not any(bpe.token_bytes(word).strip() for word in counts):  # Nothing but whitespace.
        raise ValueError(f"The input files hold no words: {', '.join(files)}.")
    logging.info("Counted %d distinct words (%d in all) in %d file(s).", len(counts),
                 sum(counts.values()), len(files))
    alphabet, merges = learn_merges(counts, vocab_size - base, min_frequency,
                                    first_id=len(specials))
    logging.info("Learned %d merges (vocabulary %d, target %d).", len(merges),
                 base + len(merges), vocab_size)
    return tokenizer_json(alphabet, merges, specials, do_lower_case)


def write_tokenizer_json(data, path, expected=fileio.NOT_CHECKED):
    """Writes tokenizer.json content to `path`, atomically (an old file stays whole on error;
    `expected`: fileio.write_bytes_atomic's).

    Raises:
      FileNotFoundError: the output directory does not exist.
    """
    directory = os.path.dirname(fileio.abspath(path))
    if not fileio.is_remote(path) and not os.path.isdir(directory):
        raise FileNotFoundError(f"Output directory '{directory}' of '{path}' does not exist.")
    fileio.write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n",
                             expected)
