"""Turns a text corpus into masked-LM + next-sentence pre-training TFRecords, streaming.

Also makes the records of two BERT-family recipes: ALBERT's sentence-order prediction and
SpanBERT's span masking (see "BERT-family options" below).

Input format (as google-research/bert): UTF-8 text, one sentence per line, a blank line between
documents; gzip or bzip2 files (recognised by their first bytes) are decompressed on the fly,
and a binary or mostly non-UTF-8 file is refused, naming it, before any work starts. Output:
tf.train.Example records (see tfrecord_io) that bert_tf.data.pretraining_dataset
reads.

The per-document algorithm follows the original create_pretraining_data.py:
  * a target length of max_seq_length - 3 tokens, or with probability short_seq_prob a random
    length in [2, max_seq_length - 3] (chosen once per document and dupe);
  * sentences are accumulated until the target is reached; a random split point makes segment A;
  * segment B is the rest of the accumulated sentences, or with probability 0.5 (always when only
    one sentence was accumulated) sentences from a random other document (label 1), in which case
    the unused sentences are put back for the next instance;
  * the pair is truncated to max_seq_length - 3 tokens, one token at a time from the longer side,
    from its front or back at random;
  * min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob))) positions (len
    counts [CLS] and the two [SEP]) are chosen among non-special tokens (whole words when
    do_whole_word_mask: a "##" piece joins the word before it); each is replaced by [MASK] 80%
    of the time, by a random vocabulary id 10% (any id, as the original) and kept 10%; positions
    are sorted.

BERT-family options (each off by default; with all off the records are those of the
algorithm above):
  * sentence_order_prediction (ALBERT's SOP): segment B is always the text that follows A in
    the document, and with probability 0.5 the two are swapped (next_sentence_labels = 1 means
    swapped). A chunk of one sentence is split at a random token into A and B (ALBERT instead
    pairs it with a random document's text, an NSP negative labelled as a swap); a one-token
    chunk makes no instance. The pair is swapped before truncation.
  * do_span_mask (SpanBERT): instead of single tokens or words, spans of whole words are
    masked, each starting at a random word and max_span_length words long at most, with a
    length drawn from a geometric distribution (p = span_geometric_p) truncated to
    [1, max_span_length] (mean 3.8 words for 0.2 and 10), until the same budget of
    predictions is used (a word that would overshoot it ends its span; a span never crosses
    [SEP] and never touches another span, so its boundary tokens are unmasked). The
    80/10/10 replacement is decided once per span, as SpanBERT does. Records gain
    span_left_boundaries and span_right_boundaries (see tfrecord_io) for the span-boundary
    objective.
  * ngram_mask = N (ALBERT's n-gram masking): spans of n = 1..N whole words with p(n)
    proportional to 1 / n (ALBERT's --ngram=3 and favor_shorter_ngram), placed and replaced
    as do_span_mask's spans are; the records are plain (no span boundaries). ALBERT's own
    code lets two n-grams touch and draws the 80/10/10 replacement per token.

Packing (pack_sequences, off by default; docs/packing.md): the same instances are made, then
all instances of a chunk (every dupe) are packed whole, best-fit decreasing, into rows of
max_seq_length tokens holding at most max_instances_per_row instances and
max_predictions_per_seq predictions (P counts per row then, and caps each instance too, as
unpacked). Rows depend only on the chunk, so the output stays independent of --num_workers and
the Beam pipeline writes the same rows. Records gain instance_ids and next_sentence_positions /
_weights (see tfrecord_io).

What differs from the original, and why:
  * Streaming instead of whole-corpus-in-memory. The original reads every document of every file,
    shuffles them and all instances in memory, which does not scale. Here the documents of all
    input files, read in sorted file order as one stream, are cut into chunks of
    `documents_per_chunk` consecutive documents (a chunk may span file boundaries, so a corpus of
    one document per file still gets its random segments from other documents; the last chunk
    takes up to one extra document so that it never holds a single document alone); the random
    next segment is drawn from another document of the same chunk (not of the whole corpus), and
    finished records pass through a bounded shuffle buffer (`shuffle_buffer_size` records) on
    their way to the shards. Memory is bounded by those two sizes and the 2 * num_workers chunks
    in flight, whatever the corpus size. Only a corpus of a single document draws its random
    segments from that same document (as the original would); that is warned about.
  * Seeding per chunk. Each (chunk, dupe) gets its own random.Random (instance layouts,
    whole-word and span masking) and numpy Generator (truncation, default masking) seeded from
    a hash of (random_seed, file index and document index of the chunk's first document, dupe
    index). Chunks depend only on the corpus and documents_per_chunk, so an instance does not
    depend on which process made it or in what order: the local path gives byte-identical
    shards for a given seed whatever --num_workers is, and the Beam pipeline
    (beam_pipeline) gives the same set of records.
  * Vectorised per chunk (the algorithm's distributions unchanged): the chunk is tokenized in
    one call; each instance's layout is drawn as token ranges; then per dupe, numpy truncates
    every pair at once (the tokens each side loses follow from the lengths; how many of them
    come off the front is Binomial(lost, 0.5), the distribution of the original's coin per
    token), and picks the default masked positions as the candidates with the smallest
    uniform random keys (a uniformly random subset, as the original's shuffle), with the
    80/10/10 replacement drawn per position. Whole-word and span masking choose words per
    instance in Python with a lazy shuffle that stops once enough are chosen. The whole local
    path imports no TensorFlow (records and TFRecord framing are encoded by
    tfrecord_io and instance_serializer), which is most of its speed and
    memory.
  * With do_whole_word_mask a "##" piece right after [SEP] starts its own word instead of
    joining the last word of segment A.
  * The random other document is drawn uniformly from the rest of the chunk (the original makes
    up to 10 draws from the whole corpus until one differs from the current document).
  * Sentences longer than max_seq_length - 3 tokens, which can never fit an instance whole, are
    counted and logged once per input file and in the summary (the original truncates them
    silently).
  * Invalid UTF-8 bytes are replaced by U+FFFD, which the tokenizer drops (as the original's text
    cleaning does), with a warning naming the file and line, rather than failing the run.
  * max_predictions_per_seq below round(max_seq_length * masked_lm_prob) is allowed (the original
    caps silently) but warned about, and the number of predictions lost to the cap is logged.
"""

