"""Reading the pre-training corpus: documents from text files, in chunks of consecutive documents.

One sentence per line, a blank line between documents; gzip and bzip2 files are decompressed
(recognised by their first bytes); a binary or mostly non-UTF-8 file is refused, naming it.
create_pretraining_data and the Beam pipeline make instances from these chunks
(instances.InstanceMaker). No TensorFlow here.
"""

import dataclasses
import os

from absl import logging

from bert_tf.data.patterns import has_scheme
from bert_tf.text import corpus_files

# Lines of a file reported individually for invalid UTF-8 before only a total is logged.
_MAX_DECODE_WARNINGS_PER_FILE = 3


@dataclasses.dataclass
class DocumentChunk:
    """Up to documents_per_chunk + 1 consecutive documents of the corpus, as raw text.

    Documents are numbered within their file, and a chunk may hold the end of one file and the
    start of the next (files are read in the sorted input order).

    Args:
      keys: list of (file_index, document_index) per document: the file's position in the
        sorted input file list and the document's index within that file (documents count
        from 0 and only documents with at least one non-blank line are counted). Both are part
        of every seed.
      documents: list of documents, each a list of stripped, non-empty lines (sentences).
      num_bytes: input bytes read since the previous chunk (for progress reporting).
    """

    keys: list
    documents: list
    num_bytes: int = 0


def file_size(path):
    """Bytes of a local or tf.io.gfile file (TensorFlow loaded for a path with a scheme only)."""
    if has_scheme(path):
        import tensorflow as tf

        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def iter_file_documents(path):
    """Reads one input file's documents, streaming (one document in memory at a time).

    Blank (or whitespace-only) lines separate documents; repeated blank lines are one separator.
    Invalid UTF-8 is replaced by U+FFFD with a warning naming the file and line. gzip and bzip2
    files are decompressed (see bert_tf.text.corpus_files); a damaged stream raises ValueError
    naming the file and the line reached.

    Args:
      path: the input text file.

    Yields:
      (lines, num_bytes): a document as a list of stripped, non-empty lines, and the input bytes
      read since the previous yield (of the file as stored: compressed bytes for gzip/bzip2).
      A last (lines=None, num_bytes) reports trailing bytes that held no document.
    """
    current = []
    num_documents = num_bytes = bad_lines = num_lines = 0
    line_number = 0
    # Progress counts the bytes of the file as stored: compressed ones for gzip/bzip2 input.
    stored_read = 0

    def stored_bytes(f, content_bytes):
        nonlocal stored_read
        position = corpus_files.stored_bytes_read(f)
        if position is None:
            return content_bytes
        read, stored_read = position - stored_read, position
        return read

    with corpus_files.open_corpus(path) as f:
        try:
            for line_number, raw in enumerate(f, start=1):
                num_bytes += len(raw)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    line = raw.decode("utf-8", errors="replace")
                    bad_lines += 1
                    if bad_lines <= _MAX_DECODE_WARNINGS_PER_FILE:
                        logging.warning("%s:%d: invalid UTF-8 (%s); replaced the bad bytes with "
                                        "U+FFFD.", path, line_number, e.reason)
                line = line.strip()
                if line:
                    num_lines += 1
                    current.append(line)
                    continue
                if current:
                    num_documents += 1
                    yield current, stored_bytes(f, num_bytes)
                    current, num_bytes = [], 0
        except corpus_files.STREAM_ERRORS as e:
            # A local disk error, or (mostly) a gzip/bzip2 stream cut short.
            raise ValueError(f"{path}: cannot read past line {line_number} ({e}); the file is "
                             "truncated or corrupt.") from None
        num_bytes = stored_bytes(f, num_bytes)
    if current:
        num_documents += 1
        yield current, num_bytes
        num_bytes = 0
    if num_bytes:
        yield None, num_bytes
    if bad_lines > _MAX_DECODE_WARNINGS_PER_FILE:
        logging.warning("%s: %d lines held invalid UTF-8 in total (bad bytes replaced).",
                        path, bad_lines)
    if num_documents == 1 and num_lines > 1:
        logging.info("%s has no blank line between sentences: read as one document of %d "
                     "sentences.", path, num_lines)


def iter_document_chunks(input_files, documents_per_chunk):
    """Cuts the documents of all input files, read in order as one stream, into DocumentChunks.

    Chunks hold documents_per_chunk documents and may span file boundaries, so random next
    segments come from other documents even when every file holds a single document. The last
    chunk holds between 2 and documents_per_chunk + 1 documents (when the corpus has at least
    two), never one alone. Only a chunk's worth of documents is in memory at a time.

    Args:
      input_files: the input text files, in the order that defines file indexes.
      documents_per_chunk: documents per chunk (>= 2).

    Yields:
      DocumentChunk, in corpus order; a corpus without documents yields one empty chunk
      carrying its byte count.
    """
    keys, documents = [], []
    num_bytes = 0
    for file_index, path in enumerate(input_files):
        document_index = 0
        for lines, read_bytes in iter_file_documents(path):
            num_bytes += read_bytes
            if lines is None:
                continue
            keys.append((file_index, document_index))
            documents.append(lines)
            document_index += 1
            # Two documents are held back, so the last chunk cannot end up with one alone.
            if len(documents) == documents_per_chunk + 2:
                yield DocumentChunk(keys[:-2], documents[:-2], num_bytes)
                keys, documents, num_bytes = keys[-2:], documents[-2:], 0
    if documents or num_bytes:
        yield DocumentChunk(keys, documents, num_bytes)


def nonempty_input_files(input_files):
    """Drops (with a warning) zero-byte files; raises ValueError if every file is empty or
    naming the first file that is not text (binary, mostly not UTF-8, or a damaged gzip/bzip2
    file; see bert_tf.text.corpus_files), before any work starts."""
    kept = []
    for path in input_files:
        if file_size(path) == 0:
            logging.warning("Input file %s is empty; skipping it.", path)
        else:
            corpus_files.check_corpus_file(path)
            kept.append(path)
    if not kept:
        raise ValueError(f"All input files are empty: {', '.join(input_files)}.")
    return kept
