"""Quantization modes of the LiteRT export, calibration data, and accuracy against float32.

Modes (`--quantize`):

  none          float32 weights and arithmetic.
  float16       float16 weights (half the file), dequantized to float32 when loaded.
  dynamic_int8  int8 weights; activations quantized per call, so the matrix products of
                FULLY_CONNECTED layers run in int8 (XNNPACK's dynamically quantized kernels).
  full_int8     int8 weights and activations with ranges calibrated on the user's texts
                (--calibration_file); LayerNorm, softmax and GELU in int8 as well.
  int8          the fastest int8 mode that stays within the accuracy target; chosen by
                measuring both (see `INT8_CHOICE`).

`calibration_rows(path)` reads texts from a plain text file (one text per line), a .tsv/.csv
with a header (the `sentence`, `text`, `text_a` or `question` column, and `text_b`/
`sentence2`/`text_pair` when present) or a .jsonl file with those keys.
"""

import csv
import io
import dataclasses
import json
import os

import numpy as np

from bert_tf import fileio
from bert_tf.data.tasks.classifier_data import split_label_cell

MODES = ("none", "float16", "dynamic_int8", "full_int8", "int8")
# Measured (benchmarks/results/2026-11-28-cpu2-epyc-zen5-litert-full-int8.json: the fine-tuned
# all-MiniLM-L6-v2 SST-2-like classifier on a 2-core AMD EPYC): both agree with float32 on 499
# or 500 of the 500 dev phrases; dynamic_int8 is ~3x faster (p50 0.55 against 1.56 ms on short
# phrases, 2.9 against 13.1 ms on passages).
INT8_CHOICE = "dynamic_int8"
CALIBRATION_ROWS = 200  # full_int8 calibrates on at most this many texts.
TEXT_COLUMNS = ("sentence", "text", "text_a", "sentence1", "question")
PAIR_COLUMNS = ("text_b", "sentence2", "text_pair", "context")


class CalibrationError(ValueError):
    """A calibration or evaluation file without usable rows (the message names it)."""


def check_mode(mode):
    """Raises ValueError naming the modes when `mode` is not one of `MODES`."""
    if mode not in MODES:
        raise ValueError(f"--quantize={mode}: unknown quantization mode; choose one of "
                         f"{', '.join(MODES)}.")


def resolve_mode(mode):
    """The concrete mode a mode name converts with (`int8` -> `INT8_CHOICE`)."""
    check_mode(mode)
    return INT8_CHOICE if mode == "int8" else mode


def _row_texts(row, path, where):
    text = next((row[c] for c in TEXT_COLUMNS if c in row and row[c] is not None), None)
    if text is None:
        raise CalibrationError(f"{path}: {where} has none of the text columns "
                               f"{', '.join(TEXT_COLUMNS)}.")
    pair = next((row[c] for c in PAIR_COLUMNS if c in row and row[c] is not None), None)
    return str(text), (None if pair is None else str(pair))


def read_rows(path, flag="--calibration_file", label_column="label"):
    """Reads texts (and labels, when the file has them) from a text, TSV/CSV or JSONL file.

    Args:
      path: the file. Lines of a .txt file are texts; .tsv/.csv files need a header row; .jsonl
        lines are objects. Empty texts are skipped.
      flag: the flag named in errors.
      label_column: the column (key) holding the label, if any.

    Returns:
      list of (text, text_pair or None, label or None): a label is a str, or a tuple of str
      for a JSON list (a multi-label row's names).

    Raises:
      CalibrationError: the file is missing, or holds no usable row.
    """
    problem = fileio.not_a_file(path, f"{flag}={path}")
    if problem:
        raise CalibrationError(problem)
    extension = os.path.splitext(path)[1].lower()
    rows = []
    try:
        text = fileio.read_utf8(path)
    except fileio.NotUtf8Error as e:
        raise CalibrationError(f"{flag}={path}:{e.line} is not UTF-8 text (byte "
                               f"0x{e.byte:02x}); expected texts, one per line, or a "
                               ".tsv/.csv/.jsonl of them (is it a binary file?)") from None
    with io.StringIO(text, newline=None) as f:
        if extension in (".tsv", ".csv"):
            reader = csv.DictReader(f, delimiter="\t" if extension == ".tsv" else ",")
            for number, row in enumerate(reader, start=2):
                text, pair = _row_texts(row, f"{flag}={path}", f"line {number}")
                rows.append((text, pair, row.get(label_column)))
        elif extension in (".jsonl", ".json"):
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CalibrationError(f"{flag}={path}: line {number} is not JSON "
                                           f"({e.msg}).") from None
                if not isinstance(row, dict):
                    raise CalibrationError(f"{flag}={path}: line {number} is not a JSON "
                                           "object.")
                text, pair = _row_texts(row, f"{flag}={path}", f"line {number}")
                label = row.get(label_column)
                # A list is a multi-label row's set of names; compare() reads it so.
                rows.append((text, pair, None if label is None else
                             tuple(map(str, label)) if isinstance(label, list) else str(label)))
        else:
            rows = [(line.rstrip("\n"), None, None) for line in f]
    rows = [r for r in rows if r[0].strip()]
    if not rows:
        raise CalibrationError(f"{flag}={path}: no usable rows (expected non-empty texts: one "
                               "per line, or a .tsv/.csv/.jsonl with a "
                               f"{'/'.join(TEXT_COLUMNS)} column).")
    return rows


