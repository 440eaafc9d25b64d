"""The export job: a run's model as a SavedModel for TF Serving or a LiteRT model, or a check of
an export's ops.

`export(ExportConfig(model_dir=..., export_dir=...))` is what `bert-tf-export`
(bert_tf.cli.export_saved_model) runs; `check(export_dir)` is its --check. A setting left None
takes the value the run recorded (task_info.json, run_pretraining.flags), else the default the
command's help gives.
"""

import dataclasses
import os

from absl import logging

from bert_tf import fileio, model_directory, run_directory, serving
from bert_tf.jobs import flag_checks
from bert_tf.jobs.finetuning_config import RUN_DEFAULTS
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.tokenizer_setup import check_tokenizer_matches

# What bert-tf-export writes when --signatures is not given; a LiteRT model has no tf.Example
# signature.
DEFAULT_SIGNATURES = ("ids", "text", "examples")
_LITERT_DEFAULT_SIGNATURES = ("ids", "text")
_SQUAD_SETTINGS = ("max_query_length", "max_answer_length", "doc_stride",
                   "version_2_with_negative", "null_score_diff_threshold")


@dataclasses.dataclass
class ExportConfig:
    """What an export is told; field names are the flags' (`bert-tf-export --help`).

    None means "not given": the run's recorded value, else the documented default. signatures
    None: ids, text and examples (LiteRT: ids and text).
    """

    model_dir: str | None = None
    export_dir: str | None = None
    max_seq_length: int | None = None
    length_buckets: str | None = None
    signatures: list | None = None
    labels: list | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    text_pair: bool | None = None
    top_k: int = 5
    overwrite: bool = False
    check: str | None = None
    format: str = "saved_model"
    quantize: str = "none"
    calibration_file: str | None = None
    eval_file: str | None = None
    label_column: str | None = None
    max_query_length: int | None = None
    max_answer_length: int | None = None
    doc_stride: int | None = None
    version_2_with_negative: bool | None = None
    null_score_diff_threshold: float | None = None
    multi_label_threshold: float | None = None

    @property
    def litert(self):
        return self.format == "litert"

    def validate(self):
        """Checks what needs no model loaded (nor TensorFlow): the directories given, that
        --model_dir holds one model, the LiteRT settings. Raises FlagValueError naming the
        flag."""
        if not self.model_dir or not self.export_dir:
            raise FlagValueError("pass --model_dir and --export_dir (or --check EXPORT_DIR); "
                                 "--helpshort lists the flags")
        try:
            # Two formats in one directory first: the reader would take one without a word.
            if fileio.isdir(self.model_dir):
                model_directory.check_one_model(self.model_dir, "--model_dir")
            # A Hugging Face directory exports as its transformers model (with its head).
            if not model_directory.is_huggingface(self.model_dir):
                run_directory.model_file(self.model_dir, flag="--model_dir")
        except (FileNotFoundError, ValueError) as e:
            raise FlagValueError(str(e)) from None
        if self.litert:
            from bert_tf.serving import quantization

            try:
                quantization.check_mode(self.quantize)
            except ValueError as e:
                raise FlagValueError(str(e)) from None
            flag_checks.check_file("calibration_file", self.calibration_file)
            flag_checks.check_file("eval_file", self.eval_file)
            if self.quantize == "full_int8" and not self.calibration_file:
                raise FlagValueError("--quantize=full_int8 needs --calibration_file (texts from "
                                     "the task's data to calibrate activation ranges on).")
        elif self.quantize != "none" or self.calibration_file or self.eval_file:
            raise FlagValueError("--quantize, --calibration_file and --eval_file apply to "
                                 "--format=litert only.")
        if self.multi_label_threshold is not None:
            from bert_tf.serving.task_info import multi_label_threshold_problem

            problem = multi_label_threshold_problem(self.multi_label_threshold)
            if problem:
                raise FlagValueError(f"--multi_label_threshold={problem}")
        if self.label_column and not self.eval_file:
            raise FlagValueError(f"--label_column={self.label_column} names --eval_file's "
                                 "label column: give --eval_file too")


def check(export_dir):
    """The ops of the SavedModel in `export_dir` against the TF Serving model server's.

    Run in a process that has imported only TensorFlow (importing this module loads no
    tensorflow_text), whose op registry is then the reference. Returns the
    bert_tf.serving.op_check report (`.ok`, `.format()`).
    """
    return serving.check_ops(export_dir, serving.server_op_allowlist(in_this_process=True))


