"""Raw text -> masked pre-training batches inside tf.data: dynamic masking, no offline step.

RoBERTa-style: instead of writing masked examples to TFRecords once (create_pretraining_data.py),
the pipeline reads text, tokenizes, builds sequences and masks them on the fly, so every epoch
sees fresh masks (and, with next-sentence prediction, fresh A/B pairings). Everything is TF ops
in one tf.data graph (no py_function), so it can feed TPUs or run under tf.data service.

Input text format (as the original): one sentence per line, a blank line between documents.

Stages, with N = examples in a block, B = batch, S = max_seq_length, P = max_predictions_per_seq:
  1. lines are read in blocks of `block_lines` lines from one file (files are shuffled and
     interleaved in training); a block is the unit of tokenization (one batched tokenizer call)
     and the pool that random next-sentence segments are drawn from (a block inside a single
     long document counts as two documents, its halves). A document that straddles two blocks
     is treated as two documents.
  2. each block becomes N packed sequences ([CLS] A [SEP] B [SEP], or [CLS] X [SEP] without NSP),
     dense int32 [N, S];
     sentence_order_prediction: A and B are consecutive text, swapped half the time (ALBERT);
     full_sentences (without NSP): whole sentences packed across documents (RoBERTa);
  3. sequences are unbatched, shuffled (training), batched with drop_remainder, and
  4. each batch [B, S] is masked with stateless random ops seeded by (seed, batch index): a given
     seed reproduces the stream; each epoch's batches have new indices and so new masks
     (do_span_mask: SpanBERT's spans of whole words, with their boundaries; ngram_mask:
     ALBERT's n-grams of whole words).

With pack_sequences (docs/packing.md), stage 3 batches `pack_buffer_size` shuffled instances,
masks each as in 4 (P caps each instance), and packs them whole, first-fit decreasing, into rows
of S tokens with at most I instances and P predictions (pack_instance_features); the rows are then
batched with drop_remainder. Rows carry input_instance_ids and next_sentence_positions /
_labels / _weights [I], as packed TFRecords read by pretraining_dataset do.

Input that can make no sequence would make the repeated training stream spin forever looking for
a first batch. Two guards prevent it: when the dataset is built, the input must hold at least
one non-blank line (files are read only up to their first non-blank line; else ValueError
naming the files or the TFDS dataset); and in training, a run of _MAX_EMPTY_BLOCKS consecutive
blocks without a single sequence (text without any token, or only one sentence in all with
next-sentence prediction) stops iteration with an InvalidArgumentError that says so.
"""

import random

from absl import logging

import tensorflow as tf

from bert_tf import optional, quiet_logs
from bert_tf.data.pretraining.masking import split_seed, mask_batch, span_mask_batch
from bert_tf.data.pretraining.masking_recipe import ngram_mask_problem
from bert_tf.data.pretraining.record_dataset import expand_input_patterns
from bert_tf.data.pretraining.row_packing_tf import pack_instance_features
from bert_tf.text import corpus_files, load_tokenizer, tokenizer_layer
from bert_tf.text.input_packing import truncated_lengths

_DEFAULT_BLOCK_LINES = 2048
_DEFAULT_SHUFFLE_BUFFER = 2000
# Instances packed together into rows (pack_sequences).
_DEFAULT_PACK_BUFFER = 512
# Independent random streams derived from the base seed.
_BLOCK_STREAM, _MASK_STREAM = 0, 1
# Consecutive blocks yielding no sequence after which training input is declared unusable. A
# real corpus never has this many (2048-line blocks: millions of lines without a sentence pair);
# a token-free one reaches it within seconds instead of spinning forever.
_MAX_EMPTY_BLOCKS = 1000

# The pipeline's functions are traced as written: their loops are tf.while_loop and their
# branches Python settings. AutoGraph's rewrite of them (tf.data's default) changes nothing in
# the graph and cost about 3 s of a raw-text run's start-up (training and evaluation pipelines,
# 2-core CPU: docs/design.md).
_as_written = tf.autograph.experimental.do_not_convert


class _Vocab:
    """The ids and tables the pipeline needs from a Python tokenizer (`load_tokenizer`)."""

    def __init__(self, tokenizer):
        self.size = tokenizer.vocab_size
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.pad_id, self.mask_id = tokenizer.pad_id, tokenizer.mask_id
        is_continuation = [False] * self.size
        for index in tokenizer.continuation_ids():
            is_continuation[index] = True
        # [V] bool: True for pieces that continue the previous piece's word (WordPiece's "##"
        # pieces; byte-level BPE's tokens without the space "Ġ").
        self.is_continuation = tf.constant(is_continuation, tf.bool)


def _check_args(batch_size, max_seq_length, max_predictions_per_seq, masked_lm_prob,
                short_seq_prob, text_patterns, tfds_name):
    if (text_patterns is None) == (tfds_name is None):
        raise ValueError("Pass exactly one of text_patterns (text files) or tfds_name (a TFDS "
                         f"dataset); got text_patterns={text_patterns!r}, tfds_name={tfds_name!r}.")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1.")
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length={max_seq_length} must be >= 5 "
                         "([CLS] A [SEP] B [SEP] with a token in each segment).")
    if not 1 <= max_predictions_per_seq <= max_seq_length:
        raise ValueError(f"max_predictions_per_seq={max_predictions_per_seq} must be in "
                         f"[1, max_seq_length={max_seq_length}].")
    if not 0.0 < masked_lm_prob <= 1.0:
        raise ValueError(f"masked_lm_prob={masked_lm_prob} must be in (0, 1].")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob={short_seq_prob} must be in [0, 1].")