import collections
import dataclasses
import multiprocessing
import resource
import sys
import time

import numpy as np
from absl import logging

# No TensorFlow on this path (only gs:// and other remote paths load it, lazily): the main
# process and every worker start in well under a second and stay small.
from bert_tf.data.patterns import expand_input_patterns
from bert_tf.data.pretraining import tfrecord_io
from bert_tf.data.pretraining.corpus_reading import (file_size, iter_document_chunks,
                                                     nonempty_input_files)
from bert_tf.data.pretraining.instances import CreationStats, InstanceMaker, document_seed
from bert_tf.data.pretraining.masking_recipe import MaskingRecipe, ngram_mask_problem
from bert_tf.text import load_tokenizer
from bert_tf.text.tokenizer_files import missing_roles

_PROGRESS_EVERY_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class PretrainingDataOptions(MaskingRecipe):
    """Settings of instance creation: the masking recipe, and what only record making needs.

    Field names are the command-line flag names. The recipe's fields (max_seq_length,
    max_predictions_per_seq, masked_lm_prob, short_seq_prob, do_whole_word_mask,
    sentence_order_prediction, do_span_mask, span_geometric_p, max_span_length, ngram_mask,
    pack_sequences, max_instances_per_row) are documented in masking_recipe.MaskingRecipe;
    with pack_sequences, max_predictions_per_seq is P per row (see
    row_packing.default_max_predictions_per_row).

    Args:
      dupe_factor: how many times each document is used, each with different masks (>= 1).
      random_seed: the seed everything random derives from.
      feature_names: "v1" (original record names) or "v2".
      documents_per_chunk: consecutive documents of the corpus (files in sorted order, so a
        chunk may span files) processed together; the random next segment comes from another
        document of this pool (>= 2).
    """

    dupe_factor: int = 10
    random_seed: int = 12345
    feature_names: str = "v1"
    documents_per_chunk: int = 1000

    def validate(self):
        """Raises ValueError naming the first flag whose value is out of range."""
        if self.max_seq_length < 5:
            raise ValueError(f"--max_seq_length={self.max_seq_length} must be at least 5 "
                             "([CLS] A [SEP] B [SEP] with one token each).")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"--max_predictions_per_seq={self.max_predictions_per_seq} must be "
                             "at least 1.")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"--masked_lm_prob={self.masked_lm_prob} must be in (0, 1).")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"--short_seq_prob={self.short_seq_prob} must be in [0, 1].")
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe_factor={self.dupe_factor} must be at least 1.")
        if self.feature_names not in tfrecord_io.FEATURE_NAMES:
            raise ValueError(f'--feature_names={self.feature_names} must be "v1" or "v2".')
        if self.documents_per_chunk < 2:
            raise ValueError(f"--documents_per_chunk={self.documents_per_chunk} must be at "
                             "least 2 (random next segments come from another document of the "
                             "chunk).")
        if not 0.0 < self.span_geometric_p <= 1.0:
            raise ValueError(f"--span_geometric_p={self.span_geometric_p} must be in (0, 1].")
        if self.max_span_length < 1:
            raise ValueError(f"--max_span_length={self.max_span_length} must be at least 1.")
        problem = ngram_mask_problem(self.ngram_mask, self.do_span_mask)
        if problem:
            raise ValueError(problem + ".")
        if self.max_instances_per_row < 0:
            raise ValueError(f"--max_instances_per_row={self.max_instances_per_row} must be at "
                             "least 1 (or 0 for the default, max(2, max_seq_length // 16)).")

    @property
    def uncapped_predictions(self):
        """Predictions a full-length instance would get without the max_predictions_per_seq cap."""
        return max(1, int(round(self.max_seq_length * self.masked_lm_prob)))


