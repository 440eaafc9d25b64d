r"""Converts BERT checkpoints between original TF1, Hugging Face, keras-hub and bert_tf layouts.

    bert-tf-convert-checkpoint --from=tf1 --to=bert_tf \
        --checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --output_dir=bert_base_uncased
    bert-tf-convert-checkpoint --from=huggingface --to=tf1 \
        --checkpoint=bert-base-uncased/ --output_dir=bert_base_tf1
    bert-tf-convert-checkpoint --from=keras_hub --to=huggingface \
        --checkpoint=my_preset/ --output_dir=bert_hf
    bert-tf-convert-checkpoint --from=bert_tf --to=tf1 \
        --checkpoint=pretraining_output/ --output_dir=exported
    bert-tf-convert-checkpoint --from=albert --to=bert_tf \
        --checkpoint=albert_base/model.ckpt-best --output_dir=albert_base_bert_tf
    bert-tf-convert-checkpoint --from=bert_tf --to=bert_tf \
        --checkpoint=bert_base_uncased/ --output_dir=bert_base_1024 \
        --max_position_embeddings=1024 --position_extension=copy

Outputs:
  bert_tf      pretrainer.keras (when the checkpoint has the MLM head), encoder.keras,
               bert_config.json, vocab.txt: the layout run_pretraining writes, so the directory
               works as --init_checkpoint for fine-tuning and as --model_dir for export.
  tf1          bert_model.ckpt.{index,data-00000-of-00001}, bert_config.json, vocab.txt.
  albert       model.ckpt.{index,data-00000-of-00001} under ALBERT's TF1 names,
               albert_config.json (and bert_config.json); for models with embedding_size and
               share_parameters="all" (bert_tf.interop.albert).
  huggingface  config.json, model.safetensors, vocab.txt.
Casing travels too: when the source says whether it lower-cases (Hugging Face
tokenizer_config.json, keras-hub tokenizer) or --do_lower_case is given, tokenizer_config.json
records it (bert_tf and huggingface outputs), and warm starts check it.

--max_position_embeddings longer than the checkpoint's extends its learned position table for
long inputs: the first rows stay, the new ones are copies of the table (copy) or the table
resampled (interpolate); see bert_tf.modeling.positions.
"""

import os
import sys

from absl import app, flags, logging

from bert_tf import cli, fileio, interop, run_directory
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs
from bert_tf.config import BertConfig, ConfigError
from bert_tf.interop import albert, huggingface, kerashub, tf1, weights
from bert_tf.modeling import BertPretrainer, extend_position_embeddings
from bert_tf.text import load_vocab, validate_case_matches_checkpoint
from bert_tf.training.checkpointing import check_writable_dir, save_keras_model

FLAGS = flags.FLAGS

def define_flags(flag_values=FLAGS):
    """Source and target formats and files, casing, position extension."""
    return cli_flags.define_convert_checkpoint_flags(flag_values)


def read_source(source_format, path, bert_config_file=None, allow_pickle=False):
    """Loads --checkpoint; returns (model, vocab_file or None, do_lower_case or None)."""
    directory = path if fileio.isdir(path) else os.path.dirname(path)
    if source_format == "tf1":
        config = BertConfig.from_json_file(bert_config_file) if bert_config_file else None
        model = interop.load_tf1_checkpoint(path, config)
        return model, _existing(run_directory.path(directory, run_directory.VOCAB_FILE)), None
    if source_format == "albert":
        model = albert.load_albert_checkpoint(path, bert_config_file)
        return model, _existing(run_directory.path(directory, run_directory.VOCAB_FILE)), None
    if source_format == "huggingface":
        model, _, vocab_file = interop.load_huggingface(path, allow_pickle=allow_pickle)
        return model, vocab_file, huggingface.do_lower_case_of(path)
    if source_format == "keras_hub":
        backbone, masked_lm, vocab_file, do_lower_case = kerashub.load_keras_hub(path)
        return interop.from_keras_hub(backbone, masked_lm), vocab_file, do_lower_case
    config = BertConfig.from_json_file(bert_config_file) if bert_config_file else None
    model = interop.load_bert_tf(path, config)
    return (model, _existing(run_directory.path(directory, run_directory.VOCAB_FILE)),
            interop.checkpoint_casing(path)[0])


def _existing(path):
    return path if fileio.exists(path) else None


def resolve_casing(flag_value, source_value, checkpoint):
    """The casing to record: the flag, checked against the source; else the source's."""
    if flag_value is None:
        return source_value
    validate_case_matches_checkpoint(flag_value, checkpoint)
    if source_value is not None and source_value != flag_value:
        raise ValueError(f"--do_lower_case={flag_value} contradicts --checkpoint={checkpoint}, "
                         f"whose tokenizer has do_lower_case={source_value}")
    return flag_value


