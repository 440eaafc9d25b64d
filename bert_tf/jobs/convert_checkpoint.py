"""The checkpoint-conversion job: between original TF1, ALBERT, Hugging Face, keras-hub and
bert_tf layouts, optionally with a longer position table.

`convert_checkpoint(ConvertCheckpointConfig(from_format="tf1", to_format="bert_tf", ...))` is
what `bert-tf-convert-checkpoint` (bert_tf.cli.convert_checkpoint) runs; that command's help
lists what each output format holds.
"""

import dataclasses
import os

from absl import logging

from bert_tf import file_names, fileio, interop
from bert_tf.config import ConfigError, EncoderConfig
from bert_tf.interop import (albert, huggingface, kerashub, sentence_transformers, tf1,
                             warm_starting, weights)
from bert_tf.jobs import tokenizer_setup
from bert_tf.modeling import (BertPretrainer, BertSentenceEmbedder,
                              extend_position_embeddings)
from bert_tf.text import tokenizer_files, validate_case_matches_checkpoint
from bert_tf.training.checkpointing import save_keras_model


@dataclasses.dataclass
class ConvertCheckpointConfig:
    """What a conversion is told; field names are the flags' (from_format is --from,
    to_format --to: Python keywords), defaults too. do_lower_case None: the source's casing,
    if it records one."""

    from_format: str | None = None
    to_format: str | None = None
    checkpoint: str | None = None
    output_dir: str | None = None
    bert_config_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    allow_pickle: bool = False
    max_position_embeddings: int | None = None
    position_extension: str = "copy"
    overwrite: bool = False


def read_source(source_format, path, bert_config_file=None, allow_pickle=False):
    """Loads --checkpoint; returns (model, vocab_file or None, do_lower_case or None)."""
    directory = path if fileio.isdir(path) else os.path.dirname(path)
    if source_format == "tf1":
        config = EncoderConfig.from_json_file(bert_config_file) if bert_config_file else None
        model = interop.load_tf1_checkpoint(path, config)
        # An original release records no casing; a conversion's output does.
        return model, _vocabulary_beside(path), interop.checkpoint_casing(path)[0]
    if source_format == "albert":
        model = albert.load_albert_checkpoint(path, bert_config_file)
        # The ALBERT release ships its SentencePiece model (30k-clean.model), not a vocab.txt.
        return (model, tokenizer_files.model_tokenizer_file(directory),
                interop.checkpoint_casing(path)[0])
    if source_format == "huggingface":
        model, _, vocab_file = interop.load_huggingface(path, allow_pickle=allow_pickle)
        return model, vocab_file, huggingface.do_lower_case_of(path)
    if source_format == "keras_hub":
        backbone, masked_lm, vocab_file, do_lower_case = kerashub.load_keras_hub(path)
        return interop.from_keras_hub(backbone, masked_lm), vocab_file, do_lower_case
    config = EncoderConfig.from_json_file(bert_config_file) if bert_config_file else None
    model = interop.load_bert_tf(path, config, flag="--checkpoint")
    return model, _vocabulary_beside(path), interop.checkpoint_casing(path)[0]


def _vocabulary_beside(path):
    """The vocab.txt of a TF1 or bert_tf checkpoint (in the directory `path` names, beside the
    file or prefix, or in the run of RUN/best/model-N), else its SentencePiece model, else
    None (a byte-level BPE tokenizer.json travels apart: copy_tokenizer_json)."""
    for name in (file_names.VOCAB_FILE, file_names.SENTENCEPIECE_FILE):
        found = warm_starting.file_beside(path, name)
        if found:
            return found
    return None


def resolve_casing(flag_value, source_value, checkpoint):
    """The casing to record: the flag, checked against the source; else the source's."""
    if flag_value is None:
        return source_value
    validate_case_matches_checkpoint(flag_value, checkpoint, flag="--checkpoint")
    if source_value is not None and source_value != flag_value:
        raise ValueError(f"--do_lower_case={flag_value} contradicts --checkpoint={checkpoint}, "
                         f"whose tokenizer has do_lower_case={source_value}")
    return flag_value


def write_bert_tf(model, output_dir, vocab_file):
    """pretrainer.keras (if a pretrainer), encoder.keras, bert_config.json and the vocabulary
    (vocab.txt, or spiece.model for a SentencePiece one)."""
    encoder = weights.encoder_of(model)
    if isinstance(model, BertPretrainer):
        save_keras_model(model, file_names.path(output_dir, file_names.PRETRAINER_FILE))
    save_keras_model(encoder, file_names.path(output_dir, file_names.ENCODER_FILE))
    encoder.config.to_json_file(file_names.path(output_dir, file_names.CONFIG_FILE))
    if vocab_file:
        tokenizer_files.write_tokenizer_file(output_dir, None, vocab_file)


