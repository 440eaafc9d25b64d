r"""Exports a trained BERT model as a SavedModel for TF Serving, or checks an export's ops.

Export (the settings the run recorded are used unless a flag overrides them):
  bert-tf-export --model_dir=RUN_DIR --export_dir=EXPORT/1
  bert-tf-export --model_dir=RUN_DIR/encoder.keras --export_dir=EMB/1 \
      --signatures=ids,text --max_seq_length=64

--model_dir is a run's output directory (fine-tuning: model.keras + task_info.json;
pre-training: pretrainer.keras, exported for fill-mask) or a .keras file (encoder.keras gives
sentence embeddings). The text signatures tokenize with the vocab.txt beside the model, or its
tokenizer.json (a byte-level BPE run, e.g. a fine-tuned ModernBERT).
Signatures: ids (serving_default), text (serve_text), examples
(serve_examples); see bert_tf.serving.

A flag left unset takes the value the run recorded, else: --max_seq_length=128,
--do_lower_case=true, --text_pair=true, --max_query_length=64, --max_answer_length=30,
--doc_stride=128 (or the context tokens a window holds, if fewer), --noversion_2_with_negative,
--null_score_diff_threshold=0, and --length_buckets at multiples of 4 to 16, of 8 to 64, then
steps of 1/8 (80, 96, 112, 128, 160, ...) below --max_seq_length, then it (an empty value runs
every request at --max_seq_length).

A LiteRT model (DIR/model.tflite, raw text and ids in, float or int8; see
bert_tf.serving.litert and docs/serving.md), with its accuracy against float32 reported:
  bert-tf-export --model_dir=RUN_DIR --export_dir=DIR --format=litert --quantize=int8 \
      --calibration_file=train.tsv --eval_file=dev.tsv

Check that the TF Serving model server has every op of an export (exit status 1 if not):
  bert-tf-export --check EXPORT/1
"""

import os
import sys

from absl import app, flags, logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf import serving
from bert_tf.cli import outputs

FLAGS = flags.FLAGS

def define_flags(flag_values=FLAGS):
    """The run to export, the signatures, and overrides of the settings it recorded."""
    return cli_flags.define_export_flags(flag_values)


def _first_set(*values):
    return next((v for v in values if v is not None), None)


def check(export_dir):
    # This tool has imported only TensorFlow so far, so its own op registry is the reference.
    report = serving.check_ops(export_dir, serving.server_op_allowlist(in_this_process=True))
    print(f"SavedModel {export_dir}")
    print(report.format())
    return 0 if report.ok else 1


def check_export_dir(model_dir, export_dir, overwrite, vocab_file=None, litert=False):
    """The output rule (bert_tf.cli.outputs) for --export_dir, before the model is loaded.

    A SavedModel export replaces the directory (only an export, with --overwrite); a LiteRT
    export writes model.tflite and its info file into it (never into a training run's)."""
    try:
        outputs.check_dir_clear_of_inputs("--export_dir", export_dir,
                                          {"--model_dir": model_dir, "--vocab_file": vocab_file})
        if litert:
            outputs.check_not_a_run("--export_dir", export_dir)
        else:
            outputs.check_replaceable("--export_dir", export_dir, "a SavedModel export",
                                      overwrite, outputs.is_export_dir)
        outputs.check_writable_dir("--export_dir", export_dir)
    except outputs.OutputError as e:
        raise app.UsageError(str(e)) from None


