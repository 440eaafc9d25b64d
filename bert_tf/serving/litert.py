"""LiteRT (TensorFlow Lite) export: one .tflite file that answers raw text, and its op census.

`plan_litert`, `convert` and `write_model` make DIR/model.tflite with two signatures, the names
of the SavedModel's (bert_tf.serving.exporter); bert_tf.serving.litert_export.export_litert
runs them, quantized as bert_tf.serving.quantization says:

  serving_default  int32 input_word_ids, input_mask, input_type_ids [B, S'] -> the model's
                   outputs (logits, start_logits/end_logits, ...), any S' up to
                   max_position_embeddings
  serve_text       tf.string text [B] (and text_pair) -> task outputs; classification:
                   probabilities [B, C], label_names [B, C], predicted_label [B];
                   multi_label: probabilities [B, C], label_names [B, C], predicted bool
                   [B, C]; regression: score [B]; embedding: pooled_output,
                   mean_pooled_output [B, H]

Text runs through TensorFlow Text's LiteRT kernels (FastBertNormalize, then
FastWordpieceTokenizeWithOffsets, which also splits words at whitespace, punctuation and CJK
characters as BERT's basic tokenizer does); [CLS] A [SEP] (B [SEP]) packing, longest-first
truncation and the length bucket are builtin ops. The encoder runs at the smallest length bucket
that holds the batch's longest input, so a short request costs a short sequence.

The in-model tokenizer equals the Python `WordpieceTokenizer` on ordinary text, not everywhere
(TensorFlow Text's normaliser is not the original's): uncased, characters with a compatibility
decomposition become it ("…" -> "...", "ﬁ" -> "fi", full-width letters -> ASCII), case folding
replaces lower-casing where they differ ("ß" -> "ss", "µ" -> "μ"), a word-final capital sigma
becomes σ rather than ς, and some invisible format characters (U+200B..U+200F,
U+2060, U+FEFF) and combining marks after a space are kept as separate tokens; the 200-character
word limit counts UTF-8 bytes. The SavedModel's serve_text has none of these differences.

A SentencePiece model (ALBERT's kind: unigram, no byte pieces) runs on TensorFlow Text's fast
SentencePiece kernel alone, with a copy of the model whose normaliser also prepares the text as
the Python `SentencePieceTokenizer` does and whose special pieces are user-defined stand-ins
(bert_tf.text.sentencepiece_prepared, which lists the differences, such as a word-final
capital sigma becoming σ); the lone word start before a special piece is dropped, the unknown's
stand-in mapped to the unknown id and the digit-comma cut applied with builtin ops.

Span (SQuAD), tagging and fill-mask models export their id signature only: their text outputs
(answer text, words and character offsets) need string ops LiteRT does not have
(`LiteRTUnsupportedError` names the alternative).

Only builtin ops and TensorFlow Text's registered kernels are allowed: `op_census` lists a
model's ops, and an export whose ops would need the select-TF ("Flex") runtime fails, naming
them, with nothing written.
"""

import collections
import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from bert_tf import fileio, model_directory
from bert_tf.modeling.token_ids import encoder_config
from bert_tf.modeling.kernels import export_tracing
from bert_tf.serving import task_info, task_signatures
from bert_tf.serving.exporter import check_labels, export_tokenizer_layer, write_failed
from bert_tf.text import sentencepiece_prepared
from bert_tf.text.input_packing import truncated_lengths
from bert_tf.text.sentencepiece import SentencePieceTokenizer

