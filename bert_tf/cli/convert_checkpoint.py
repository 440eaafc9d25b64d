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
  huggingface  config.json, model.safetensors, vocab.txt (spiece.model for a SentencePiece
               vocabulary), tokenizer_config.json (the casing, below), and tokenizer.json
               for ModernBERT (its WordPiece as transformers' AutoTokenizer reads it).
The bert_tf and huggingface outputs also carry the checkpoint's own tokenizer.json when it has
one (a byte-level BPE vocabulary has no vocab.txt).
Casing travels too: when the source says whether it lower-cases (Hugging Face
tokenizer_config.json, keras-hub tokenizer) or --do_lower_case is given, tokenizer_config.json
records it (bert_tf and huggingface outputs), and warm starts check it. So does a
sentence-transformers directory's max_seq_length (--from=huggingface): every output holds its
sentence_bert_config.json, which bert-tf-embed and bert-tf-export read beside an encoder, and a
conversion of any directory holding one carries it on. Its pooling and
normalisation do not travel: when they are not bert-tf-embed's defaults (mean, normalised), a
warning names the flags that give its vectors.

--max_position_embeddings longer than the checkpoint's extends its learned position table for
long inputs: the first rows stay, the new ones are copies of the table (copy) or the table
resampled (interpolate); see bert_tf.modeling.positions.
"""

import sys

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Source and target formats and files, casing, position extension."""
    return cli_flags.define_convert_checkpoint_flags(flag_values)


def convert_checkpoint_config(flag_values=FLAGS):
    """The ConvertCheckpointConfig of the parsed flags (--from and --to, Python keywords, as
    from_format and to_format)."""
    from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig

    return cli_flags.to_config(ConvertCheckpointConfig, flag_values,
                               from_format=flag_values["from"].value,
                               to_format=flag_values["to"].value)


def main(argv):
    # The driver (and TensorFlow) load when the command runs: --help answers without them.
    from bert_tf import interop
    from bert_tf.config import ConfigError
    from bert_tf.jobs.convert_checkpoint import convert_checkpoint

    del argv
    config = convert_checkpoint_config()
    try:
        outputs.check_conversion_output_dir(config.output_dir, config.checkpoint,
                                            config.bert_config_file, config.vocab_file,
                                            config.to_format, config.overwrite)
        outputs.check_writable_dir("--output_dir", config.output_dir)
        written = convert_checkpoint(config)
    except (interop.InteropError, ConfigError, ValueError, OSError) as e:
        print(f"convert_checkpoint: error: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"wrote {', '.join(written)} to {config.output_dir}")


def run():
    """Console-script entry point (bert-tf-convert-checkpoint)."""
    cli.run(main, required=["from", "to", "checkpoint", "output_dir"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