def export():
    litert = FLAGS.format == "litert"
    if litert:
        _check_litert_flags()
    elif FLAGS.quantize != "none" or FLAGS.calibration_file or FLAGS.eval_file:
        raise app.UsageError("--quantize, --calibration_file and --eval_file apply to "
                             "--format=litert only.")
    check_export_dir(FLAGS.model_dir, FLAGS.export_dir, FLAGS.overwrite, FLAGS.vocab_file,
                     litert=litert)
    source = serving.load_model_dir(FLAGS.model_dir)
    info = source.task_info
    task = serving.task_name_of(source.model)
    vocab_file = FLAGS.vocab_file or source.vocab_file
    wants_text = bool({"text", "examples"} & set(FLAGS.signatures))
    if wants_text and vocab_file is None:
        raise app.UsageError(f"--model_dir={FLAGS.model_dir} has no vocab.txt or tokenizer.json "
                             "beside the model; pass --vocab_file (or --signatures=ids).")
    do_lower_case = _first_set(FLAGS.do_lower_case, source.do_lower_case)
    tokenizer = None
    if wants_text and vocab_file.endswith(".json"):
        # A tokenizer.json (a fine-tuned ModernBERT's byte-level BPE) records its casing: the
        # run's (or --do_lower_case) must agree with it.
        from bert_tf.text import load_tokenizer

        try:
            tokenizer = load_tokenizer(vocab_file, do_lower_case)
        except (OSError, ValueError) as e:
            raise app.UsageError(f"--vocab_file={vocab_file}: {e}") from None
    elif do_lower_case is None:
        do_lower_case = True
        if wants_text:
            logging.warning("The run does not record its casing; tokenizing with "
                            "--do_lower_case=true. Pass --do_lower_case to be sure.")
    text_pair = _first_set(FLAGS.text_pair, info and info.text_pair, True)
    options = dict(
        vocab_file=vocab_file if wants_text and tokenizer is None else None,
        tokenizer=tokenizer, do_lower_case=do_lower_case,
        max_seq_length=_first_set(FLAGS.max_seq_length, source.max_seq_length, 128),
        labels=FLAGS.labels or (list(info.labels) if info and info.labels else None),
        signatures=tuple(FLAGS.signatures), overwrite=FLAGS.overwrite)
    if FLAGS.length_buckets is not None:
        lengths = [b.strip() for b in FLAGS.length_buckets.split(",") if b.strip()]
        try:
            options["length_buckets"] = [int(b) for b in lengths]
        except ValueError:
            raise app.UsageError(f"--length_buckets={','.join(lengths)}: expected "
                                 "comma-separated integers, e.g. 16,32,64.") from None
    if task in ("classification", "regression"):
        options["text_pair"] = text_pair
        if wants_text and FLAGS.text_pair is None and not (info and info.text_pair is not None):
            logging.info("serve_text takes text and text_pair (an empty text_pair means a "
                         "single sentence); pass --notext_pair for text alone.")
    elif task == "squad":
        options.update(
            max_query_length=_first_set(FLAGS.max_query_length, info and info.max_query_length),
            max_answer_length=_first_set(FLAGS.max_answer_length,
                                         info and info.max_answer_length, 30),
            doc_stride=_first_set(FLAGS.doc_stride, info and info.doc_stride),
            version_2_with_negative=_first_set(FLAGS.version_2_with_negative,
                                               info and info.version_2_with_negative, False),
            null_score_diff_threshold=FLAGS.null_score_diff_threshold)
    elif task == "fill_mask":
        options["top_k"] = FLAGS.top_k
    if litert:
        return _export_litert(source, task, options)
    if not os.path.basename(os.path.normpath(FLAGS.export_dir)).isdigit():
        logging.warning("--export_dir=%s: TF Serving loads numbered version directories under "
                        "--model_base_path, e.g. EXPORT/1.", FLAGS.export_dir)
    try:
        export_dir = serving.export(source.model, FLAGS.export_dir, **options)
    except (ValueError, FileExistsError) as e:
        raise app.UsageError(str(e)) from e
    logging.info("Exported the %s model of %s to %s (signatures: %s).", task, source.model_file,
                 export_dir, ", ".join(serving.SIGNATURE_KEYS[s] for s in FLAGS.signatures))
    print(export_dir)
    return 0


def _check_litert_flags():
    """Bad LiteRT flags fail before the model is loaded."""
    from bert_tf.serving import quantization

    try:
        quantization.check_mode(FLAGS.quantize)
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    for flag in ("calibration_file", "eval_file"):
        path = getattr(FLAGS, flag)
        if path and not os.path.isfile(path):
            raise app.UsageError(f"--{flag}={path}: no such file.")
    if FLAGS.quantize == "full_int8" and not FLAGS.calibration_file:
        raise app.UsageError("--quantize=full_int8 needs --calibration_file (texts from the "
                             "task's data to calibrate activation ranges on).")


def _export_litert(source, task, options):
    from bert_tf.serving import litert_export

    signatures = [s for s in FLAGS.signatures if s != "examples"]
    if "examples" in FLAGS.signatures and FLAGS["signatures"].present:
        signatures = list(FLAGS.signatures)  # Named explicitly: let the export refuse it.
    options = dict(options, signatures=tuple(signatures))
    options.pop("top_k", None)
    for name in ("max_query_length", "max_answer_length", "doc_stride",
                 "version_2_with_negative", "null_score_diff_threshold"):
        options.pop(name, None)
    try:
        result = litert_export.export_litert(
            source.model, FLAGS.export_dir, quantize=FLAGS.quantize,
            calibration_file=FLAGS.calibration_file, eval_file=FLAGS.eval_file, **options)
    except (ValueError, FileExistsError) as e:
        raise app.UsageError(str(e)) from e
    logging.info("Exported the %s model of %s to %s.", task, source.model_file, result.path)
    print(result.format())
    return 0


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.check:
        try:
            return check(FLAGS.check)
        except FileNotFoundError as e:  # not a SavedModel: one line, not a traceback
            print(f"export_saved_model: error: --check={FLAGS.check}: {e}", file=sys.stderr)
            return 1
    if not FLAGS.model_dir or not FLAGS.export_dir:
        raise app.UsageError("Pass --model_dir and --export_dir (or --check EXPORT_DIR).")
    return export()


def run():
    """Console-script entry point (bert-tf-export)."""
    cli.run(main, define_flags=define_flags)


if __name__ == "__main__":
    run()