def warn_if_predictions_capped(options):
    """Logs a warning when max_predictions_per_seq is below what masked_lm_prob asks for."""
    if options.max_predictions_per_seq < options.uncapped_predictions:
        logging.warning(
            "--max_predictions_per_seq=%d is below round(--max_seq_length=%d * "
            "--masked_lm_prob=%g) = %d: long instances get only %d predictions (as the "
            "original); the number capped is logged at the end.",
            options.max_predictions_per_seq, options.max_seq_length, options.masked_lm_prob,
            options.uncapped_predictions, options.max_predictions_per_seq)


def log_long_lines(path, count, options):
    """Logs, once per input file, how many of its sentences exceed an instance's token budget."""
    logging.warning("%s: %d sentences are longer than --max_seq_length=%d - 3 = %d tokens and "
                    "were truncated.", path, count, options.max_seq_length,
                    options.max_seq_length - 3)


def log_summary(stats, options):
    """Logs the final counters, including predictions lost to max_predictions_per_seq, sentences
    truncated for length, and a corpus of one document (random next segments from itself)."""
    logging.info(
        "Wrote %d instances from %d documents (dupe_factor=%d): %.1f%% %s, %.1f tokens "
        "and %.2f predictions per instance.", stats.instances, stats.documents,
        options.dupe_factor, 100.0 * stats.random_next / max(stats.instances, 1),
        "swapped" if options.sentence_order_prediction else "random next",
        stats.tokens / max(stats.instances, 1), stats.predictions / max(stats.instances, 1))
    if options.pack_sequences and stats.rows:
        logging.info(
            "Packed %d instances into %d rows of %d tokens: %.2f instances per row, %.1f%% of "
            "tokens real (unpacked: %.1f%%).", stats.instances, stats.rows,
            options.max_seq_length, stats.instances / stats.rows,
            100.0 * stats.tokens / (stats.rows * options.max_seq_length),
            100.0 * stats.tokens / (max(stats.instances, 1) * options.max_seq_length))
    if stats.capped_instances:
        logging.warning(
            "--max_predictions_per_seq=%d capped %d of %d instances, dropping %d predictions "
            "that --masked_lm_prob=%g asked for.", options.max_predictions_per_seq,
            stats.capped_instances, stats.instances, stats.capped_predictions,
            options.masked_lm_prob)
    if stats.long_lines:
        logging.warning("%d sentences in total were longer than --max_seq_length=%d - 3 = %d "
                        "tokens and were truncated.", stats.long_lines, options.max_seq_length,
                        options.max_seq_length - 3)
    if stats.documents == 1 and stats.random_next and not options.sentence_order_prediction:
        logging.warning("The corpus holds a single document: the %d random next segments "
                        "(next_sentence_labels=1) come from that same document. Add more "
                        "documents (blank lines separate them) for real next-sentence "
                        "negatives.", stats.random_next)


