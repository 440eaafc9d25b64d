"""The embedded default corpus: the Python reference manual that every CPython install carries.

`pydoc_data.topics` (stdlib) holds the text of the language reference's topics (about 460 KB of
English prose). It is always present offline, so the demo and the tests can pre-train on real text
without downloading anything. This module turns it into the pre-training input format: one
sentence per line, a blank line between documents; each titled section is one document.
"""

import csv
import dataclasses
import io
import os
import random
import re

from bert_tf import fileio
from bert_tf.file_names import VOCAB_FILE
from bert_tf.fileio import write_text_atomic

# A heading is a line followed by a line of only *, = or - characters.
_UNDERLINE = re.compile(r"^\s*([*=\-^~])\1{2,}\s*$")
# End of sentence: . ! or ? followed by whitespace and an upper-case letter, quote or bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")
_SPACES = re.compile(r"\s+")
# The border lines of the manual's ASCII tables ("+-----+---+", "|=====|===|").
_TABLE_BORDER = re.compile(r"^\s*[+|][-=+|]*[+|]\s*$")


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
        if not _TABLE_BORDER.match(line):
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


# The demo's labelled sentences: a sentence of the reference manual is labelled by the kind of
# topic it comes from. (Expressions, a third kind, overlap both and halve the tiny model's margin.)
STATEMENT_TOPICS = ("assert", "assignment", "async", "augassign", "break", "class", "compound",
                    "continue", "del", "else", "for", "function", "global", "if", "import",
                    "nonlocal", "pass", "raise", "return", "try", "while", "with", "yield")
TYPE_TOPICS = ("bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object",
               "bltin-type-objects", "callable-types", "dict", "floating", "formatstrings",
               "imaginary", "integers", "lists", "numbers", "numeric-types", "sequence-types",
               "string-methods", "strings", "truth", "types", "typesfunctions", "typesmapping",
               "typesmethods", "typesmodules", "typesseq", "typesseq-mutable")
CLASSIFICATION_LABELS = ("statement", "type")


def labelled_sentences(min_words=5, max_words=40):
    """(sentence, label) pairs: each sentence of 5-40 words from the reference manual's
    statement topics ("statement") or built-in type topics ("type"), first occurrence only, in
    topic order. About 640 and 1,020 of them."""
    from pydoc_data.topics import topics

    rows, seen = [], set()
    for label, names in zip(CLASSIFICATION_LABELS, (STATEMENT_TOPICS, TYPE_TOPICS)):
        for name in names:
            for is_heading, paragraph in _paragraphs(topics.get(name, "")):
                for sentence in [] if is_heading else split_sentences(paragraph):
                    if min_words <= len(sentence.split()) <= max_words and sentence not in seen:
                        seen.add(sentence)
                        rows.append((sentence, label))
    return rows


def write_classification_data(directory):
    """Writes train.csv, dev.csv and test.csv (columns text,label) of labelled_sentences to
    `directory`: every tenth sentence to dev, the one after it to test, the rest (80%) to train.
    Returns {file name: number of rows}."""
    splits = {"train.csv": [], "dev.csv": [], "test.csv": []}
    names = ["dev.csv", "test.csv"] + ["train.csv"] * 8
    for i, row in enumerate(labelled_sentences()):
        splits[names[i % 10]].append(row)
    fileio.makedirs(directory)
    for name, rows in splits.items():
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["text", "label"])
        writer.writerows(rows)
        write_text_atomic(os.path.join(directory, name), text.getvalue())
    return {name: len(rows) for name, rows in splits.items()}


def retrieval_pairs(seed=0):
    """(query, passage) pairs for sentence embeddings, the inverse cloze task: of each short
    document (`short_documents`) one sentence drawn at random is the query and the document's
    other sentences, joined, its passage. About 740 pairs."""
    rng = random.Random(seed)
    pairs = []
    for document in short_documents(min_sentences=2, max_sentences=5):
        i = rng.randrange(len(document))
        pairs.append((document[i], " ".join(document[:i] + document[i + 1:])))
    return pairs