def _first_set(*values):
    return next((v for v in values if v is not None), None)


def export(config):
    """Exports the model of config.model_dir as config says.

    Returns:
      What the command prints: the SavedModel directory, or the LiteRT report (path, size,
      ops and the quantized model's agreement with float32).

    Raises:
      FlagValueError naming the flag: a setting that cannot work, a directory without the
      files an export needs, or what serving.export / the LiteRT export refuse.
    """
    from bert_tf.data.tasks import length_buckets
    from bert_tf.modeling.token_ids import encoder_config

    config.validate()
    # What the final move compares --export_dir with: another writer's export that appears
    # there meanwhile is never replaced.
    expected = fileio.state(config.export_dir)
    try:
        source = serving.load_model_dir(config.model_dir)
    except (ValueError, TypeError) as e:
        # A malformed task_info.json or run record (naming the file), a model that cannot be
        # served: one line, as every refusal.
        raise FlagValueError(f"--model_dir={config.model_dir}: {e}" if config.model_dir not in
                             str(e) else str(e)) from None
    info = source.task_info
    task = serving.task_name_of(source.model)
    signatures = _signatures(config, task)
    vocab_file = config.vocab_file or source.vocab_file
    if config.vocab_file and source.vocab_file:
        check_tokenizer_matches(config.vocab_file, config.vocab_file, source.vocab_file,
                                f"--model_dir={config.model_dir}")
    wants_text = bool({"text", "examples"} & set(signatures))
    if wants_text and vocab_file is None:
        raise FlagValueError(f"--model_dir={config.model_dir} has no vocab.txt or "
                             "tokenizer.json beside the model; pass --vocab_file (or "
                             "--signatures=ids).")
    if (config.do_lower_case is not None and source.do_lower_case is not None
            and bool(config.do_lower_case) != bool(source.do_lower_case)):
        # Serving would tokenize otherwise than the model was trained: wrong ids, no error.
        raise FlagValueError(
            f"--do_lower_case={bool(config.do_lower_case)} contradicts --model_dir="
            f"{config.model_dir}: its run records do_lower_case={bool(source.do_lower_case)}, "
            "the casing the model was trained with (leave --do_lower_case out to use it)")
    do_lower_case = _first_set(config.do_lower_case, source.do_lower_case)
    tokenizer = None
    if wants_text:
        tokenizer, do_lower_case = _tokenizer(vocab_file, do_lower_case)
    elif do_lower_case is None:
        do_lower_case = True
    max_seq_length = _first_set(config.max_seq_length, source.max_seq_length)
    if max_seq_length is None:
        max_seq_length = _first_set(_sentence_bert_length(source), 128)
    options = dict(
        tokenizer=tokenizer, do_lower_case=do_lower_case, max_seq_length=max_seq_length,
        labels=config.labels or (list(info.labels) if info and info.labels else None),
        signatures=signatures, overwrite=config.overwrite, expected=expected)
    if config.length_buckets is not None:
        # Checked here to name the flag; empty or "off": every request at max_seq_length.
        try:
            options["length_buckets"] = length_buckets.parse_buckets(
                config.length_buckets, options["max_seq_length"],
                encoder_config(source.model).max_position_embeddings) or ()
        except length_buckets.BucketError as e:
            raise FlagValueError(str(e)) from None
    if config.multi_label_threshold is not None and task != "multi_label":
        raise FlagValueError(f"--multi_label_threshold={config.multi_label_threshold} applies "
                             f"to a multi-label model; --model_dir={config.model_dir} holds a "
                             f"{task} model")
    if task == "multi_label":
        options["multi_label_threshold"] = _first_set(config.multi_label_threshold,
                                                      info and info.multi_label_threshold,
                                                      RUN_DEFAULTS["multi_label_threshold"][0])
    if task in serving.task_info.CLASSIFIER_TASKS:
        options["text_pair"] = _first_set(config.text_pair, info and info.text_pair, True)
        if wants_text and config.text_pair is None and not (info and info.text_pair is not None):
            logging.info("serve_text takes text and text_pair (an empty text_pair means a "
                         "single sentence); pass --notext_pair for text alone.")
    elif task == "squad" and not config.litert:
        options.update(
            max_query_length=_first_set(config.max_query_length, info and info.max_query_length),
            max_answer_length=_first_set(config.max_answer_length,
                                         info and info.max_answer_length,
                                         RUN_DEFAULTS["max_answer_length"][0]),
            doc_stride=_first_set(config.doc_stride, info and info.doc_stride),
            version_2_with_negative=_first_set(config.version_2_with_negative,
                                               info and info.version_2_with_negative,
                                               RUN_DEFAULTS["version_2_with_negative"][0]),
            null_score_diff_threshold=_first_set(config.null_score_diff_threshold,
                                                 info and info.null_score_diff_threshold,
                                                 RUN_DEFAULTS["null_score_diff_threshold"][0]))
    elif task == "fill_mask" and not config.litert:
        options["top_k"] = config.top_k
    if config.litert:
        return _export_litert(config, source, task, options)
    if not os.path.basename(os.path.normpath(config.export_dir)).isdigit():
        logging.warning("--export_dir=%s: TF Serving loads numbered version directories under "
                        "--model_base_path, e.g. EXPORT/1.", config.export_dir)
    try:
        export_dir = serving.export(source.model, config.export_dir, **options)
    except (ValueError, FileExistsError) as e:
        raise FlagValueError(str(e)) from e
    logging.info("Exported the %s model of %s to %s (signatures: %s).", task, source.model_file,
                 export_dir, ", ".join(serving.SIGNATURE_KEYS[s] for s in signatures))
    return export_dir


