"""The LiteRT export as `bert-tf-export --format=litert` runs it: convert, compare, report.

A quantized export is converted twice, float32 and quantized; both answer the same texts (the
--eval_file's, else the --calibration_file's) and the report gives their label agreement, the
largest difference of any output, the accuracy of both on labelled rows, and the file sizes.
Only the quantized model is written.
"""

import dataclasses

from bert_tf.serving import litert, quantization

COMPARE_ROWS = 500  # Texts compared when no --eval_file limits them.
AGREEMENT_TARGET = 0.99


@dataclasses.dataclass
class ExportResult:
    """What `export_with_report` wrote and measured."""

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


def export_with_report(model, export_dir, *, quantize="none", calibration_file=None,
                       eval_file=None, overwrite=False, **options):
    """Exports `model` to EXPORT_DIR/model.tflite and measures it against float32.

    Args:
      model: the Keras model.
      export_dir: the directory for model.tflite.
      quantize: a mode of bert_tf.serving.quantization.MODES.
      calibration_file: texts for full_int8's calibration (and for the comparison when there
        is no eval_file).
      eval_file: labelled rows to compare on (accuracy of both models).
      overwrite: replace an existing model.tflite.
      **options: `bert_tf.serving.litert.plan_litert` arguments.

    Returns:
      `ExportResult`.

    Raises:
      ValueError: (naming the flag) an unknown mode, a file without usable rows, a head LiteRT
        cannot express, ops that need Flex. Nothing is written then.
    """
    mode = quantization.resolve_mode(quantize)
    litert.check_target(export_dir, overwrite)
    calibration = quantization.calibration_rows(calibration_file) if calibration_file else None
    eval_rows = (quantization.read_rows(eval_file, flag="--eval_file") if eval_file
                 else None)
    plan = litert.plan_litert(model, **options)
    content, census = litert.convert(
        plan, quantization.converter_options(mode, plan, calibration))
    report = None
    rows = eval_rows or ([(t, p, None) for t, p in calibration[:COMPARE_ROWS]]
                         if calibration else None)
    if mode != "none" and rows and litert.TEXT_SIGNATURE in plan.signatures:
        float_content, _ = litert.convert(plan)
        report = quantization.compare(float_content, content, mode, rows,
                                      labels=getattr(plan.task, "labels", None))
    info = dict(plan.info(), quantize=quantize, mode=mode)
    if report is not None:
        info["accuracy_vs_float32"] = {"rows": report.rows, "agreement": report.agreement,
                                       "max_abs_diff": report.max_abs_diff,
                                       "metric": report.metric, "sizes": report.sizes}
    path = litert.write_model(content, export_dir, info, overwrite=overwrite)
    return ExportResult(path=path, mode=mode, size=len(content), census=census, report=report)