def calibration_rows(path):
    """The (text, text_pair) pairs full_int8 calibrates on: at most `CALIBRATION_ROWS`."""
    return [(t, p) for t, p, _ in read_rows(path)[:CALIBRATION_ROWS]]


def converter_options(mode, plan, calibration):
    """A function setting `mode`'s options on a tf.lite.TFLiteConverter, or None (float32).

    Args:
      mode: one of `MODES`.
      plan: the `bert_tf.serving.litert.LiteRTPlan` being converted.
      calibration: (text, text_pair) rows, needed by full_int8.

    Raises:
      CalibrationError: full_int8 without calibration rows.
    """
    import tensorflow as tf

    mode = resolve_mode(mode)
    if mode == "none":
        return None
    if mode == "float16":
        def float16(converter):
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.target_spec.supported_types = [tf.float16]
        return float16
    if mode == "dynamic_int8":
        def dynamic(converter):
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        return dynamic
    if not calibration:
        raise CalibrationError("--quantize=full_int8 needs --calibration_file (texts from the "
                               "task's data to calibrate activation ranges on).")
    dataset = _representative_dataset(plan, calibration)

    def full(converter):
        import tensorflow_text as tf_text

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = dataset
        # Calibration runs the model, tokenizer included: it needs TF Text's kernels.
        converter.target_spec._experimental_custom_op_registerers = list(  # noqa: SLF001
            tf_text.tflite_registrar.SELECT_TFTEXT_OPS)
    return full


def _representative_dataset(plan, calibration):
    """Calibration inputs of every signature: the id signature gets the rows tokenized and
    packed in Python; serve_text gets the texts."""
    from bert_tf.text.input_packing import pack_inputs

    task = plan.task
    tokenizer = task.tokenizer

    def ids_of(text, pair):
        ids_a = tokenizer_encode(tokenizer, text)
        ids_b = tokenizer_encode(tokenizer, pair) if pair else None
        if ids_b is not None and plan.text_pair:
            packed = pack_inputs(ids_a, ids_b, max_seq_length=plan.max_seq_length,
                                 cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                                 pad_id=tokenizer.pad_id)
        else:
            packed = pack_inputs(ids_a, max_seq_length=plan.max_seq_length,
                                 cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                                 pad_id=tokenizer.pad_id)
        return {k: np.array([v], np.int32) for k, v in packed.items()}

    def dataset():
        for text, pair in calibration:
            if "serving_default" in plan.signatures:
                yield "serving_default", ids_of(text, pair)
            if "serve_text" in plan.signatures:
                inputs = {"text": np.array([text.encode("utf-8")], dtype=object)}
                if plan.text_pair:
                    inputs["text_pair"] = np.array([(pair or "").encode("utf-8")], dtype=object)
                yield "serve_text", inputs
    return dataset


def tokenizer_encode(tokenizer_layer, text):
    """Python ids of `text` with the layer's WordPiece vocabulary or SentencePiece model and
    casing (cached tokenizer)."""
    from bert_tf.text.sentencepiece import SentencePieceTokenizer
    from bert_tf.text.tokenization import WordpieceTokenizer

    python = getattr(tokenizer_layer, "_bert_tf_python_tokenizer", None)
    if python is None:
        if tokenizer_layer.kind == "SentencePiece":
            python = SentencePieceTokenizer(tokenizer_layer.model_proto,
                                            do_lower_case=tokenizer_layer.do_lower_case)
        else:
            python = WordpieceTokenizer(tokenizer_layer.vocabulary,
                                        do_lower_case=tokenizer_layer.do_lower_case,
                                        max_input_chars_per_word=tokenizer_layer
                                        .max_input_chars_per_word,
                                        unk_token=tokenizer_layer.unk_token)
        tokenizer_layer._bert_tf_python_tokenizer = python
    return python.encode(text)