def _sentence_bert_length(source):
    """The max_seq_length of a sentence_bert_config.json beside the model (what a conversion
    of a sentence-transformers model carries; bert-tf-embed reads it too), logged; else None."""
    from bert_tf.interop import InteropError, sentence_transformers
    from bert_tf.modeling.token_ids import encoder_config

    directory = os.path.dirname(fileio.abspath(source.model_file))
    try:
        length = sentence_transformers.read_sentence_bert_config(
            directory, encoder_config(source.model).max_position_embeddings).get("max_seq_length")
    except InteropError as e:
        raise FlagValueError(str(e)) from None
    if length is not None:
        logging.info("--max_seq_length unset: %d, as %s records", length, os.path.join(
            directory, sentence_transformers.SENTENCE_BERT_CONFIG_FILE))
    return length


def _signatures(config, task):
    """The signatures to write: --signatures, else the format's defaults. A LiteRT model has no
    tf.Example signature (named explicitly, the LiteRT export refuses it), and a task whose
    text answers LiteRT cannot express (words, offsets, strings) gets the id signature."""
    if config.signatures is not None:
        return tuple(config.signatures)
    if not config.litert:
        return DEFAULT_SIGNATURES
    from bert_tf.serving.litert import TEXT_TASKS

    if task not in TEXT_TASKS:
        logging.info("--format=litert of a %s model: serving_default only (token ids in, "
                     "logits out); its text answers need string ops LiteRT lacks", task)
        return ("ids",)
    return _LITERT_DEFAULT_SIGNATURES


def _tokenizer(vocab_file, do_lower_case):
    """(the Python tokenizer of the text signatures, the casing in force).

    A tokenizer.json records its casing: the run's (or --do_lower_case) must agree with it; a
    vocab.txt without a recorded casing tokenizes lower-cased, with a warning.
    """
    from bert_tf.text import casing_to_load, load_tokenizer

    def lower_case_with_a_warning():
        logging.warning("The run does not record its casing; tokenizing with "
                        "--do_lower_case=true. Pass --do_lower_case to be sure.")
        return True

    try:
        tokenizer = load_tokenizer(
            vocab_file, casing_to_load(vocab_file, do_lower_case, lower_case_with_a_warning))
    except (OSError, ValueError) as e:
        raise FlagValueError(f"--vocab_file={vocab_file}: {e}") from None
    return tokenizer, tokenizer.do_lower_case


def _export_litert(config, source, task, options):
    from bert_tf.serving import litert_export

    try:
        info = source.task_info
        result = litert_export.export_litert(
            source.model, config.export_dir, quantize=config.quantize,
            calibration_file=config.calibration_file, eval_file=config.eval_file,
            label_column=config.label_column or "label",
            label_separator=(info.label_separator if info and info.label_separator else ","),
            **options)
    except (ValueError, FileExistsError) as e:
        raise FlagValueError(str(e)) from e
    logging.info("Exported the %s model of %s to %s.", task, source.model_file, result.path)
    return result.format()