def write_bert_tf(model, output_dir, vocab_file, do_lower_case):
    """pretrainer.keras (if a pretrainer), encoder.keras, bert_config.json, vocab.txt and
    tokenizer_config.json (when the casing is known)."""
    encoder = weights.encoder_of(model)
    if isinstance(model, BertPretrainer):
        save_keras_model(model, run_directory.path(output_dir, run_directory.PRETRAINER_FILE))
    save_keras_model(encoder, run_directory.path(output_dir, run_directory.ENCODER_FILE))
    encoder.config.to_json_file(run_directory.path(output_dir, run_directory.CONFIG_FILE))
    if vocab_file:
        tf1.copy_vocab(vocab_file, run_directory.path(output_dir, run_directory.VOCAB_FILE))
    if do_lower_case is not None:
        huggingface.write_tokenizer_config(output_dir, do_lower_case)


def copy_tokenizer_json(checkpoint, output_dir, target_format):
    """Carries a byte-level BPE tokenizer.json (ModernBERT's vocabulary; there is no vocab.txt)
    from the checkpoint's directory into a bert_tf or Hugging Face output."""
    directory = checkpoint if fileio.isdir(checkpoint) else os.path.dirname(checkpoint)
    source = os.path.join(directory, huggingface.TOKENIZER_JSON_FILE)
    if target_format in ("bert_tf", "huggingface") and fileio.exists(source):
        tf1.copy_vocab(source, os.path.join(output_dir, huggingface.TOKENIZER_JSON_FILE))


# The loaders are shared with the training CLIs, whose flag for a checkpoint is --init_checkpoint
# and whose messages say so; here the same path comes from --checkpoint.
_OWN_FLAG_NAMES = (("--init_checkpoint=", "--checkpoint="),
                   ("; pass the config", "; pass --bert_config_file"))


def _with_own_flag_names(message):
    for theirs, ours in _OWN_FLAG_NAMES:
        message = message.replace(theirs, ours)
    return message


def convert(source_format, target_format, checkpoint, output_dir, bert_config_file=None,
            vocab_file=None, do_lower_case=None, allow_pickle=False,
            max_position_embeddings=None, position_extension="copy"):
    """Runs one conversion; returns the files in output_dir afterwards.

    Raises:
      interop.InteropError, ConfigError, ValueError: naming this tool's flags.
    """
    try:
        return _convert(source_format, target_format, checkpoint, output_dir,
                        bert_config_file, vocab_file, do_lower_case, allow_pickle,
                        max_position_embeddings, position_extension)
    except (interop.InteropError, ConfigError, ValueError) as e:
        message = _with_own_flag_names(str(e))
        if message == str(e):
            raise
        raise type(e)(message) from None


def _convert(source_format, target_format, checkpoint, output_dir, bert_config_file,
             vocab_file, do_lower_case, allow_pickle, max_position_embeddings,
             position_extension):
    outputs.check_conversion_output_dir(output_dir, checkpoint, bert_config_file, vocab_file)
    check_writable_dir(output_dir)
    model, source_vocab, source_casing = read_source(source_format, checkpoint,
                                                     bert_config_file, allow_pickle)
    if max_position_embeddings is not None:
        model = extend_position_embeddings(model, max_position_embeddings, position_extension)
    vocab_file = vocab_file or source_vocab
    config = weights.encoder_of(model).config
    if vocab_file and len(load_vocab(vocab_file)) > config.vocab_size:
        raise ValueError(f"--vocab_file={vocab_file} has more tokens than vocab_size="
                         f"{config.vocab_size} of the checkpoint's config")
    do_lower_case = resolve_casing(do_lower_case, source_casing, checkpoint)
    if target_format == "bert_tf":
        write_bert_tf(model, output_dir, vocab_file, do_lower_case)
    elif target_format == "tf1":
        tf1.save_tf1_checkpoint(model, os.path.join(output_dir, "bert_model.ckpt"),
                                vocab_file=vocab_file)
    elif target_format == "albert":
        albert.save_albert_checkpoint(model, os.path.join(output_dir, "model.ckpt"),
                                      vocab_file=vocab_file)
    else:
        huggingface.save_huggingface(model, output_dir, vocab_file=vocab_file,
                                     do_lower_case=do_lower_case)
    copy_tokenizer_json(checkpoint, output_dir, target_format)
    logging.info("Converted %s (%s, %s) to %s in %s", checkpoint, source_format,
                 type(model).__name__, target_format, output_dir)
    return sorted(fileio.listdir(output_dir))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        written = convert(FLAGS["from"].value, FLAGS.to, FLAGS.checkpoint, FLAGS.output_dir,
                          bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
                          do_lower_case=FLAGS.do_lower_case, allow_pickle=FLAGS.allow_pickle,
                          max_position_embeddings=FLAGS.max_position_embeddings,
                          position_extension=FLAGS.position_extension)
    except (interop.InteropError, ConfigError, ValueError, OSError) as e:
        print(f"convert_checkpoint: error: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"wrote {', '.join(written)} to {FLAGS.output_dir}")


def run():
    """Console-script entry point (bert-tf-convert-checkpoint)."""
    cli.run(main, required=["from", "to", "checkpoint", "output_dir"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