def _check_text_files(files):
    """{path: 'GZIP' or ''} for TextLineDataset, from each file's first bytes (not its name).

    Raises:
      ValueError naming the first file that is binary, mostly not UTF-8, a damaged or
      truncated gzip file, or bzip2 (which TextLineDataset cannot read).
    """
    compressions = {}
    for path in files:
        compression = corpus_files.check_corpus_file(path)
        if compression == "BZIP2":
            raise ValueError(f"{path} is bzip2-compressed, which the text pipeline cannot "
                             "read; decompress it or recompress it with gzip.")
        if compression:
            # TextLineDataset ends silently where a gzip stream is cut: read it whole first.
            corpus_files.check_stream_complete(path)
        compressions[path] = compression
    return compressions


def _describe_files(files, limit=3):
    """The file list for a message, shortened past `limit` files."""
    shown = ", ".join(files[:limit])
    return shown if len(files) <= limit else f"{shown} and {len(files) - limit} more files"


def _check_some_text(files, pairs=False):
    """Raises ValueError naming the files unless they hold a non-blank line, or two with
    `pairs` (next-sentence prediction pairs two sentences: one line would fail in the graph,
    after start-up, with "blocks ... made no sequence").

    Each file is read only up to the lines needed, so a real corpus costs one or two lines.
    """
    needed, found = (2 if pairs else 1), 0
    for path in files:
        with corpus_files.open_corpus(path) as f:
            for line in f:
                # Blank as in the pipeline and create_pretraining_data: str.strip() (a line of
                # U+00A0 only is blank too).
                if line.decode("utf-8", "replace").strip():
                    found += 1
                    if found == needed:
                        return
    if found == 0:
        raise ValueError(f"text_pretraining_dataset: no text in {_describe_files(files)}: every "
                         "file is empty or holds only blank lines (expected one sentence per "
                         "line, a blank line between documents).")
    hold = "holds" if len(files) == 1 else "together hold"
    raise ValueError(f"text_pretraining_dataset: {_describe_files(files)} {hold} a single "
                     "sentence (one non-blank line); next-sentence prediction needs at least two "
                     "(expected one sentence per line), or pass use_next_sentence_label=False "
                     "(--use_next_sentence_label=false).")


def _masking_rate(recipe, progress, is_training):
    """() -> the rate a batch is masked at: recipe.masked_lm_prob, or in training with
    recipe.masked_lm_prob_end, a float32 scalar read from `progress` when the batch is made
    (linear from masked_lm_prob at 0 to masked_lm_prob_end at 1)."""
    end = recipe.masked_lm_prob_end
    if end is not None and not 0.0 < end <= 1.0:
        raise ValueError(f"masked_lm_prob_end={end} must be in (0, 1].")
    if end is None or not is_training:
        return lambda: recipe.masked_lm_prob
    if not isinstance(progress, tf.Variable):
        raise ValueError("recipe.masked_lm_prob_end needs masking_progress, a tf.Variable the "
                         f"run sets to the share of training done; got {progress!r}.")
    return lambda: recipe.masked_lm_prob_at(tf.clip_by_value(progress.read_value(), 0.0, 1.0))


def _warn_if_predictions_capped(max_seq_length, max_predictions_per_seq, masked_lm_prob):
    """Warns when max_predictions_per_seq is below what masked_lm_prob asks for at full length."""
    wanted = int(round(max_seq_length * masked_lm_prob))
    if wanted > max_predictions_per_seq:
        logging.warning(
            "max_predictions_per_seq=%d is below round(max_seq_length=%d * masked_lm_prob=%g) "
            "= %d: long sequences get only %d predictions (as the original caps them).",
            max_predictions_per_seq, max_seq_length, masked_lm_prob, wanted,
            max_predictions_per_seq)