def _write_casing(output_dir, vocab_file, do_lower_case):
    """tokenizer_config.json, when the casing is known: what every command reads the casing
    of a checkpoint from (interop.checkpoint_casing), whatever its format. Without it a cased
    model's TF1 or ALBERT checkpoint would be tokenized lower-cased, a vocab.txt's default."""
    if do_lower_case is not None:
        huggingface.write_tokenizer_config(
            output_dir, do_lower_case,
            sentencepiece=bool(vocab_file) and tokenizer_files.is_sentencepiece_model(vocab_file))


def copy_tokenizer_json(checkpoint, output_dir, target_format):
    """Carries a byte-level BPE tokenizer.json (ModernBERT's vocabulary; there is no vocab.txt)
    from the checkpoint's directory into a bert_tf or Hugging Face output."""
    directory = checkpoint if fileio.isdir(checkpoint) else os.path.dirname(checkpoint)
    source = os.path.join(directory, huggingface.TOKENIZER_JSON_FILE)
    if target_format in ("bert_tf", "huggingface") and fileio.exists(source):
        tokenizer_files.copy_vocab(source,
                                   os.path.join(output_dir, huggingface.TOKENIZER_JSON_FILE))


# load_bert_tf names its `config` argument, which here is --bert_config_file (the loaders name
# --checkpoint themselves: flag=).
_CONFIG_HINT = ("; pass the config", "; pass --bert_config_file")


def convert_checkpoint(config):
    """Runs one conversion; returns the files in config.output_dir afterwards.

    The command checks --output_dir against the output rule first (bert_tf.cli.outputs: new,
    empty, or with --overwrite an earlier conversion to the same format). The files are
    written to a directory beside --output_dir and moved into place together, only if
    --output_dir still holds what it held when the conversion started (fileio.publish_dir).

    Raises:
      interop.InteropError, ConfigError, ValueError: naming the command's flags.
      fileio.TargetChangedError: --output_dir appeared or changed during the conversion.
    """
    try:
        return _convert(config)
    except (interop.InteropError, ConfigError, ValueError) as e:
        message = str(e).replace(*_CONFIG_HINT)
        if message == str(e):
            raise
        raise type(e)(message) from None


def _convert(options):
    output_dir = fileio.abspath(options.output_dir)
    expected = fileio.state(output_dir)
    parent = os.path.dirname(output_dir)
    model, source_vocab, source_casing = read_source(options.from_format, options.checkpoint,
                                                     options.bert_config_file,
                                                     options.allow_pickle)
    if options.max_position_embeddings is not None:
        model = extend_position_embeddings(model, options.max_position_embeddings,
                                           options.position_extension)
    if options.vocab_file and source_vocab:
        tokenizer_setup.check_tokenizer_matches(options.vocab_file, options.vocab_file,
                                                source_vocab, f"--checkpoint={options.checkpoint}")
    else:
        tokenizer_setup.check_vocab_file_beside(options.vocab_file, options.checkpoint,
                                                "--checkpoint")
    vocab_file = options.vocab_file or source_vocab
    config = weights.encoder_of(model).config
    if vocab_file and tokenizer_files.vocab_size(vocab_file) > config.vocab_size:
        raise ValueError(f"--vocab_file={vocab_file} has more tokens than vocab_size="
                         f"{config.vocab_size} of the checkpoint's config")
    embedder = isinstance(model, BertSentenceEmbedder)
    if embedder:
        # An embedding run's model: its pooling has no weights, and no output format holds it.
        _warn_pooling(options.to_format, options.checkpoint, model.pooling, model.normalize)
        model = model.encoder
    st_length, st_lower_case = _sentence_transformers_settings(options.checkpoint, config,
                                                               options.to_format)
    if embedder and not st_length:
        st_length = _embedding_run_length(options.checkpoint)
    # The module lower-cases before a vocab.txt tokenizer: the output's tokenizer must.
    source_casing = True if st_lower_case else source_casing
    do_lower_case = resolve_casing(options.do_lower_case, source_casing, options.checkpoint)
    fileio.makedirs(parent)
    labels = _run_labels(options.checkpoint, model) if options.to_format == "huggingface" else None
    with fileio.staging_dir(output_dir, ".tmp_convert_") as staging:
        _write(options.to_format, model, staging, vocab_file, do_lower_case, labels)
        copy_tokenizer_json(options.checkpoint, staging, options.to_format)
        if st_length:
            sentence_transformers.write_sentence_bert_config(staging, st_length)
        written = sorted(os.listdir(staging))
        fileio.publish_dir(staging, output_dir, expected, prefix=".tmp_old_convert_")
    logging.info("Converted %s (%s, %s) to %s in %s", options.checkpoint, options.from_format,
                 type(model).__name__, options.to_format, options.output_dir)
    return written