MODEL_FILE = model_directory.LITERT_MODEL_FILE
INFO_FILE = model_directory.LITERT_INFO_FILE
IDS_SIGNATURE = task_signatures.IDS_SIGNATURE
TEXT_SIGNATURE = task_signatures.TEXT_SIGNATURE
# Custom ops whose LiteRT kernels tensorflow_text.tflite_registrar registers (what the
# converter names them after TF Text's TensorFlow ops).
TF_TEXT_CUSTOM_OPS = frozenset({
    "FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "FastWordpieceDetokenize",
    "RaggedTensorToTensor", "WhitespaceTokenizeWithOffsetsV2", "NgramsStringJoin",
    "ByteSplitWithOffsets", "ByteSplitByOffsets", "RoundRobinTrim",
    "RoundRobinGenerateMasks", "Utf8Binarize", "SentenceFragmentsV2",
    "TFText>FastSentencepieceTokenize", "TFText>FastSentencepieceDetokenize"})
TEXT_TASKS = ("classification", "multi_label", "regression", "embedding")


class LiteRTUnsupportedError(ValueError):
    """A model, head or option LiteRT cannot express; the message names the alternative."""


class FlexOpsError(ValueError):
    """The converted model needs select-TF ("Flex") ops; the message names them."""


@dataclasses.dataclass
class OpCensus:
    """The ops of a .tflite model.

    Attributes:
      counts: Counter op name -> nodes, over every subgraph (builtins by their LiteRT name,
        e.g. FULLY_CONNECTED; custom ops by their custom code).
      custom: the custom op names.
      flex: custom ops that are not TensorFlow Text kernels: TensorFlow ops the LiteRT builtins
        lack, which only the select-TF ("Flex") runtime could run.
    """

    counts: collections.Counter
    custom: frozenset
    flex: frozenset

    def format(self):
        width = max([len(op) for op in self.counts] + [2])
        lines = [f"{sum(self.counts.values())} ops of {len(self.counts)} types:"]
        for op in sorted(self.counts):
            kind = ("FLEX (select-TF)" if op in self.flex
                    else "tensorflow-text" if op in self.custom else "builtin")
            lines.append(f"  {op:<{width}}  {self.counts[op]:>5}  {kind}")
        return "\n".join(lines)


def op_census(model):
    """Lists the ops of a LiteRT model.

    Args:
      model: the .tflite file's bytes, or its path.

    Returns:
      `OpCensus`.
    """
    from tensorflow.lite.python import schema_py_generated as schema

    if isinstance(model, (str, os.PathLike)):
        with fileio.open_file(os.fspath(model), "rb") as f:
            model = f.read()
    parsed = schema.ModelT.InitFromPackedBuf(model, 0)
    names = {code: name for name, code in vars(schema.BuiltinOperator).items()
             if not name.startswith("_")}
    counts, custom = collections.Counter(), set()
    for subgraph in parsed.subgraphs:
        for op in subgraph.operators or []:
            code = parsed.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            if builtin == schema.BuiltinOperator.CUSTOM:
                name = code.customCode.decode()
                custom.add(name)
            else:
                name = names.get(builtin, f"BUILTIN_{builtin}")
            counts[name] += 1
    flex = frozenset(op for op in custom
                     if op.startswith("Flex") or op not in TF_TEXT_CUSTOM_OPS)
    return OpCensus(counts=counts, custom=frozenset(custom), flex=flex)


# ----------------------------------------------------------------------------- text in-model

class LiteRTTokenizer(tf.Module):
    """BERT tokenization on TensorFlow Text's LiteRT kernels: tf.string [B] -> ragged ids.

    Args:
      tokenizer: the `BertTokenizerLayer` whose vocabulary, casing and unknown token to use.
    """

    def __init__(self, tokenizer):
        super().__init__(name="litert_tokenizer")
        self.normalizer = tf_text.FastBertNormalizer(
            lower_case_nfd_strip_accents=tokenizer.do_lower_case)
        self.wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokenizer.fast_wordpiece_vocab(tokenizer.vocabulary)[0], suffix_indicator="##",
            max_bytes_per_word=tokenizer.max_input_chars_per_word, token_out_type=tf.int32,
            unknown_token=tokenizer.unk_token, no_pretokenization=False,
            support_detokenization=False)

    def __call__(self, texts):
        """tf.string [B] -> (flat int32 ids [N], int32 row starts [B], int32 row lengths [B])."""
        ids = self.wordpiece.tokenize(self.normalizer.normalize(texts))
        splits = tf.cast(ids.row_splits, tf.int32)
        return ids.flat_values, splits[:-1], splits[1:] - splits[:-1]