def pretraining_tokenizer(vocab_file, do_lower_case=None):
    """The tokenizer records are made with.

    Args:
      vocab_file: a WordPiece vocab.txt, or a Hugging Face tokenizer.json (WordPiece, or
        byte-level BPE as ModernBERT's).
      do_lower_case: a vocab.txt's casing (None = True); a tokenizer.json records its own, which
        None takes and a contradicting value is an error for.

    Raises:
      ValueError: a contradicting do_lower_case, a bad tokenizer.json, or one without a
        [CLS], [SEP] or mask token (naming the file); OSError for a missing file.
    """
    tokenizer = load_tokenizer(vocab_file, do_lower_case)
    names = {"cls": "[CLS]", "sep": "[SEP]", "mask": "mask ([MASK] or <mask>)"}
    missing = [names[role] for role in missing_roles(tokenizer, tuple(names))]
    if missing:
        raise ValueError(f"--vocab_file={vocab_file} has no {' or '.join(missing)} token; "
                         "pre-training records need [CLS], [SEP] and a mask token.")
    return tokenizer


# Per-process state of the worker pool, set once by _init_worker.
_worker_maker = None


def _init_worker(vocab_file, do_lower_case, options):
    global _worker_maker
    _worker_maker = InstanceMaker(pretraining_tokenizer(vocab_file, do_lower_case), options)


def _process_chunk_in_worker(chunk):
    return _framed_chunk_records(_worker_maker, chunk)


def _framed_chunk_records(maker, chunk):
    """process_chunk with every record already in TFRecord framing: the CRCs are computed by
    the workers, in parallel, and the writing process only shuffles and copies bytes."""
    records, stats = maker.process_chunk(chunk)
    return tfrecord_io.frame_records(records), stats