def _text_line_blocks(files, compressions, block_lines, is_training, seed, input_context):
    """Blocks of lines, tf.string [<= block_lines], each block from a single file.

    `compressions` maps each file to its TextLineDataset compression_type ('GZIP' or '').
    """
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    shard_blocks = num_pipelines > 1 and len(files) < num_pipelines
    file_ds = tf.data.Dataset.from_tensor_slices(files)
    if num_pipelines > 1 and not shard_blocks:
        file_ds = file_ds.shard(num_pipelines, input_context.input_pipeline_id)
    gzip_files = tf.constant(sorted(p for p, c in compressions.items() if c) or [""])

    @_as_written
    def read(path):
        compression = tf.where(tf.reduce_any(tf.equal(gzip_files, path)), "GZIP", "")
        lines = tf.data.TextLineDataset(path, compression_type=compression)
        # A file's end also ends its last document.
        lines = lines.concatenate(tf.data.Dataset.from_tensors(tf.constant("")))
        blocks = lines.batch(block_lines)
        if shard_blocks:
            blocks = blocks.shard(num_pipelines, input_context.input_pipeline_id)
        return blocks

    if not is_training:
        return file_ds.flat_map(read)
    file_ds = file_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    return file_ds.interleave(read, cycle_length=min(len(files), 4), block_length=1,
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _tfds_line_blocks(name, data_dir, split, text_key, block_lines, is_training, seed,
                      input_context):
    """Blocks of lines from an already prepared TFDS text dataset (one document per example)."""
    tfds = optional.require("tensorflow_datasets")

    read_config = tfds.ReadConfig(shuffle_seed=seed, input_context=input_context)
    try:
        ds = tfds.load(name, split=split, data_dir=data_dir, download=False,
                       shuffle_files=is_training, read_config=read_config)
    except (AssertionError, tfds.core.registered.DatasetNotFoundError) as e:
        raise ValueError(f'TFDS dataset "{name}" (split "{split}") is not prepared under '
                         f"data_dir={data_dir!r}; prepare it first (nothing is downloaded "
                         f"here): {e}") from None
    if text_key not in ds.element_spec:
        raise ValueError(f'TFDS dataset "{name}" has no feature "{text_key}" (tfds_text_key); '
                         f"it has {sorted(ds.element_spec)}.")
    # Stops at the first example with a non-blank line: one example for a real dataset.
    for text in ds.map(lambda example: example[text_key]):
        if text.numpy().decode("utf-8", "replace").strip():
            break
    else:
        raise ValueError(f'text_pretraining_dataset: TFDS dataset "{name}" (split "{split}") '
                         f'has no text: every "{text_key}" is empty or blank.')

    @_as_written
    def document_lines(example):
        # Each example is one document; its lines are its sentences (or paragraphs).
        lines = tf.strings.split(example[text_key], "\n")
        return tf.data.Dataset.from_tensor_slices(tf.concat([lines, [""]], axis=0))

    lines = ds.flat_map(document_lines)
    if is_training:
        lines = lines.repeat()
    return lines.batch(block_lines)


def _num_ids(ids):
    """1 + the largest id in a 0-based id vector (0 when it is empty)."""
    return tf.reduce_max(tf.concat([ids, tf.constant([-1], ids.dtype)], axis=0)) + 1


def _random_below(seed, limit):
    """Uniform int64 in [0, limit) elementwise (0 where limit <= 0); `limit` int64 [K]."""
    u = tf.random.stateless_uniform(tf.shape(limit), seed, dtype=tf.float64)
    draw = tf.cast(tf.floor(u * tf.cast(limit, tf.float64)), tf.int64)
    return tf.clip_by_value(draw, 0, tf.maximum(limit - 1, 0))


def _greedy_chunks(sent_len, doc, target, seed, random_next=True):
    """Groups a block's sentences into NSP chunks exactly as the original's document loop does.

    Walking the sentences in order, a chunk grows until it reaches its document's target length
    or the document ends; it is then split into A (its first a_count sentences, 1 <= a_count <
    count when count >= 2) and B. Half the time, and always for a one-sentence chunk, B is to be
    replaced by random text (when the block has another document); the sentences after A are
    then unused and start the next chunk.

    Args:
      sent_len: int64 [N] tokens per sentence (all > 0).
      doc: int32 [N] document index of each sentence, non-decreasing from 0.
      target: int64 [D] target tokens per chunk of each document.
      seed: int64 [2] stateless seed.
      random_next: False for sentence-order pairs: B is never random, so every chunk uses all
        its sentences.

    Returns:
      (first, count, a_count, is_random): [K] first sentence index, sentences in the chunk,
      sentences in A (int64), and whether B is random (bool).
    """
    num_sent = tf.shape(sent_len, out_type=tf.int64)[0]
    many_docs = _num_ids(doc) > 1
    next_is_new_doc = tf.concat([doc[1:] != doc[:-1], [True]], axis=0)  # [N]
    sent_target = tf.gather(target, doc)  # [N]

    def body(step, i, first, length, closed_ta, first_ta, a_ta, random_ta):
        length += sent_len[i]
        close = next_is_new_doc[i] | (length >= sent_target[i])
        count = i - first + 1
        u_split, u_random = tf.unstack(tf.random.stateless_uniform(
            [2], tf.random.experimental.stateless_fold_in(seed, step), dtype=tf.float64))
        a_count = 1 + tf.minimum(tf.cast(tf.floor(u_split * tf.cast(count - 1, tf.float64)),
                                         tf.int64), tf.maximum(count - 2, 0))
        is_random = ((count == 1) | (u_random < 0.5)) & many_docs & random_next
        closed_ta = closed_ta.write(tf.cast(step, tf.int32), close)
        first_ta = first_ta.write(tf.cast(step, tf.int32), tf.stack([first, count]))
        a_ta = a_ta.write(tf.cast(step, tf.int32), a_count)
        random_ta = random_ta.write(tf.cast(step, tf.int32), is_random)
        next_i = tf.where(close & is_random, first + a_count, i + 1)
        return (step + 1, next_i, tf.where(close, next_i, first),
                tf.where(close, tf.zeros_like(length), length), closed_ta, first_ta, a_ta,
                random_ta)

    def array(dtype):
        return tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=[])

    zero = tf.constant(0, tf.int64)
    _, _, _, _, closed_ta, first_ta, a_ta, random_ta = tf.while_loop(
        lambda step, i, *_: i < num_sent, body,
        (zero, zero, zero, zero, array(tf.bool),
         tf.TensorArray(tf.int64, size=0, dynamic_size=True, element_shape=[2]),
         array(tf.int64), array(tf.bool)))
    closed = closed_ta.stack()
    first_count = tf.boolean_mask(tf.reshape(first_ta.stack(), [-1, 2]), closed)
    return (first_count[:, 0], first_count[:, 1], tf.boolean_mask(a_ta.stack(), closed),
            tf.boolean_mask(random_ta.stack(), closed))