class LiteRTSentencePieceTokenizer(tf.Module):
    """ALBERT's SentencePiece tokenization on TensorFlow Text's fast SentencePiece kernel:
    tf.string [B] -> ragged ids (the contract of `LiteRTTokenizer`).

    The kernel runs `sentencepiece_prepared.prepared_model_proto` (the Python tokenizer's
    text preparation folded into the model's normaliser, its special pieces user-defined
    stand-ins); the lone word start before a special piece is dropped, and the unknown's
    stand-in (one piece past the vocabulary) and the digit-comma cut applied as one table of
    replacements, with builtin gathers and cumulative sums.

    Args:
      tokenizer: the `SentencePieceTokenizerLayer` whose model and casing to use.
    """

    def __init__(self, tokenizer):
        super().__init__(name="litert_sentencepiece")
        python = SentencePieceTokenizer(tokenizer.model_proto, tokenizer.do_lower_case)
        self.sentencepiece = tf_text.FastSentencepieceTokenizer(
            sentencepiece_prepared.prepared_model_proto(python))
        table, counts = sentencepiece_prepared.id_table(python)
        standin = np.zeros([len(counts)], np.int32)
        standin[list(sentencepiece_prepared.standin_ids(python))] = 1
        self._width = table.shape[1]
        self._table = tf.constant(table.reshape(-1))  # [V' * K]
        self._counts = tf.constant(counts)  # [V']
        self._unk_id = python.unk_id
        self._word_start_id = sentencepiece_prepared.word_start_id(python)
        self._standin = tf.constant(standin)  # [V']

    def __call__(self, texts):
        """tf.string [B] -> (flat int32 ids [N + 1], the last a sentinel no row covers (LiteRT
        cannot read back an empty tensor); int32 row starts [B]; int32 row lengths [B])."""
        pieces = self.sentencepiece.tokenize(texts)  # int32 [B, (P)]
        # One piece more than the texts hold (no row covers it): LiteRT's SCATTER_ND fails on
        # an empty shape, which a batch of empty texts would give.
        flat = tf.concat([pieces.flat_values, [self._unk_id]], axis=0)  # [P + 1]
        counts = tf.gather(self._counts, flat)  # [P + 1], each >= 1
        if self._word_start_id is not None:
            # A lone word start before a stand-in becomes nothing (the Python tokenizer
            # segments the text before the piece alone, its end stripped). SentencePiece
            # never ends a text with one, so the next piece is in the same row.
            following = tf.gather(self._standin, tf.concat([flat[1:], [0]], axis=0))
            counts *= 1 - tf.cast(tf.equal(flat, self._word_start_id), tf.int32) * following
        ends = tf.cumsum(counts)
        starts = ends - counts
        total = tf.reduce_sum(counts)
        # Output position j holds part j - starts[q] of piece q, the last piece starting at or
        # before j (a piece of no parts shares its start with the next, and the sum of their
        # marks skips it; the sentinel, never dropped, keeps every start inside).
        first = tf.scatter_nd(tf.expand_dims(starts, 1), tf.ones_like(starts),
                              tf.expand_dims(total, 0))
        source = tf.cumsum(first) - 1  # [N + 1]
        part = tf.range(total) - tf.gather(starts, source)
        ids = tf.gather(self._table, tf.gather(flat, source) * self._width + part)
        splits = tf.gather(tf.concat([[0], ends], axis=0),
                           tf.cast(pieces.row_splits, tf.int32))  # [B + 1]
        return ids, splits[:-1], splits[1:] - splits[:-1]


