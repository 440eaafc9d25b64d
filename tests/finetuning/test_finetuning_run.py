"""Flag checks the fine-tuning CLIs share (bert_tf.finetuning_run.prepare)."""

import types

import pytest

from bert_tf.common_flags import FlagValueError
from bert_tf.finetuning_run import prepare


def _options(pretrained_dir, tmp_path, **overrides):
    values = dict(do_train=True, do_eval=False, do_predict=False, output_dir=str(tmp_path),
                  eval_batch_size=8, predict_batch_size=8, num_train_epochs=3.0,
                  warmup_proportion=0.1, save_checkpoints_steps=None, do_lower_case=True,
                  init_checkpoint=str(pretrained_dir), bert_config_file=None, vocab_file=None,
                  max_seq_length=16, export_dir=None, train_batch_size=16,
                  gradient_accumulation_steps=1)
    values.update(overrides)
    return types.SimpleNamespace(**values)


@pytest.mark.parametrize("overrides,message", [
    (dict(do_train=False), "at least one of --do_train, --do_eval or --do_predict must be set"),
    (dict(output_dir=None), "--output_dir is required"),
    (dict(eval_batch_size=0), "--eval_batch_size=0 must be >= 1"),
    (dict(num_train_epochs=0.0), "--num_train_epochs=0.0 must be > 0"),
    (dict(gradient_accumulation_steps=0), "--gradient_accumulation_steps=0 must be >= 1"),
    (dict(warmup_proportion=1.5), r"--warmup_proportion=1.5 must be in \[0, 1\]"),
    (dict(save_checkpoints_steps=0), "--save_checkpoints_steps=0 must be >= 1"),
    (dict(export_dir="."), r"--export_dir=\. exists and is not empty; choose a new version "
                           "directory"),
    (dict(max_seq_length=64), "--max_seq_length=64 exceeds max_position_embeddings=32 in "),
    (dict(init_checkpoint="/models/cased_L-12_H-768_A-12/bert_model.ckpt"),
     "--do_lower_case=True contradicts --init_checkpoint"),
    (dict(init_checkpoint=None), r"--bert_config_file is required \(no bert_config.json beside "
                                 "--init_checkpoint=None\\)"),
])
def test_bad_flags_are_named(tmp_path, pretrained_dir, overrides, message):
    with pytest.raises(FlagValueError, match=message):
        prepare(_options(pretrained_dir, tmp_path, **overrides))