def _nsp_segments(tokens, doc, max_tokens, short_seq_prob, seed):
    """Sentence pairs for next-sentence prediction from one block, as the original makes them.

    Per document a target length (max_tokens, or with probability short_seq_prob a random length
    in [2, max_tokens]); sentences are grouped into chunks by `_greedy_chunks`; a random B is a
    span from a random sentence start in another document of the block, as long as the target
    leaves after A. When the block holds a single sentence no random B is possible and it is
    dropped.

    Args:
      tokens: ragged int32 [N, (T)] token ids of the block's non-empty sentences, in order.
      doc: int32 [N] document index (0..D-1, non-decreasing) of each sentence.
      max_tokens: int, the pair budget (max_seq_length - 3).
      short_seq_prob: probability of a shorter target length for a document.
      seed: int64 [2] stateless seed.

    Returns:
      (tokens_a, tokens_b, labels): ragged int32 [K, (La)], [K, (Lb)] with 1 <= La,
      1 <= Lb and La + Lb <= max_tokens, and int32 [K] next-sentence labels (1 = random B).
    """
    s_target_u, s_target_len, s_chunks, s_other, s_start, s_trunc_a, s_trunc_b = tf.unstack(
        split_seed(seed, 7))
    flat = tokens.flat_values
    sent_len = tokens.row_lengths()  # int64 [N]
    sent_start = tokens.row_starts()  # int64 [N], offsets into `flat`
    sent_end = sent_start + sent_len
    sent_index = tf.range(tf.shape(sent_len, out_type=tf.int64)[0])
    num_docs = _num_ids(doc)
    doc_first = tf.math.unsorted_segment_min(sent_index, doc, num_docs)  # [D]
    doc_count = tf.math.unsorted_segment_sum(tf.ones_like(sent_index), doc, num_docs)  # [D]
    doc_end = tf.gather(sent_end, doc_first + doc_count - 1)  # [D]

    short = tf.random.stateless_uniform([num_docs], s_target_u) < short_seq_prob
    short_len = 2 + _random_below(s_target_len, tf.fill([num_docs], tf.cast(max_tokens - 1,
                                                                              tf.int64)))
    target = tf.where(short, short_len, max_tokens)  # int64 [D]
    chunk_first, chunk_count, a_count, is_random = _greedy_chunks(sent_len, doc, target, s_chunks)
    num_chunks = tf.shape(chunk_first)[0]
    chunk_doc = tf.gather(doc, chunk_first)
    keep = (chunk_count >= 2) | is_random
    a_start = tf.gather(sent_start, chunk_first)
    a_stop = tf.gather(sent_end, chunk_first + a_count - 1)
    b_stop_real = tf.gather(sent_end, chunk_first + chunk_count - 1)

    # Random B: from a random sentence start in another document, as many tokens as the
    # target leaves after A (at least one), not past that document's end.
    other = (chunk_doc + 1 + tf.cast(_random_below(
        s_other, tf.fill([num_chunks], tf.cast(num_docs - 1, tf.int64))), tf.int32)) % tf.maximum(
        num_docs, 1)
    other_sentence = tf.gather(doc_first, other) + _random_below(
        s_start, tf.gather(doc_count, other))
    b_start_random = tf.gather(sent_start, other_sentence)
    b_budget = tf.maximum(tf.gather(target, chunk_doc) - (a_stop - a_start), 1)
    b_stop_random = tf.minimum(b_start_random + b_budget, tf.gather(doc_end, other))
    b_start = tf.where(is_random, b_start_random, a_stop)
    b_stop = tf.where(is_random, b_stop_random, b_stop_real)

    a_start, a_stop, b_start, b_stop, is_random = (
        tf.boolean_mask(t, keep) for t in (a_start, a_stop, b_start, b_stop, is_random))
    # Truncate longest-first; a segment's excess is cut partly at its front, partly at its back
    # (a random split, as the original does) so the model does not learn where text was cut.
    len_a, len_b = truncated_lengths(a_stop - a_start, b_stop - b_start, max_tokens)
    a_start += _random_below(s_trunc_a, a_stop - a_start - len_a + 1)
    b_start += _random_below(s_trunc_b, b_stop - b_start - len_b + 1)
    tokens_a = tf.gather(flat, tf.ragged.range(a_start, a_start + len_a))
    tokens_b = tf.gather(flat, tf.ragged.range(b_start, b_start + len_b))
    return tokens_a, tokens_b, tf.cast(is_random, tf.int32)


def _document_targets(sent_len, doc, max_tokens, short_seq_prob, seed):
    """Per-document target lengths: max_tokens, or with short_seq_prob a random one in
    [2, max_tokens]. Returns int64 [D]."""
    s_target_u, s_target_len = tf.unstack(split_seed(seed, 2))
    num_docs = _num_ids(doc)
    short = tf.random.stateless_uniform([num_docs], s_target_u) < short_seq_prob
    short_len = 2 + _random_below(s_target_len, tf.fill([num_docs], tf.cast(max_tokens - 1,
                                                                              tf.int64)))
    return tf.where(short, short_len, max_tokens)