def litert_tokenizer(tokenizer):
    """The LiteRT tokenization of an in-graph tokenizer layer whose `litert_kernels` is True:
    `LiteRTTokenizer` (WordPiece) or `LiteRTSentencePieceTokenizer`."""
    if tokenizer.kind == "SentencePiece":
        return LiteRTSentencePieceTokenizer(tokenizer)
    return LiteRTTokenizer(tokenizer)


def _segment_at(flat_ids, starts, lengths, offset, positions, pad_id):
    """Tokens of a segment placed at `offset`: [B, L] with flat_ids[starts + p - offset] where
    0 <= p - offset < lengths, else pad_id (builtin GATHER/SELECT, no ragged ops).

    Args: flat_ids int32 [N]; starts, lengths, offset: int32 [B, 1]; positions int32 [1, L].
    """
    index = positions - offset  # [B, L]
    inside = (index >= 0) & (index < lengths)
    padded = tf.concat([flat_ids, [pad_id]], axis=0)  # Index N: the pad (also for N = 0).
    flat_index = tf.where(inside, starts + index, tf.size(flat_ids))
    return tf.gather(padded, flat_index), inside


def pack_dense(segments, seq_length, length_buckets, cls_id, sep_id, pad_id):
    """[CLS] A [SEP] (B [SEP]) packing with builtin ops, at the batch's length bucket.

    Truncates longest-first as `bert_tf.text.input_packing.pack_inputs` (a B empty, or truncated
    away, gets no second [SEP]), then runs at L = the smallest of `length_buckets` that holds
    the longest packed row.

    Args:
      segments: one or two (flat ids [N], row starts [B], row lengths [B]) from
        `LiteRTTokenizer` or `LiteRTSentencePieceTokenizer`.
      seq_length: S, the longest packed length.
      length_buckets: increasing ints ending with S.

    Returns:
      dict of input_word_ids, input_mask, input_type_ids: int32 [B, L].
    """
    flat_a, starts_a, len_a = segments[0]
    if len(segments) == 2:
        flat_b, starts_b, len_b = segments[1]
        budget = seq_length - 2 - tf.cast(len_b > 0, tf.int32)
        kept_a, kept_b = truncated_lengths(len_a, len_b, budget)
    else:
        kept_a = tf.minimum(len_a, seq_length - 2)
        kept_b = tf.zeros_like(kept_a)
    has_b = tf.cast(kept_b > 0, tf.int32)
    total = kept_a + 2 + kept_b + has_b  # [B]
    longest = tf.reduce_max(tf.concat([total, [1]], axis=0))
    buckets = tf.constant(length_buckets, tf.int32)
    length = tf.reduce_min(tf.where(buckets >= longest, buckets, seq_length))
    positions = tf.expand_dims(tf.range(length), 0)  # [1, L]
    column = lambda x: tf.expand_dims(x, 1)  # noqa: E731  [B] -> [B, 1]
    word_ids, in_a = _segment_at(flat_a, column(starts_a), column(kept_a), 1, positions, pad_id)
    sep_a = tf.equal(positions, column(kept_a) + 1)
    word_ids = tf.where(tf.equal(positions, 0), cls_id, tf.where(sep_a, sep_id, word_ids))
    # Type 1 on B [SEP]: from kept_a + 2 to the end of the row; a select, not a cast: the
    # converter folds the embedding's `ids < 0` of a cast bool (or of zeros, as one segment's
    # type ids would be) into a boolean zeros_like that LiteRT has no kernel for.
    type_ids = tf.where((positions >= column(kept_a) + 2) & (positions < column(total)), 1, 0)
    if len(segments) == 2:
        b_offset = column(kept_a) + 2
        ids_b, in_b = _segment_at(flat_b, column(starts_b), column(kept_b), b_offset,
                                  positions, pad_id)
        sep_b = tf.equal(positions, b_offset + column(kept_b)) & (column(has_b) > 0)
        word_ids = tf.where(in_b, ids_b, tf.where(sep_b, sep_id, word_ids))
    mask = tf.cast(positions < column(total), tf.int32)
    word_ids = tf.where(mask > 0, word_ids, pad_id)
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