def _iter_chunk_results(chunks, maker, vocab_file, do_lower_case, options, num_workers):
    """Yields (framed records, stats) per chunk in input order, in-process or over a process pool.

    With several workers at most 2 * num_workers chunks are in flight, so reading never runs
    far ahead of processing, and results are taken in submission order, which keeps the output
    independent of scheduling.
    """
    if num_workers == 1:
        for chunk in chunks:
            yield _framed_chunk_records(maker, chunk)
        return
    global _worker_maker
    if "fork" in multiprocessing.get_all_start_methods() and "tensorflow" not in sys.modules:
        # A forked worker inherits this process's InstanceMaker (vocabulary, word cache) and
        # modules: it starts in milliseconds, where a spawned one re-imports and reloads the
        # vocabulary (~0.3 s of CPU each, a visible share of a few-MB corpus).
        context, initializer, initargs = multiprocessing.get_context("fork"), None, ()
        _worker_maker = maker
    else:
        # "spawn": the caller initialized TensorFlow (the Beam path, a notebook), and forking
        # such a process is unsafe. Workers import no TensorFlow, so they start quickly.
        context = multiprocessing.get_context("spawn")
        initializer, initargs = _init_worker, (vocab_file, do_lower_case, options)
    with context.Pool(num_workers, initializer=initializer, initargs=initargs) as pool:
        _enlarge_pipes(pool)
        pending = collections.deque()
        for chunk in chunks:
            pending.append(pool.apply_async(_process_chunk_in_worker, (chunk,)))
            if len(pending) >= 2 * num_workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
    _worker_maker = None
    # The pool has joined its workers: RUSAGE_CHILDREN's maxrss is the largest one's peak.
    logging.info("Peak RSS: writer %.0f MB, largest worker %.0f MB.",
                 resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                 resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def _enlarge_pipes(pool):
    """Grows the pool's task and result pipes to 1 MB (Linux; elsewhere a no-op).

    A chunk's records (several MB) otherwise cross a 64 KB pipe in thousands of blocking
    read/write pairs, each a context switch between worker and writer.
    """
    try:
        import fcntl  # POSIX only
    except ImportError:
        return
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return
    for queue in (getattr(pool, "_inqueue", None), getattr(pool, "_outqueue", None)):
        reader = getattr(queue, "_reader", None)
        if reader is None:
            continue
        try:
            fcntl.fcntl(reader.fileno(), set_size, 1 << 20)
        except OSError:
            pass  # over the system's limit (/proc/sys/fs/pipe-max-size): keep the default


def format_progress(stats, written, elapsed, total_bytes):
    """One progress line: documents, documents/s, MB/s, instances made and written, ETA.

    Args:
      stats: CreationStats so far (documents, instances and input bytes processed).
      written: records written to the shards so far (made minus those in the shuffle buffer).
      elapsed: seconds since the run started (> 0).
      total_bytes: input bytes of the whole run; the ETA extrapolates the share processed.
    """
    fraction = min(stats.num_bytes / max(total_bytes, 1), 1.0)
    eta = elapsed * (1.0 - fraction) / fraction if fraction > 0 else float("nan")
    return (f"{stats.documents} documents ({stats.documents / elapsed:.1f} docs/s, "
            f"{stats.num_bytes / 1e6 / elapsed:.2f} MB/s), {stats.instances} instances made, "
            f"{written} written, {100.0 * fraction:.1f}% of input, ETA {_format_seconds(eta)}")


class _Progress:
    """Reports progress on stderr every _PROGRESS_EVERY_SECONDS: as an absl log line, or, when
    stderr is a terminal, as one line redrawn in place (a bar) about every second."""

    def __init__(self, total_bytes, stream=None):
        self.total_bytes = max(total_bytes, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.on_terminal = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = 1.0 if self.on_terminal else _PROGRESS_EVERY_SECONDS
        self.start = self.last = time.monotonic()

    def update(self, stats, written, force=False):
        """Reports if the interval has passed (always with force=True, the final report)."""
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        line = format_progress(stats, written, max(now - self.start, 1e-6), self.total_bytes)
        if self.on_terminal:
            fraction = min(stats.num_bytes / self.total_bytes, 1.0)
            filled = int(round(20 * fraction))
            self.stream.write(f"\r[{'#' * filled}{'.' * (20 - filled)}] {line}\x1b[K")
            if force:
                self.stream.write("\n")
            self.stream.flush()
        else:
            logging.info("%s.", line)


def _format_seconds(seconds):
    if seconds != seconds:  # NaN: nothing processed yet
        return "unknown"
    seconds = int(round(seconds))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def create_pretraining_data(input_patterns, output_files, vocab_file, *, do_lower_case=None,
                            options=None, num_workers=1, compression="",
                            shuffle_buffer_size=100_000):
    """Writes pre-training TFRecords for a corpus, streaming, over `num_workers` processes.

    Args:
      input_patterns: comma-separated globs (str) or a list of them; files are read in sorted
        order within each pattern.
      output_files: comma-separated paths (str) or a list; records go round-robin to them.
      vocab_file: WordPiece vocabulary, one token per line, or a tokenizer.json (see
        `pretraining_tokenizer`).
      do_lower_case: lower-case and strip accents before WordPiece (match the vocab /
        checkpoint); None: True for a vocab.txt, a tokenizer.json's own casing.
      options: PretrainingDataOptions; None = the original defaults.
      num_workers: processes that tokenize and mask (1 = in this process). The output does not
        depend on it.
      compression: "" or "GZIP" (GZIP output names must end in .gz).
      shuffle_buffer_size: records held to shuffle the output order (>= 1; 1 = no shuffle).

    Returns:
      CreationStats of the whole run.

    Raises:
      ValueError: a bad option (names the flag), a glob matching nothing (names it), a missing
        output directory, all inputs empty, or no document in any input; the tokenizer's error
        for a bad vocab file. Invalid settings are reported before any input is read, and on any
        error no output file is created.
    """
    options = options or PretrainingDataOptions()
    options.validate()
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} must be at least 1.")
    if shuffle_buffer_size < 1:
        raise ValueError(f"shuffle_buffer_size={shuffle_buffer_size} must be at least 1.")
    if isinstance(output_files, str):
        output_files = [p.strip() for p in output_files.split(",") if p.strip()]
    tfrecord_io.check_output_files(output_files, compression)
    input_files = nonempty_input_files(expand_input_patterns(input_patterns))
    maker = InstanceMaker(pretraining_tokenizer(vocab_file, do_lower_case), options)
    warn_if_predictions_capped(options)
    # Once nothing can refuse the run: what writers of these shards killed before left.
    tfrecord_io.remove_stale_temp_files(output_files)
    logging.info("Creating pre-training data from %d files into %d shards with %d workers.",
                 len(input_files), len(output_files), num_workers)

    stats = CreationStats()
    logged_files = set()

    def log_finished_files(up_to):
        # Files before index `up_to` are complete: their long-line counts are final.
        for file_index in sorted(stats.long_lines_per_file):
            if file_index < up_to and file_index not in logged_files:
                logged_files.add(file_index)
                log_long_lines(input_files[file_index],
                               stats.long_lines_per_file[file_index], options)

    progress = _Progress(sum(file_size(p) for p in input_files))
    # The output order is shuffled with its own stream, seeded from random_seed as well.
    shuffle_rng = np.random.default_rng(document_seed(options.random_seed, -1, -1, -1))
    buffer = np.empty(shuffle_buffer_size, dtype=object)
    buffered = 0
    with tfrecord_io.ShardedRecordWriter(output_files, compression) as writer:
        for records, chunk_stats in _iter_chunk_results(
                iter_document_chunks(input_files, options.documents_per_chunk), maker,
                vocab_file, do_lower_case, options, num_workers):
            stats.add(chunk_stats)
            if chunk_stats.long_lines_per_file:
                log_finished_files(max(chunk_stats.long_lines_per_file))
            room = min(shuffle_buffer_size - buffered, len(records))
            buffer[buffered:buffered + room] = records[:room]
            buffered += room
            for start in range(room, len(records), shuffle_buffer_size):
                # Emit distinct random buffered records, in random order, and keep the new
                # ones in their places (numpy object arrays: no per-record Python).
                incoming = records[start:start + shuffle_buffer_size]
                slots = shuffle_rng.choice(shuffle_buffer_size, len(incoming), replace=False)
                writer.write_framed_many(buffer[slots].tolist())
                new = np.empty(len(incoming), dtype=object)
                new[:] = incoming
                buffer[slots] = new
            progress.update(stats, writer.num_written)
        log_finished_files(len(input_files))
        if stats.instances == 0:
            raise ValueError(f"No documents with any token in the input files "
                             f"({', '.join(input_files)}); nothing to write.")
        writer.write_framed_many(buffer[shuffle_rng.permutation(buffered)].tolist())
        progress.update(stats, writer.num_written, force=True)
    log_summary(stats, options)
    return stats