@dataclasses.dataclass
class AccuracyReport:
    """A quantized model against the float32 one on the same texts.

    Attributes:
      mode: the quantization mode.
      rows: texts compared.
      agreement: fraction of texts with the same predicted label (classification; the same
        set of labels for multi-label), or None.
      max_abs_diff: the largest difference of any output value (probabilities, scores or
        embeddings).
      metric: {"name": value} of the quantized and float models on labelled rows (accuracy;
        multi-label: micro F1 and exact match), or None without labels.
      sizes: file sizes in bytes, {"float32": ..., mode: ...}.
    """

    mode: str
    rows: int
    agreement: float
    max_abs_diff: float
    metric: dict
    sizes: dict

    def format(self):
        lines = [f"{self.mode}: {self.rows} texts"]
        if self.agreement is not None:
            lines.append(f"  label agreement with float32: {self.agreement:.4f}")
        lines.append(f"  largest output difference: {self.max_abs_diff:.4g}")
        if self.metric:
            lines.append("  " + ", ".join(f"{k} {v:.4f}" for k, v in self.metric.items()))
        float_size = self.sizes.get("float32")
        for name, size in self.sizes.items():
            ratio = f" ({size / float_size:.0%} of float32)" if float_size and name != "float32" \
                else ""
            lines.append(f"  {name} file: {size / 1e6:.2f} MB{ratio}")
        return "\n".join(lines)


def label_sets(rows, labels, separator=",", where="--eval_file"):
    """Multi-hot [N, C] bool of the rows' label sets over `labels` (a label cell's names joined
    by `separator`, or a JSON list of them; an empty cell: none applies), or None when a row
    has no label cell.

    Raises:
      CalibrationError: a row names a label the model does not have (`where` names the file).
    """
    if not labels or any(r[2] is None for r in rows):
        return None
    index = {name: i for i, name in enumerate(labels)}
    gold = np.zeros((len(rows), len(labels)), bool)
    for n, (_, _, label) in enumerate(rows):
        names = label if isinstance(label, tuple) else split_label_cell(label, separator)
        for name in filter(None, (name.strip() for name in names)):
            if name not in index:
                raise CalibrationError(
                    f"{where}: row {n + 1} names label {name!r}, not one of the model's "
                    f"{', '.join(labels)} (names joined by {separator!r}: the run's "
                    "--label_separator as its task_info.json records it, else ','; a .jsonl "
                    "row may list the names instead)")
            gold[n, index[name]] = True
    return gold


def compare(float_model, quantized_model, mode, rows, labels=None, num_threads=2,
            label_separator=","):
    """Runs both .tflite models' serve_text on `rows` and compares their answers.

    Args:
      float_model, quantized_model: .tflite bytes.
      mode: the quantized model's mode (for the report).
      rows: (text, text_pair or None, label or None) tuples.
      labels: the classifier's class names, to score labelled rows.
      label_separator: what joins a multi-label row's names in a label cell (a tuple label
        is the names already).

    Returns:
      `AccuracyReport`.
    """
    from bert_tf.serving import litert

    answers = []
    for content in (float_model, quantized_model):
        runner = litert.interpreter(content, num_threads=num_threads).get_signature_runner(
            litert.TEXT_SIGNATURE)
        takes_pair = "text_pair" in runner.get_input_details()
        outputs = []
        for text, pair, _ in rows:
            inputs = {"text": [text]}
            if takes_pair:
                inputs["text_pair"] = [pair or ""]
            outputs.append(litert.run_signature(runner, inputs))
        answers.append(outputs)
    value_key = next(k for k in ("probabilities", "score", "mean_pooled_output")
                     if k in answers[0][0])
    max_diff = max(float(np.max(np.abs(a[value_key] - b[value_key])))
                   for a, b in zip(*answers))
    agreement, metric = None, None
    if "predicted" in answers[0][0]:
        # Multi-label: the same set of labels predicted, and each model's micro F1 and exact
        # match against the rows' label sets.
        predicted = [[tuple(np.asarray(o["predicted"][0]).tolist()) for o in run]
                     for run in answers]
        agreement = float(np.mean([a == b for a, b in zip(*predicted)]))
        gold = label_sets(rows, labels, label_separator)
        if gold is not None:
            from bert_tf.metrics import multi_label_metrics

            metric = {}
            for k, name in ((0, "float32"), (1, mode)):
                scores = multi_label_metrics(gold, np.array(predicted[k], bool))
                metric[f"{name} micro_f1"] = scores["micro_f1"]
                metric[f"{name} exact_match"] = scores["exact_match"]
    elif value_key == "probabilities":
        predicted = [[int(np.argmax(o["probabilities"][0])) for o in run] for run in answers]
        agreement = float(np.mean([a == b for a, b in zip(*predicted)]))
        gold = [r[2] for r in rows]
        if labels and all(g is not None for g in gold):
            index = {name: i for i, name in enumerate(labels)}
            known = [(i, index[g]) for i, g in enumerate(gold) if g in index]
            if known:
                metric = {f"{name} accuracy": float(np.mean([predicted[k][i] == g
                                                             for i, g in known]))
                          for k, name in ((0, "float32"), (1, mode))}
    return AccuracyReport(mode=mode, rows=len(rows), agreement=agreement,
                          max_abs_diff=max_diff, metric=metric,
                          sizes={"float32": len(float_model), mode: len(quantized_model)})