class _LiteRTModule(tf.Module):
    """The functions converted to LiteRT: the task's id and (when expressible) text signatures."""

    def __init__(self, task, tokenizer, text_pair, length_buckets):
        super().__init__(name="bert_tf_litert")
        self._task = task
        self._text_pair = text_pair
        self._length_buckets = length_buckets
        self._tokenizer = litert_tokenizer(tokenizer) if tokenizer is not None else None
        self.serve_ids = tf.function(self._ids, input_signature=[task.ids_signature()],
                                     autograph=False)
        if self._tokenizer is not None:
            names = ("text", "text_pair") if text_pair else ("text",)
            self.serve_text = tf.function(
                self._text, autograph=False,
                input_signature=[{n: tf.TensorSpec([None], tf.string, name=n) for n in names}])

    def _ids(self, features):
        return self._task.ids(features)

    def _text(self, inputs):
        names = ("text", "text_pair") if self._text_pair else ("text",)
        tokenizer = self._task.tokenizer
        # One tokenizer call per input (LiteRT has no string concatenation to batch them).
        segments = [self._tokenizer(inputs[n]) for n in names]
        features = pack_dense(segments, self._task.seq_length, self._length_buckets,
                              tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
        return self._outputs(features)

    def _outputs(self, features):
        task = self._task
        if task.name == "embedding":
            outputs = task.ids(features)
            mask_bs1 = tf.expand_dims(tf.cast(features["input_mask"], tf.float32), 2)
            summed_bh = tf.reduce_sum(outputs["sequence_output"] * mask_bs1, axis=1)
            return {"pooled_output": outputs["pooled_output"],
                    "mean_pooled_output": summed_bh / tf.reduce_sum(mask_bs1, axis=1)}
        logits_bc = task.ids(features)["logits"]
        if task.name == "regression":
            return {"score": tf.reshape(logits_bc, [-1])}
        labels = tf.constant(task.labels)
        batch = tf.shape(logits_bc)[0]
        if task.name == "multi_label":
            return {"probabilities": tf.sigmoid(logits_bc),
                    "label_names": tf.tile(tf.expand_dims(labels, 0), tf.stack([batch, 1])),
                    "predicted": logits_bc > task.threshold_logit}
        return {
            "probabilities": tf.nn.softmax(logits_bc, axis=-1),
            "label_names": tf.tile(tf.expand_dims(labels, 0), tf.stack([batch, 1])),
            "predicted_label": tf.gather(labels, tf.argmax(logits_bc, axis=-1)),
        }


def _frozen(function):
    """`function` with the model's variables as constants, keeping its input and output names.

    LiteRT then sees FULLY_CONNECTED layers over constant weights (which it can quantize)
    rather than resource variables.
    """
    concrete = function.get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    spec = concrete.structured_input_signature[0][0]  # dict name -> TensorSpec
    output_names = sorted(concrete.structured_outputs)  # the flat outputs' order

    def named(inputs):
        flat = frozen(*[inputs[name] for name in sorted(spec)])
        return dict(zip(output_names, flat))
    return tf.function(named, input_signature=[spec], autograph=False)


@dataclasses.dataclass
class LiteRTPlan:
    """What `convert` turns into a .tflite file (built by `plan_litert`)."""

    module: _LiteRTModule
    task: object
    signatures: tuple
    max_seq_length: int
    length_buckets: tuple
    text_pair: bool

    def info(self):
        info = {"model": type(self.task.model).__name__, "task": self.task.name,
                "signatures": {IDS_SIGNATURE: sorted(self.task.ids_signature())}}
        if TEXT_SIGNATURE in self.signatures:
            info["signatures"][TEXT_SIGNATURE] = (["text", "text_pair"] if self.text_pair
                                                  else ["text"])
            info.update(max_seq_length=self.max_seq_length,
                        length_buckets=list(self.length_buckets),
                        do_lower_case=self.task.tokenizer.do_lower_case)
        if getattr(self.task, "labels", None):
            info["labels"] = list(self.task.labels)
        if self.task.name == "multi_label":
            info["multi_label_threshold"] = self.task.threshold
        return info


def plan_litert(model, *, vocab_file=None, tokenizer=None, do_lower_case=True,
                max_seq_length=128, labels=None, signatures=("ids", "text"), text_pair=False,
                length_buckets=None,
                multi_label_threshold=task_info.DEFAULT_MULTI_LABEL_THRESHOLD):
    """Checks what LiteRT can express of `model` and builds the functions to convert.

    Args: as bert_tf.serving.litert_export.export_litert.

    Returns:
      `LiteRTPlan`.

    Raises:
      LiteRTUnsupportedError: a text signature for a span, tagging or fill-mask model, or an
        unknown signature (naming what to export instead).
      ValueError: an argument that does not fit the model.
    """
    unknown = [s for s in signatures if s not in ("ids", "text")]
    if "examples" in signatures:
        raise LiteRTUnsupportedError(
            "--format=litert: the examples signature (serve_examples) parses tf.Example "
            "protos, which LiteRT cannot; export --signatures=ids,text, or --format=saved_model "
            "for serve_examples.")
    if unknown or not signatures:
        raise ValueError(f"--format=litert: signatures={list(signatures)!r}; choose from ids, "
                         "text.")
    task_name = task_signatures.task_name_of(model)
    wants_text = "text" in signatures
    if wants_text and task_name not in TEXT_TASKS:
        raise LiteRTUnsupportedError(
            f"--format=litert: serve_text of a {task_name} model ({type(model).__name__}) "
            "cannot be expressed in LiteRT (its answers are words, character offsets or "
            "strings cut from the text, which need string ops LiteRT lacks); export "
            "--signatures=ids for LiteRT (token ids in, logits out), or --format=saved_model "
            "for serve_text.")
    tokenizer = export_tokenizer_layer(tokenizer, vocab_file, do_lower_case) if wants_text else None
    if wants_text and tokenizer is None:
        raise ValueError("--format=litert: the text signature needs vocab_file (or "
                         "tokenizer); pass signatures=('ids',) to export without one.")
    if wants_text and not tokenizer.litert_kernels:
        problem = (getattr(tokenizer, "litert_problem", None)
                   or "its in-graph tokenizer's ops have no LiteRT kernels")
        raise LiteRTUnsupportedError(
            f"--format=litert: serve_text with a {type(tokenizer).__name__} cannot be expressed "
            f"in LiteRT ({problem}); export --signatures=ids for LiteRT, or "
            "--format=saved_model for serve_text.")
    config = encoder_config(model)
    if wants_text and not 3 <= max_seq_length <= config.max_position_embeddings:
        raise ValueError(f"export: max_seq_length={max_seq_length} must be in [3, "
                         f"max_position_embeddings={config.max_position_embeddings}].")
    if tokenizer is not None and tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"export: the vocabulary has {tokenizer.vocab_size} tokens but the "
                         f"model's vocab_size is only {config.vocab_size}.")
    labels = check_labels(task_name, model, labels)
    if task_name == "classification":
        task = task_signatures.ClassificationSignatures(model, tokenizer, max_seq_length, labels,
                                                        text_pair)
    elif task_name == "multi_label":
        task = task_signatures.MultiLabelSignatures(model, tokenizer, max_seq_length, labels,
                                                    text_pair, multi_label_threshold)
    elif task_name == "regression":
        task = task_signatures.RegressionSignatures(model, tokenizer, max_seq_length, text_pair)
    elif task_name == "embedding":
        task = task_signatures.EmbeddingSignatures(model, tokenizer, max_seq_length)
    elif task_name == "squad":
        task = task_signatures.SpanSignatures(model, None, max_seq_length, 1, 1, 1, False)
    elif task_name == "tagging":
        task = task_signatures.TaggingSignatures(model, None, max_seq_length, labels)
    else:
        task = task_signatures.FillMaskSignatures(model, None, max_seq_length, [], 1)
    buckets = (task_signatures.check_length_buckets(length_buckets, max_seq_length,
                                          config.max_position_embeddings)
               if wants_text else ())
    text_pair = bool(text_pair) and task_name in task_info.CLASSIFIER_TASKS
    module = _LiteRTModule(task, tokenizer, text_pair, buckets)
    keys = tuple(k for s, k in (("ids", IDS_SIGNATURE), ("text", TEXT_SIGNATURE))
                 if s in signatures)
    return LiteRTPlan(module=module, task=task, signatures=keys, max_seq_length=max_seq_length,
                      length_buckets=buckets, text_pair=text_pair)