def write_embedding_data(directory):
    """Writes pairs.tsv and dev_pairs.tsv (columns query, passage; every tenth pair to dev) of
    retrieval_pairs, and corpus.txt (the dev passages, one per line: a corpus to search) to
    `directory`, for bert-tf-embed. Returns {file name: number of rows}."""
    pairs = [tuple(" ".join(text.split()) for text in pair) for pair in retrieval_pairs()]
    splits = {"pairs.tsv": [p for i, p in enumerate(pairs) if i % 10],
              "dev_pairs.tsv": [p for i, p in enumerate(pairs) if not i % 10]}
    fileio.makedirs(directory)
    for name, rows in splits.items():
        write_text_atomic(os.path.join(directory, name), "query\tpassage\n" + "".join(
            f"{query}\t{passage}\n" for query, passage in rows))
    write_text_atomic(os.path.join(directory, "corpus.txt"),
                      "".join(f"{passage}\n" for _, passage in splits["dev_pairs.tsv"]))
    return dict({name: len(rows) for name, rows in splits.items()},
                **{"corpus.txt": len(splits["dev_pairs.tsv"])})


def cut_long_sentences(sentences, tokenizer, max_pieces):
    """`sentences` with each one longer than `max_pieces` WordPiece tokens cut, between words,
    into consecutive parts of at most that many (a single longer word stays whole)."""
    result = []
    for sentence in sentences:
        if len(tokenizer.tokenize(sentence)) <= max_pieces:
            result.append(sentence)
            continue
        part, pieces = [], 0
        for word in sentence.split():
            count = len(tokenizer.tokenize(word))
            if part and pieces + count > max_pieces:
                result.append(" ".join(part))
                part, pieces = [], 0
            part.append(word)
            pieces += count
        result.append(" ".join(part))
    return result


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
    eval.tfrecord (pre-training records in the original format), classify/{train,dev,test}.csv,
    a small labelled set for fine-tuning (write_classification_data), and embed/ (pairs.tsv,
    dev_pairs.tsv, corpus.txt: sentence-embedding pairs, write_embedding_data). Returns a dict
    of the paths and counts.
    """
    output_dir, do_lower_case = config.output_dir, config.do_lower_case
    # Imported here, as only preparing the data needs them (none imports TensorFlow): the corpus
    # functions above stay light for the tests and notebooks that use them alone.
    from bert_tf.data.pretraining.create_pretraining_data import (PretrainingDataOptions,
                                                      create_pretraining_data)
    from bert_tf.text import WordpieceTokenizer, build_vocab, write_vocab

    fileio.makedirs(output_dir)
    paths = {name: os.path.join(output_dir, name) for name in (
        "corpus_train.txt", "corpus_eval.txt", VOCAB_FILE, "train.tfrecord", "eval.tfrecord")}
    num_train_docs, num_eval_docs = write_demo_corpus(paths["corpus_train.txt"],
                                                      paths["corpus_eval.txt"])
    vocab = build_vocab(paths["corpus_train.txt"], config.vocab_size, do_lower_case)
    write_vocab(vocab, paths[VOCAB_FILE])
    # The manual quotes grammar rules and listings as one "sentence" of hundreds of pieces;
    # cut those at the record length instead of truncating them (and warning about it).
    tokenizer = WordpieceTokenizer(paths[VOCAB_FILE], do_lower_case=do_lower_case)
    for name in ("corpus_train.txt", "corpus_eval.txt"):
        with fileio.open_file(paths[name], encoding="utf-8") as f:
            documents = [doc.split("\n") for doc in f.read().strip("\n").split("\n\n")]
        write_text_atomic(paths[name], format_documents(
            [cut_long_sentences(doc, tokenizer, config.max_seq_length - 3) for doc in documents]))
    options = PretrainingDataOptions(
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        dupe_factor=config.dupe_factor, random_seed=config.random_seed)
    train_stats = create_pretraining_data(
        paths["corpus_train.txt"], [paths["train.tfrecord"]], paths[VOCAB_FILE],
        do_lower_case=do_lower_case, options=options, num_workers=config.num_workers)
    eval_stats = create_pretraining_data(
        paths["corpus_eval.txt"], [paths["eval.tfrecord"]], paths[VOCAB_FILE],
        do_lower_case=do_lower_case, options=options, num_workers=config.num_workers)
    paths["classify"] = os.path.join(output_dir, "classify")
    classification_rows = write_classification_data(paths["classify"])
    paths["embed"] = os.path.join(output_dir, "embed")
    embedding_rows = write_embedding_data(paths["embed"])
    return dict(paths, vocab_size=len(vocab), train_documents=num_train_docs,
                classification_rows=classification_rows, embedding_rows=embedding_rows,
                eval_documents=num_eval_docs, train_instances=train_stats.instances,
                eval_instances=eval_stats.instances)