def _sentence_transformers_settings(checkpoint, config, to_format):
    """(max_seq_length, do_lower_case) of the Transformer module of a sentence-transformers
    directory given as --checkpoint, else of the sentence_bert_config.json in --checkpoint's
    directory (an earlier conversion's output of any format), else (None, False). Every output
    carries the length in a sentence_bert_config.json, which bert-tf-embed and bert-tf-export
    read beside an encoder; the pooling and normalisation (modules.json) are no output's, so
    one that bert-tf-embed would not use by default is logged with the flags that restore
    it."""
    if not sentence_transformers.is_sentence_transformers_dir(checkpoint):
        directory = checkpoint if fileio.isdir(checkpoint) else os.path.dirname(checkpoint)
        settings = sentence_transformers.read_sentence_bert_config(
            directory, config.max_position_embeddings)
        return settings.get("max_seq_length"), settings.get("do_lower_case", False)
    try:
        modules = sentence_transformers.read_modules(checkpoint)
        transformer_dir = modules[0][1]
        pooling, normalize = sentence_transformers.pooling_of(modules)
    except interop.InteropError as e:
        # Modules bert_tf does not build (Dense, weighted-mean pooling): the encoder converts
        # as before, with nothing of the rest.
        logging.warning("--to=%s keeps the encoder of %s only, not its length or pooling: %s",
                        to_format, checkpoint, e)
        return None, False
    _warn_pooling(to_format, checkpoint, pooling, normalize)
    return sentence_transformers.transformer_settings(transformer_dir,
                                                      config.max_position_embeddings)


def _warn_pooling(to_format, checkpoint, pooling, normalize):
    """Names the bert-tf-embed flags that give a sentence model's vectors from the encoder
    converted, where they are not its defaults."""
    if (tuple(pooling), normalize) != (sentence_transformers.DEFAULT_POOLING,
                                       sentence_transformers.DEFAULT_NORMALIZE):
        logging.warning("--to=%s keeps the encoder of %s, not its pooling: give bert-tf-embed "
                        "--pooling=%s --%snormalize for its vectors", to_format, checkpoint,
                        ",".join(pooling), "" if normalize else "no")


def _run_task_info(checkpoint):
    """The TaskInfo (task_info.json) of the run --checkpoint comes from (the run, a file in
    it, or its best/model-N), or None."""
    from bert_tf.jobs import finetuning
    from bert_tf.serving.task_info import read_task_info

    path = finetuning.task_info_path(None, checkpoint)
    return read_task_info(path) if path is not None else None


def _embedding_run_length(checkpoint):
    """The --max_seq_length an embedding run recorded for the model of --checkpoint, or None:
    written as the output's sentence_bert_config.json, bert-tf-embed and bert-tf-export encode
    at the length the model was trained at rather than their default 128."""
    info = _run_task_info(checkpoint)
    return info.max_seq_length if info and info.task == file_names.EMBEDDING_TASK else None


def _run_labels(checkpoint, model):
    """The class names a fine-tuning run recorded for `model`'s head, found from
    --checkpoint; None where there are none or they do not fit the head."""
    info = _run_task_info(checkpoint) if hasattr(model, "num_classes") else None
    if info is None:
        return None
    labels = list(info.labels)
    return labels if len(labels) == model.num_classes else None


def _write(target_format, model, output_dir, vocab_file, do_lower_case, labels=None):
    if target_format == "huggingface":
        huggingface.save_huggingface(model, output_dir, vocab_file=vocab_file,
                                     do_lower_case=do_lower_case, labels=labels)
        return
    if target_format == "bert_tf":
        write_bert_tf(model, output_dir, vocab_file)
    elif target_format == "tf1":
        tf1.save_tf1_checkpoint(model, os.path.join(output_dir, "bert_model.ckpt"),
                                vocab_file=vocab_file)
    else:
        albert.save_albert_checkpoint(model, os.path.join(output_dir, "model.ckpt"),
                                      vocab_file=vocab_file)
    _write_casing(output_dir, vocab_file, do_lower_case)