def _sop_segments(tokens, doc, max_tokens, short_seq_prob, seed):
    """Sentence pairs for sentence-order prediction (ALBERT) from one block.

    Sentences are grouped into chunks as for next-sentence prediction (per-document targets,
    `_greedy_chunks`), but B is always the rest of the chunk: A = its first a_count sentences,
    B = the others; a one-sentence chunk is split at a random token (a one-token chunk is
    dropped). With probability 0.5 A and B are swapped (label 1). Then longest-first
    truncation as for NSP.

    Args:
      tokens: ragged int32 [N, (T)] token ids of the block's non-empty sentences, in order.
      doc: int32 [N] document index (0..D-1, non-decreasing) of each sentence.
      max_tokens: int, the pair budget (max_seq_length - 3).
      short_seq_prob: probability of a shorter target length for a document.
      seed: int64 [2] stateless seed.

    Returns:
      (tokens_a, tokens_b, labels): ragged int32 [K, (La)], [K, (Lb)] with La, Lb >= 1 and
      La + Lb <= max_tokens, and int32 [K] labels (1 = the segments are swapped).
    """
    s_target, s_chunks, s_split, s_swap, s_trunc_a, s_trunc_b = tf.unstack(split_seed(seed, 6))
    flat = tokens.flat_values
    sent_len = tokens.row_lengths()  # int64 [N]
    sent_start = tokens.row_starts()
    sent_end = sent_start + sent_len
    target = _document_targets(sent_len, doc, max_tokens, short_seq_prob, s_target)
    chunk_first, chunk_count, a_count, _ = _greedy_chunks(sent_len, doc, target, s_chunks,
                                                          random_next=False)
    a_start = tf.gather(sent_start, chunk_first)
    b_stop = tf.gather(sent_end, chunk_first + chunk_count - 1)
    chunk_len = b_stop - a_start
    split_sentence = a_start + 1 + _random_below(s_split, chunk_len - 1)
    a_stop = tf.where(chunk_count >= 2, tf.gather(sent_end, chunk_first + a_count - 1),
                      split_sentence)
    keep = chunk_len >= 2
    a_start, a_stop, b_stop = (tf.boolean_mask(t, keep) for t in (a_start, a_stop, b_stop))
    b_start = a_stop
    swap = tf.random.stateless_uniform(tf.shape(a_start), s_swap, dtype=tf.float64) < 0.5
    a_start, a_stop, b_start, b_stop = (tf.where(swap, b_start, a_start),
                                        tf.where(swap, b_stop, a_stop),
                                        tf.where(swap, a_start, b_start),
                                        tf.where(swap, a_stop, b_stop))
    len_a, len_b = truncated_lengths(a_stop - a_start, b_stop - b_start, max_tokens)
    a_start += _random_below(s_trunc_a, a_stop - a_start - len_a + 1)
    b_start += _random_below(s_trunc_b, b_stop - b_start - len_b + 1)
    tokens_a = tf.gather(flat, tf.ragged.range(a_start, a_start + len_a))
    tokens_b = tf.gather(flat, tf.ragged.range(b_start, b_start + len_b))
    return tokens_a, tokens_b, tf.cast(swap, tf.int32)


def _full_sentence_segments(tokens, doc, max_tokens, sep_id):
    """RoBERTa's FULL-SENTENCES packing: whole sentences, in order, across document ends.

    Sentences are added to a sequence while they fit in max_tokens; a sentence that starts a
    new document inside a sequence is preceded by one extra [SEP] (RoBERTa's document
    separator), and a sentence longer than max_tokens is cut into max_tokens pieces first.
    Every sequence but a block's last is as full as whole sentences allow.

    Args:
      tokens: ragged int32 [N, (T)] token ids of the block's non-empty sentences, in order.
      doc: int32 [N] document index of each sentence (non-decreasing).
      max_tokens: int, tokens per sequence (max_seq_length - 2).
      sep_id: the [SEP] id.

    Returns:
      ragged int32 [K, (L)] with 1 <= L <= max_tokens.
    """
    flat = tokens.flat_values
    sent_len = tokens.row_lengths()
    max_tokens64 = tf.constant(max_tokens, tf.int64)
    # Units: sentences, the long ones cut into max_tokens pieces.
    pieces = (sent_len + max_tokens64 - 1) // max_tokens64  # [N]
    unit_start = (tf.repeat(tokens.row_starts(), pieces)
                  + tf.ragged.range(pieces).flat_values * max_tokens64)  # [U]
    unit_len = tf.minimum(tf.repeat(tokens.row_limits(), pieces) - unit_start, max_tokens64)
    unit_doc = tf.repeat(doc, pieces)
    new_doc = tf.concat([[False], unit_doc[1:] != unit_doc[:-1]], axis=0)  # [U]
    num_units = tf.shape(unit_len)[0]

    def body(i, sequence, length, sequence_ta, separator_ta):
        separator = new_doc[i] & (length > 0)
        need = unit_len[i] + tf.cast(separator, tf.int64)
        overflow = length + need > max_tokens64
        sequence = tf.where(overflow, sequence + 1, sequence)
        separator &= ~overflow
        length = tf.where(overflow, unit_len[i], length + need)
        return (i + 1, sequence, length, sequence_ta.write(i, sequence),
                separator_ta.write(i, separator))

    _, _, _, sequence_ta, separator_ta = tf.while_loop(
        lambda i, *_: i < num_units, body,
        (tf.constant(0), tf.constant(0, tf.int64), tf.constant(0, tf.int64),
         tf.TensorArray(tf.int64, size=num_units, element_shape=[]),
         tf.TensorArray(tf.bool, size=num_units, element_shape=[])))
    unit_sequence, separator = sequence_ta.stack(), separator_ta.stack()
    unit_tokens = tf.gather(flat, tf.ragged.range(unit_start, unit_start + unit_len))
    separators = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(separator, tf.int32))], tf.constant(sep_id, tf.int32)),
        tf.cast(separator, tf.int64))
    units = tf.concat([separators, unit_tokens], axis=1)  # [U, (T)]
    sequences = tf.RaggedTensor.from_value_rowids(units, unit_sequence)  # [K, (units), (T)]
    return sequences.merge_dims(1, 2)


