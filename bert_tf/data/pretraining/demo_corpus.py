"""The embedded default corpus: the Python reference manual that every CPython install carries.

`pydoc_data.topics` (stdlib) holds the text of the language reference's topics (about 460 KB of
English prose). It is always present offline, so the demo and the tests can pre-train on real text
without downloading anything. This module turns it into the pre-training input format: one
sentence per line, a blank line between documents; each titled section is one document.
"""

import dataclasses
import os
import re

from bert_tf import fileio
from bert_tf.fileio import write_text_atomic

# A heading is a line followed by a line of only *, = or - characters.
_UNDERLINE = re.compile(r"^\s*([*=\-^~])\1{2,}\s*$")
# End of sentence: . ! or ? followed by whitespace and an upper-case letter, quote or bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")
_SPACES = re.compile(r"\s+")


def _paragraphs(text):
    """Yields (is_heading, paragraph) with each paragraph's lines joined by single spaces."""
    lines = text.splitlines()
    block = []
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if _UNDERLINE.match(line):
            continue
        if line.strip() and _UNDERLINE.match(nxt):
            if block:
                yield False, " ".join(block)
                block = []
            yield True, line.strip()
            continue
        if not line.strip():
            if block:
                yield False, " ".join(block)
                block = []
            continue
        block.append(line.strip())
    if block:
        yield False, " ".join(block)


def split_sentences(paragraph):
    """Splits one paragraph of prose into sentences (a heuristic good enough for NSP pairs)."""
    paragraph = _SPACES.sub(" ", paragraph).strip()
    return [s for s in _SENTENCE_END.split(paragraph) if s]


def pydoc_documents(min_sentences=2):
    """The reference manual as documents: a list of documents, each a list of sentences.

    A document is one titled section of a topic; sections with fewer than `min_sentences`
    sentences are merged into the following one, so next-sentence pairs have material. Several
    topics quote the same section; repeats are dropped so held-out text is really unseen.
    """
    from pydoc_data.topics import topics  # stdlib; imported here to keep module import cheap

    documents = []
    for name in sorted(topics):
        current = []
        for is_heading, paragraph in _paragraphs(topics[name]):
            if is_heading:
                if len(current) >= min_sentences:
                    documents.append(current)
                    current = []
                continue
            current.extend(split_sentences(paragraph))
        if len(current) >= min_sentences:
            documents.append(current)
        elif current and documents:
            documents[-1].extend(current)
    seen = set()
    unique = []
    for doc in documents:
        if tuple(doc) not in seen:
            seen.add(tuple(doc))
            unique.append(doc)
    return unique


def short_documents(min_sentences=2, max_sentences=4):
    """Short documents, like news snippets: each paragraph of the reference manual with at
    least `min_sentences` sentences, cut after `max_sentences` (about 40-120 WordPiece tokens;
    the corpus of the packing benchmark and tests). A list of lists of sentences, deduplicated.
    """
    from pydoc_data.topics import topics

    documents, seen = [], set()
    for name in sorted(topics):
        for is_heading, paragraph in _paragraphs(topics[name]):
            sentences = split_sentences(paragraph)[:max_sentences]
            if is_heading or len(sentences) < min_sentences or tuple(sentences) in seen:
                continue
            seen.add(tuple(sentences))
            documents.append(sentences)
    return documents


def format_documents(documents):
    """The pre-training text format: one sentence per line, a blank line between documents."""
    return "\n\n".join("\n".join(doc) for doc in documents) + "\n"


def write_demo_corpus(train_path, eval_path=None, eval_every=10):
    """Writes the reference manual as a training corpus and, optionally, a held-out one.

    Every `eval_every`-th document goes to `eval_path` (when given) so evaluation uses text the
    model never trained on. Returns (num_train_documents, num_eval_documents).
    """
    documents = pydoc_documents()
    if eval_path is None:
        train, held_out = documents, []
    else:
        train = [d for i, d in enumerate(documents) if i % eval_every != eval_every - 1]
        held_out = [d for i, d in enumerate(documents) if i % eval_every == eval_every - 1]
        write_text_atomic(eval_path, format_documents(held_out))
    write_text_atomic(train_path, format_documents(train))
    return len(train), len(held_out)


@dataclasses.dataclass
class DemoDataConfig:
    """How the demo data is made; field names and defaults are bert-tf-prepare-demo-data's
    flags' (official_configs/pretraining/demo_tiny.flags reads output_dir's default)."""

    output_dir: str = "/tmp/bert_tf_demo"
    vocab_size: int = 4000
    do_lower_case: bool = True
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    dupe_factor: int = 5
    random_seed: int = 12345
    num_workers: int = 2


def prepare_demo_data(config):
    """Builds everything the demo pre-training run reads, from the embedded corpus.

    Writes to config.output_dir (which must exist or be creatable): corpus_train.txt,
    corpus_eval.txt, vocab.txt (WordPiece learned on the training corpus), train.tfrecord and
    eval.tfrecord (pre-training records in the original format). Returns a dict of the paths
    and counts.
    """
    output_dir, do_lower_case = config.output_dir, config.do_lower_case
    # Imported here: these pull in TensorFlow, which the corpus functions above do not need.
    from bert_tf.data.pretraining.create_pretraining_data import (PretrainingDataOptions,
                                                      create_pretraining_data)
    from bert_tf.text import build_vocab, write_vocab

    fileio.makedirs(output_dir)
    paths = {name: os.path.join(output_dir, name) for name in (
        "corpus_train.txt", "corpus_eval.txt", "vocab.txt", "train.tfrecord", "eval.tfrecord")}
    num_train_docs, num_eval_docs = write_demo_corpus(paths["corpus_train.txt"],
                                                      paths["corpus_eval.txt"])
    vocab = build_vocab(paths["corpus_train.txt"], config.vocab_size, do_lower_case)
    write_vocab(vocab, paths["vocab.txt"])
    options = PretrainingDataOptions(
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        dupe_factor=config.dupe_factor, random_seed=config.random_seed)
    train_stats = create_pretraining_data(
        paths["corpus_train.txt"], [paths["train.tfrecord"]], paths["vocab.txt"],
        do_lower_case=do_lower_case, options=options, num_workers=config.num_workers)
    eval_stats = create_pretraining_data(
        paths["corpus_eval.txt"], [paths["eval.tfrecord"]], paths["vocab.txt"],
        do_lower_case=do_lower_case, options=options, num_workers=config.num_workers)
    return dict(paths, vocab_size=len(vocab), train_documents=num_train_docs,
                eval_documents=num_eval_docs, train_instances=train_stats.instances,
                eval_instances=eval_stats.instances)
