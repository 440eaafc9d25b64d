"""The LiteRT export: plan, convert (float32 or quantized), compare with float32, write.

`export_litert(model, "DIR", vocab_file=..., quantize="int8", eval_file="dev.tsv")` writes
DIR/model.tflite and bert_tf_litert.json; `bert-tf-export --format=litert` runs it. A quantized
export is converted twice, float32 and quantized; both answer the same texts (the eval_file's,
else the calibration_file's) and the report gives their label agreement, the largest
difference of any output, the accuracy of both on labelled rows, and the file sizes. Only the
quantized model is written.

This module orchestrates bert_tf.serving.litert (the graph and the converter) and
bert_tf.serving.quantization (modes, calibration, comparison); neither imports it.
"""

import dataclasses

from bert_tf import fileio
from bert_tf.serving import litert, quantization

COMPARE_ROWS = 500  # Texts compared when no eval_file limits them.
AGREEMENT_TARGET = 0.99


@dataclasses.dataclass
class ExportResult:
    """What `export_litert` wrote and measured."""

    path: str
    mode: str
    size: int
    census: litert.OpCensus
    report: quantization.AccuracyReport = None

    def format(self):
        lines = [f"{self.path} ({self.mode}, {self.size / 1e6:.2f} MB, "
                 f"{sum(self.census.counts.values())} ops, none needing Flex)"]
        if self.report is not None:
            lines.append(self.report.format())
            if self.report.agreement is not None and self.report.agreement < AGREEMENT_TARGET:
                lines.append(f"  WARNING: label agreement {self.report.agreement:.4f} is below "
                             f"{AGREEMENT_TARGET}; consider --quantize=dynamic_int8 or none.")
        return "\n".join(lines)


def export_litert(model, export_dir, *, quantize="none", calibration_file=None, eval_file=None,
                  label_separator=",", label_column="label", overwrite=False,
                  expected=fileio.NOT_CHECKED, **options):
    """Writes `model` as EXPORT_DIR/model.tflite with id and raw-text signatures.

    Args:
      model: a BertClassifier or BertEncoder (ids and text), or a BertSpanLabeler,
        BertTokenClassifier or BertPretrainer (ids only).
      export_dir: the directory for model.tflite and bert_tf_litert.json.
      quantize: none, float16, dynamic_int8, full_int8 or int8 (the fastest int8 mode within
        the accuracy target; see bert_tf.serving.quantization).
      calibration_file: texts for full_int8's calibration (and for the comparison when there
        is no eval_file): one text per line, or .tsv/.csv/.jsonl with a sentence/text column.
      eval_file: labelled rows to compare on (the accuracy of both models; multi-label: their
        micro F1 and exact match).
      label_separator: what joins a multi-label row's names in eval_file's label cells (the
        run's --label_separator).
      label_column: eval_file's column (JSONL key) of the labels.
      overwrite: replace an earlier LiteRT export in export_dir.
      expected: fileio.state(export_dir) when the caller checked it (default: taken here,
        before the conversion): the final move refuses when export_dir no longer holds that.
      **options: `litert.plan_litert` arguments: vocab_file or tokenizer, do_lower_case,
        max_seq_length, labels, signatures ("ids" and/or "text"), text_pair, length_buckets
        (as bert_tf.serving.export).

    Returns:
      `ExportResult`.

    Raises:
      ValueError: (naming the flag) an unknown mode, a file without usable rows, a head LiteRT
        cannot express, ops that need Flex. Nothing is written then.
      FileExistsError: export_dir holds anything but a LiteRT export, or one and not
        overwrite.
      fileio.TargetChangedError: export_dir appeared or changed during the export.
    """
    mode = quantization.resolve_mode(quantize)
    litert.check_target(export_dir, overwrite)
    if expected is fileio.NOT_CHECKED:
        expected = fileio.state(export_dir)
    else:
        fileio.check_unchanged(export_dir, expected)
    calibration = quantization.calibration_rows(calibration_file) if calibration_file else None
    eval_rows = (quantization.read_rows(eval_file, flag="--eval_file", label_column=label_column)
                 if eval_file else None)
    if eval_rows and all(label is None for _, _, label in eval_rows):
        # Else the report would quietly compare the two models' answers only.
        raise quantization.CalibrationError(
            f"--eval_file={eval_file}: no row has a {label_column!r} label; name the label "
            "column with --label_column (texts without labels go in --calibration_file, "
            "which the report compares on)")
    plan = litert.plan_litert(model, **options)
    labels = getattr(plan.task, "labels", None)
    compares = mode != "none" and litert.TEXT_SIGNATURE in plan.signatures
    if compares and eval_rows and plan.task.name == "multi_label":
        # Before the conversions: a label the model lacks (a wrong separator) fails at once.
        quantization.label_sets(eval_rows, labels, label_separator,
                                where=f"--eval_file={eval_file}")
    content, census = litert.convert(
        plan, quantization.converter_options(mode, plan, calibration))
    report = None
    rows = eval_rows or ([(t, p, None) for t, p in calibration[:COMPARE_ROWS]]
                         if calibration else None)
    if compares and rows:
        float_content, _ = litert.convert(plan)
        report = quantization.compare(float_content, content, mode, rows, labels=labels,
                                      label_separator=label_separator)
    info = dict(plan.info(), quantize=quantize, mode=mode)
    if report is not None:
        info["accuracy_vs_float32"] = {"rows": report.rows, "agreement": report.agreement,
                                       "max_abs_diff": report.max_abs_diff,
                                       "metric": report.metric, "sizes": report.sizes}
    path = litert.write_model(content, export_dir, info, overwrite=overwrite, expected=expected)
    return ExportResult(path=path, mode=mode, size=len(content), census=census, report=report)