def _mlm_only_segments(tokens, max_tokens, short_seq_prob, seed):
    """Full-length sequences cut from the block's token stream, across sentence/document ends.

    Args:
      tokens: ragged int32 [N, (T)] token ids of the block's sentences.
      max_tokens: int, tokens per sequence (max_seq_length - 2).
      short_seq_prob: probability that a sequence gets a random length in [2, max_tokens].
      seed: int64 [2] stateless seed.

    Returns:
      ragged int32 [K, (L)] with 1 <= L <= max_tokens (only the block's last one may be short
      other than by short_seq_prob).
    """
    s_short, s_len = tf.unstack(split_seed(seed, 2))
    flat = tokens.flat_values
    total = tf.size(flat, out_type=tf.int64)
    # Enough windows even if every one is short (>= 2 tokens).
    num_windows = total // 2 + 1
    short = tf.random.stateless_uniform([num_windows], s_short) < short_seq_prob
    short_len = 2 + _random_below(s_len, tf.fill([num_windows], tf.cast(max_tokens - 1, tf.int64)))
    window_len = tf.where(short, short_len, max_tokens)
    ends = tf.minimum(tf.cumsum(window_len), total)
    windows = tf.RaggedTensor.from_row_splits(flat, tf.concat([[0], ends], axis=0))
    return tf.ragged.boolean_mask(windows, windows.row_lengths() > 0)


def _pack(tokens_a, tokens_b, seq_length, vocab):
    """[CLS] A [SEP] (B [SEP]) -> input_word_ids, input_mask, input_type_ids int32 [K, S]."""
    rows = tokens_a.nrows()
    cls = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(vocab.cls_id, tf.int32)))
    sep = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(vocab.sep_id, tf.int32)))
    pieces, types = [cls, tokens_a, sep], [0, 0, 0]
    if tokens_b is not None:
        pieces += [tokens_b, sep]
        types += [1, 1]
    ids = tf.concat(pieces, axis=1)
    type_ids = tf.concat([tf.ones_like(p) * t for p, t in zip(pieces, types)], axis=1)
    shape = [None, seq_length]
    return {
        "input_word_ids": ids.to_tensor(default_value=vocab.pad_id, shape=shape),
        "input_mask": tf.ones_like(ids).to_tensor(default_value=0, shape=shape),
        "input_type_ids": type_ids.to_tensor(default_value=0, shape=shape),
    }