def convert(plan, converter_options=None):
    """Converts a `LiteRTPlan` to .tflite bytes, checked by `op_census`.

    Args:
      plan: from `plan_litert`.
      converter_options: a function that sets quantization options on the
        `tf.lite.TFLiteConverter` (see bert_tf.serving.quantization), or None for float32.

    Returns:
      (bytes, `OpCensus`).

    Raises:
      FlexOpsError: the model has ops that only the select-TF runtime could run.
    """
    functions = {IDS_SIGNATURE: plan.module.serve_ids}
    if TEXT_SIGNATURE in plan.signatures:
        functions[TEXT_SIGNATURE] = plan.module.serve_text
    return convert_functions({key: functions[key] for key in plan.signatures},
                             converter_options, what=f"the {plan.task.name} model")


def convert_functions(functions, converter_options=None, what="the model"):
    """Converts tf.functions (each with an input_signature of one dict) to one .tflite file
    with a signature per function, allowing only builtin and TensorFlow Text ops.

    Args:
      functions: dict signature name -> tf.function.
      converter_options: see `convert`.
      what: how errors name the model.

    Returns:
      (bytes, `OpCensus`).

    Raises:
      FlexOpsError: naming the ops that only the select-TF ("Flex") runtime could run.
    """
    # Frozen functions saved as the signatures of an otherwise empty SavedModel: the converter
    # then keeps the signature names and sees constant weights.
    staging = tempfile.mkdtemp(prefix="bert_tf_litert_")
    try:
        saved = os.path.join(staging, "frozen")
        # Traced here, by _frozen: portable attention, and no custom gradients (LiteRT takes
        # no gradient; the converter's load of them warns).
        with export_tracing(leaves_tensorflow=True):
            signatures = {key: _frozen(function) for key, function in functions.items()}
        try:
            tf.saved_model.save(
                tf.Module(), saved,
                signatures=signatures,
                options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
        except (tf.errors.OpError, OSError) as e:
            raise write_failed(staging, "the frozen model the LiteRT converter reads", e)\
                from None
        converter = tf.lite.TFLiteConverter.from_saved_model(
            saved, signature_keys=list(functions))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        # Ops without a builtin become custom ops named after the TensorFlow op, so the census
        # can name every op the builtins lack (TF Text's kernels are among them).
        converter.allow_custom_ops = True
        if converter_options is not None:
            converter_options(converter)
        with _no_interpreter_deprecation():  # int8 calibration runs an interpreter
            content = converter.convert()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    census = op_census(content)
    if census.flex:
        raise FlexOpsError(
            f"--format=litert: {what} needs ops that LiteRT's builtins and TensorFlow Text's "
            f"kernels lack: {', '.join(sorted(census.flex))} (they would fall back to the "
            "select-TF 'Flex' runtime); no model was written.")
    return content, census


def write_model(content, export_dir, info, overwrite=False, expected=fileio.NOT_CHECKED):
    """Writes EXPORT_DIR/model.tflite and bert_tf_litert.json, staged beside it and moved into
    place together (fileio.publish_dir; `expected`: its state when checked, else taken here).

    Raises:
      FileExistsError: as check_target.
      fileio.TargetChangedError: export_dir appeared or changed since `expected` was taken.
    """
    path = check_target(export_dir, overwrite)
    export_dir = os.path.dirname(path)
    if expected is fileio.NOT_CHECKED:
        expected = fileio.state(export_dir)
    fileio.makedirs(os.path.dirname(export_dir))
    with fileio.staging_dir(export_dir, ".tmp_litert_") as staging:
        try:
            fileio.write_bytes_atomic(os.path.join(staging, MODEL_FILE), content)
            fileio.write_text_atomic(os.path.join(staging, INFO_FILE),
                                     json.dumps(info, indent=2) + "\n")
        except OSError as e:
            raise write_failed(export_dir, "the LiteRT model", e) from None
        fileio.publish_dir(staging, export_dir, expected, prefix=".tmp_old_litert_")
    return path


def check_target(export_dir, overwrite):
    """Fails before any work when export_dir cannot take a LiteRT export; returns the path of
    its model.tflite. export_dir must be new, empty, or (with overwrite) an earlier LiteRT
    export: model.tflite and bert_tf_litert.json, nothing else.

    Raises:
      FileExistsError naming the directory and what it holds.
    """
    export_dir = fileio.abspath(export_dir)
    if fileio.exists(export_dir) and not fileio.isdir(export_dir):
        raise FileExistsError(f"export: {export_dir} is a file; expected a directory for "
                              f"{MODEL_FILE}.")
    names = sorted(fileio.listdir(export_dir)) if fileio.isdir(export_dir) else []
    if names and not model_directory.holds_only(export_dir, model_directory.LITERT):
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        raise FileExistsError(f"export: {export_dir} is not a LiteRT export (it holds {shown}); "
                              "choose a new or empty directory.")
    if names and not overwrite:
        raise FileExistsError(f"export: {export_dir} holds a LiteRT export ({', '.join(names)}); "
                              "pass overwrite=True (--overwrite) to replace it, or choose "
                              "another --export_dir.")
    return os.path.join(export_dir, MODEL_FILE)


# ----------------------------------------------------------------------------- running

@contextlib.contextmanager
def _no_interpreter_deprecation():
    """Hides tf.lite.Interpreter's deprecation notice, a multi-line UserWarning about a package
    bert_tf cannot use (TensorFlow Text's LiteRT kernels are built against tf.lite)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"\s*Warning: tf.lite.Interpreter is deprecated",
                                UserWarning)
        yield


def interpreter(model, num_threads=2):
    """A LiteRT interpreter with TensorFlow Text's kernels and the XNNPACK delegate.

    Uses TensorFlow's own LiteRT runtime (tf.lite; TensorFlow Text's kernel registrar is built
    against it).

    Args:
      model: .tflite bytes or path.
      num_threads: CPU threads for XNNPACK and the builtin kernels.
    """
    from tensorflow.lite.python import interpreter as litert_interpreter

    kwargs = ({"model_content": model} if isinstance(model, bytes)
              else {"model_path": os.fspath(model)})
    with _no_interpreter_deprecation():
        return litert_interpreter.InterpreterWithCustomOps(
            custom_op_registerers=list(tf_text.tflite_registrar.SELECT_TFTEXT_OPS),
            num_threads=num_threads, **kwargs)


def run_signature(runner, inputs):
    """Calls a signature runner with numpy-converted inputs (strings as object arrays)."""
    arrays = {}
    for name, value in inputs.items():
        value = np.asarray(value)
        if value.dtype.kind in "US":
            value = value.astype(object)
        elif value.dtype.kind == "i":
            value = value.astype(np.int32)
        arrays[name] = value
    return runner(**arrays)
