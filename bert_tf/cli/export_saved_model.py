r"""Exports a trained BERT model as a SavedModel for TF Serving, or checks an export's ops.

Export (the settings the run recorded are used unless a flag overrides them):
  bert-tf-export --model_dir=RUN_DIR --export_dir=EXPORT/1
  bert-tf-export --model_dir=RUN_DIR/encoder.keras --export_dir=EMB/1 \
      --signatures=ids,text --max_seq_length=64

--model_dir is a run's output directory (fine-tuning: model.keras + task_info.json;
pre-training: pretrainer.keras, exported for fill-mask) or a .keras file (encoder.keras gives
sentence embeddings), or a Hugging Face directory of a model fine-tuned with transformers
(its head and id2label; casing and length from its tokenizer_config.json). The text signatures
tokenize with the vocab.txt beside the model, or its tokenizer.json (a byte-level BPE run, e.g.
a fine-tuned ModernBERT).
Signatures: ids (serving_default), text (serve_text), examples
(serve_examples); see bert_tf.serving.

A flag left unset takes the value the run recorded (--max_seq_length, else the one of a
sentence_bert_config.json beside the model: a converted sentence-transformers model's), else:
--max_seq_length=128, --do_lower_case=true, --text_pair=true, --max_query_length=64,
--max_answer_length=30, --doc_stride=128 (or the context tokens a window holds, if fewer),
--noversion_2_with_negative, --null_score_diff_threshold=0, --multi_label_threshold=0.5, and
--length_buckets at multiples of 4 to 16, of 8 to 64, then steps of 1/8 (80, 96, 112, 128,
160, ...) below --max_seq_length, then it (an empty value runs every request at
--max_seq_length).

A LiteRT model (DIR/model.tflite, raw text and ids in, float or int8; see
bert_tf.serving.litert and docs/serving.md), with its accuracy against float32 reported:
  bert-tf-export --model_dir=RUN_DIR --export_dir=DIR --format=litert --quantize=int8 \
      --calibration_file=train.tsv --eval_file=dev.tsv

Check that the TF Serving model server has every op of an export (exit status 1 if not):
  bert-tf-export --check EXPORT/1
"""

import sys

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS
PROGRAM = "export_saved_model"


def define_flags(flag_values=FLAGS):
    """The run to export, the signatures, and overrides of the settings it recorded."""
    return cli_flags.define_export_flags(flag_values)


def export_config(flag_values=FLAGS):
    """The ExportConfig of the parsed flags; --signatures left unset is None (the format's
    defaults)."""
    from bert_tf.jobs.export import ExportConfig

    return cli_flags.to_config(ExportConfig, flag_values, unset=("signatures",))


def check_export_dir(config):
    """The output rule (bert_tf.cli.outputs) for --export_dir, before the model is loaded:
    new, empty, or (with --overwrite) an export of the same format and nothing else; never
    a directory holding --model_dir or --vocab_file, nor a model directory of another kind."""
    from bert_tf import model_directory
    from bert_tf.jobs.flag_checks import FlagValueError

    export_dir = config.export_dir
    try:
        outputs.check_dir_clear_of_inputs("--export_dir", export_dir,
                                          {"--model_dir": config.model_dir,
                                           "--vocab_file": config.vocab_file})
        outputs.check_replaceable(
            "--export_dir", export_dir,
            model_directory.LITERT if config.litert else model_directory.SAVED_MODEL,
            config.overwrite)
        outputs.check_writable_dir("--export_dir", export_dir)
    except outputs.OutputError as e:
        raise FlagValueError(str(e)) from None


def main(argv):
    from bert_tf.jobs import export

    del argv
    config = export_config()
    if config.check:
        try:
            report = export.check(config.check)
        except FileNotFoundError as e:  # not a SavedModel: one line, not a traceback
            print(f"{PROGRAM}: error: --check={config.check}: {e}", file=sys.stderr)
            return 1
        print(f"SavedModel {config.check}")
        print(report.format())
        return 0 if report.ok else 1
    config.validate()
    check_export_dir(config)
    print(export.export(config))
    return 0


def _errors():
    # Imported when the command runs: --help loads no TensorFlow.
    from bert_tf.jobs.flag_checks import FlagValueError

    return (FlagValueError,)


def run():
    """Console-script entry point (bert-tf-export)."""
    cli.run(main, PROGRAM, define_flags=define_flags, errors=_errors)


if __name__ == "__main__":
    run()