def text_pretraining_dataset(text_patterns=None, *, vocab_file, do_lower_case, batch_size,
                             recipe, use_next_sentence_label=True, full_sentences=False,
                             seed=None, is_training=True, input_context=None, tfds_name=None,
                             tfds_data_dir=None, tfds_split="train", tfds_text_key="text",
                             block_lines=_DEFAULT_BLOCK_LINES,
                             shuffle_buffer_size=_DEFAULT_SHUFFLE_BUFFER,
                             pack_buffer_size=_DEFAULT_PACK_BUFFER, masking_progress=None):
    """Pre-training batches made from raw text on the fly, masked afresh every epoch.

    Yields exactly what `pretraining_dataset` yields (same names, dtypes and static shapes), so
    either feeds the same model.

    Args:
      text_patterns: text file glob(s): str (comma-separated allowed) or list; gzip files
        (found by their first bytes) are decompressed; binary or bzip2 files are refused.
        One sentence per line, a blank line between documents.
      vocab_file: WordPiece vocab (one token per line), a tokenizer.json (WordPiece, or
        byte-level BPE: each word encoded as it reads after a space, as
        create_pretraining_data writes records) or a SentencePiece .model, with [CLS] [SEP]
        [PAD] and a mask token.
      do_lower_case: must match the vocab / checkpoint (None: a tokenizer.json's own).
      batch_size: global batch size; with `input_context`, the per-replica size is used.
      recipe: the masking_recipe.MaskingRecipe: S (max_seq_length, >= 5), P (the cap on
        masked tokens per sequence; with pack_sequences per row, capping each instance too),
        masked_lm_prob (of the real non-special tokens), short_seq_prob (probability of a
        shorter target length, as the original), do_whole_word_mask,
        sentence_order_prediction (ALBERT's SOP pairs instead of NSP pairs: B is the text
        after A, and the two are swapped with probability 0.5, label 1 = swapped; a
        one-sentence chunk is split at a random token; needs use_next_sentence_label),
        do_span_mask (SpanBERT's span masking, see span_mask_batch, always whole words; adds
        span_left_boundaries and span_right_boundaries to the features) with
        span_geometric_p and max_span_length, ngram_mask (ALBERT's n-grams of whole words,
        placed as spans, without boundaries in the features), pack_sequences (pack whole
        instances into rows, see the module doc) with max_instances_per_row (I; 0 =
        max(2, S // 16)).
      use_next_sentence_label: True: sentence pairs with 50% random B (label 1); False: full
        sequences packed across sentence and document boundaries, labels all 0 (by default
        windows of the token stream cut anywhere; see full_sentences).
      seed: int; None draws one (training) or uses 0 (evaluation, so the eval set is fixed).
      is_training: shuffle files/examples and repeat forever (True), or one ordered pass.
      input_context: a tf.distribute.InputContext; pipelines read disjoint shards (whole files
        when there are at least as many files as pipelines, else every n-th block of lines).
      tfds_name: instead of text files, a TFDS text dataset already prepared under
        `tfds_data_dir` (never downloaded); each example is a document, its lines the sentences.
      tfds_data_dir: the TFDS data_dir.
      tfds_split: the split to read.
      tfds_text_key: the text feature of the TFDS examples.
      block_lines: lines tokenized together; also the pool for random next sentences (>= 1,
        >= 2 with next-sentence prediction: a one-line block can make no pair).
      shuffle_buffer_size: sequences in the training shuffle buffer.
      full_sentences: RoBERTa's FULL-SENTENCES packing (without next-sentence prediction):
        whole sentences in order, across document ends with an extra [SEP] between
        documents, each sequence as full as whole sentences allow; short_seq_prob is not used.
      pack_buffer_size: instances packed together (>= 1); more fill rows better.
      masking_progress: with recipe.masked_lm_prob_end in training, a float32 scalar
        tf.Variable: the share of training done, in [0, 1], that the run sets as it trains
        (controller.train's on_progress); each batch (each packing group) is masked at the
        recipe's rate for the value it reads when it is made, so batches prefetched ahead of
        the step keep the rate of when they were made. Not used in evaluation, which masks at
        masked_lm_prob.

    Returns:
      tf.data.Dataset of dicts: input_word_ids, input_mask, input_type_ids int32 [B, S];
      masked_lm_positions, masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P];
      next_sentence_labels int32 [B]; with do_span_mask also span_left_boundaries and
      span_right_boundaries int32 [B, P]. Packed: as pretraining_dataset's packed rows
      (input_instance_ids [B, S]; next_sentence_positions / _labels / _weights [B, I]).

    Raises:
      ValueError: bad arguments (named), a pattern matching no file, or input without any
        non-blank line (the files or the TFDS dataset are named). In training, iteration fails
        with tf.errors.InvalidArgumentError when _MAX_EMPTY_BLOCKS blocks in a row make no
        sequence (e.g. text without any token), rather than spinning forever.
    """
    # The masking and packing graphs transpose int64 ids: oneDNN's one-time notice goes where
    # nobody sees it (bert_tf.quiet_logs).
    quiet_logs.absorb_onednn_type_notice()
    max_seq_length, max_predictions_per_seq = recipe.max_seq_length, recipe.max_predictions_per_seq
    masked_lm_prob, short_seq_prob = recipe.masked_lm_prob, recipe.short_seq_prob
    sentence_order_prediction, do_span_mask = recipe.sentence_order_prediction, recipe.do_span_mask
    span_geometric_p, max_span_length = recipe.span_geometric_p, recipe.max_span_length
    pack_sequences = recipe.pack_sequences
    _check_args(batch_size, max_seq_length, max_predictions_per_seq, masked_lm_prob,
                short_seq_prob, text_patterns, tfds_name)
    masking_rate = _masking_rate(recipe, masking_progress, is_training)
    if use_next_sentence_label and block_lines < 2:
        raise ValueError(f"block_lines={block_lines} must be >= 2 with next-sentence "
                         "prediction (a block of one line can make no sentence pair).")
    if block_lines < 1:
        raise ValueError(f"block_lines={block_lines} must be >= 1.")
    if sentence_order_prediction and not use_next_sentence_label:
        raise ValueError("sentence_order_prediction=True makes sentence pairs; it needs "
                         "use_next_sentence_label=True.")
    if full_sentences and use_next_sentence_label:
        raise ValueError("full_sentences=True packs single sequences; it needs "
                         "use_next_sentence_label=False.")
    if do_span_mask and not (0.0 < span_geometric_p <= 1.0 and max_span_length >= 1):
        raise ValueError(f"span_geometric_p={span_geometric_p} must be in (0, 1] and "
                         f"max_span_length={max_span_length} >= 1.")
    problem = ngram_mask_problem(recipe.ngram_mask, do_span_mask)
    if problem:
        raise ValueError(problem)
    if pack_sequences:
        if full_sentences:
            raise ValueError("pack_sequences=True packs instances whole; full_sentences=True "
                             "already fills rows. Pass at most one of them.")
        max_instances_per_row = recipe.instances_per_row
        if max_instances_per_row < 1 or pack_buffer_size < 1:
            raise ValueError(f"max_instances_per_row={max_instances_per_row} and "
                             f"pack_buffer_size={pack_buffer_size} must be >= 1.")
    else:
        _warn_if_predictions_capped(max_seq_length, max_predictions_per_seq,
                                    recipe.highest_masked_lm_prob if is_training
                                    else masked_lm_prob)
    python_tokenizer = load_tokenizer(vocab_file, do_lower_case)
    vocab = _Vocab(python_tokenizer)
    tokenizer = tokenizer_layer(python_tokenizer)
    if seed is None:
        seed = random.SystemRandom().randrange(2**31) if is_training else 0
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    per_pipeline_batch = batch_size
    if input_context is not None:
        per_pipeline_batch = input_context.get_per_replica_batch_size(batch_size)
    base_seed = tf.constant([seed, pipeline_id], tf.int64)
    block_seed = tf.random.experimental.stateless_fold_in(base_seed, _BLOCK_STREAM)
    mask_seed = tf.random.experimental.stateless_fold_in(base_seed, _MASK_STREAM)

    if tfds_name is not None:
        blocks = _tfds_line_blocks(tfds_name, tfds_data_dir, tfds_split, tfds_text_key,
                                   block_lines, is_training, seed, input_context)
    else:
        files = expand_input_patterns(text_patterns)
        compressions = _check_text_files(files)
        _check_some_text(files, pairs=use_next_sentence_label)
        blocks = _text_line_blocks(files, compressions, block_lines, is_training, seed,
                                   input_context)
    # Single quotes: the assertion message below would print double quotes escaped.
    source = (f"TFDS dataset '{tfds_name}'" if tfds_name is not None
              else _describe_files(files))

    @_as_written
    def make_sequences(block_index, lines):
        """lines tf.string [L] -> dict of int32 [N, S] and next_sentence_labels [N]."""
        seed_here = tf.random.experimental.stateless_fold_in(block_seed, block_index)
        lines = tokenizer.corpus_lines(lines)
        blank = tf.equal(lines, "")
        doc = tf.cumsum(tf.cast(blank, tf.int32))
        sentences, doc = tf.boolean_mask(lines, ~blank), tf.boolean_mask(doc, ~blank)
        tokens = tf.cast(tokenizer(sentences), tf.int32)  # ragged [N, (T)]
        non_empty = tokens.row_lengths() > 0
        tokens = tf.ragged.boolean_mask(tokens, non_empty)
        if sentence_order_prediction:
            _, doc = tf.unique(tf.boolean_mask(doc, non_empty))  # 0..D-1
            tokens_a, tokens_b, labels = _sop_segments(tokens, doc, max_seq_length - 3,
                                                       short_seq_prob, seed_here)
        elif use_next_sentence_label:
            _, doc = tf.unique(tf.boolean_mask(doc, non_empty))  # 0..D-1
            # A block inside one long document (a book) has no other document to draw random
            # next sentences from; its two halves, far apart in the text, then serve as two.
            num_sentences = tf.size(doc)
            halves = tf.range(num_sentences) * 2 // tf.maximum(num_sentences, 1)
            doc = tf.where(_num_ids(doc) == 1, halves, doc)
            tokens_a, tokens_b, labels = _nsp_segments(tokens, doc, max_seq_length - 3,
                                                       short_seq_prob, seed_here)
        elif full_sentences:
            _, doc = tf.unique(tf.boolean_mask(doc, non_empty))
            tokens_a = _full_sentence_segments(tokens, doc, max_seq_length - 2, vocab.sep_id)
            tokens_b, labels = None, tf.zeros([tokens_a.nrows()], tf.int32)
        else:
            tokens_a = _mlm_only_segments(tokens, max_seq_length - 2, short_seq_prob, seed_here)
            tokens_b, labels = None, tf.zeros([tokens_a.nrows()], tf.int32)
        packed = _pack(tokens_a, tokens_b, max_seq_length, vocab)
        packed["next_sentence_labels"] = labels
        return packed

    @_as_written
    def mask(batch_index, features):
        if recipe.masks_spans:
            masked = span_mask_batch(
                features, tf.random.experimental.stateless_fold_in(mask_seed, batch_index),
                vocab_size=vocab.size, cls_id=vocab.cls_id, sep_id=vocab.sep_id,
                mask_id=vocab.mask_id, max_predictions_per_seq=max_predictions_per_seq,
                is_continuation=vocab.is_continuation, masked_lm_prob=masking_rate(),
                span_geometric_p=span_geometric_p, max_span_length=max_span_length,
                span_length_weights=(recipe.span_length_weights() if recipe.ngram_mask
                                     else None))
            if not do_span_mask:  # n-grams: no span-boundary objective to feed
                for name in ("span_left_boundaries", "span_right_boundaries"):
                    masked.pop(name)
            return masked
        return mask_batch(
            features, tf.random.experimental.stateless_fold_in(mask_seed, batch_index),
            vocab_size=vocab.size, cls_id=vocab.cls_id, sep_id=vocab.sep_id,
            mask_id=vocab.mask_id, max_predictions_per_seq=max_predictions_per_seq,
            masked_lm_prob=masking_rate(),
            is_continuation=vocab.is_continuation if recipe.do_whole_word_mask else None)

    @_as_written
    def guard(empty_run, sequences):
        """Counts consecutive blocks without a sequence; fails past _MAX_EMPTY_BLOCKS."""
        empty_run = tf.where(tf.size(sequences["next_sentence_labels"]) > 0,
                             tf.constant(0, tf.int64), empty_run + 1)
        check = tf.debugging.assert_less(
            empty_run, tf.constant(_MAX_EMPTY_BLOCKS, tf.int64),
            message=(f"text_pretraining_dataset: {_MAX_EMPTY_BLOCKS} blocks of "
                     f"{block_lines} lines in a row made no sequence from {source}; the "
                     "input has no token or (with next-sentence prediction) too few "
                     "sentences to pair"))
        with tf.control_dependencies([check]):
            return empty_run, tf.nest.map_structure(tf.identity, sequences)

    ds = blocks.enumerate().map(make_sequences, num_parallel_calls=tf.data.AUTOTUNE,
                                deterministic=True)
    if is_training:
        # Repeated input that makes nothing would otherwise spin forever in unbatch/batch.
        ds = ds.scan(tf.constant(0, tf.int64), guard)
    ds = ds.unbatch()
    if is_training:
        ds = ds.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    if pack_sequences:
        # Instances are masked first (each its own budget), then packed whole; an
        # evaluation pass packs its last, partial group too.
        ds = ds.batch(pack_buffer_size).enumerate()
        ds = ds.map(mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        ds = ds.map(_as_written(lambda f: pack_instance_features(
            f, max_seq_length=max_seq_length, max_instances_per_row=max_instances_per_row,
            max_predictions_per_row=max_predictions_per_seq)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        ds = ds.unbatch()
        if is_training:
            # A group's rows come out ordered by their longest instance: mix them.
            ds = ds.shuffle(pack_buffer_size, seed=seed, reshuffle_each_iteration=True)
        ds = ds.batch(per_pipeline_batch, drop_remainder=True)
        return ds.prefetch(tf.data.AUTOTUNE)
    ds = ds.batch(per_pipeline_batch, drop_remainder=True).enumerate()
    ds = ds.map(mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)
