"""The fine-tuning driver (bert_tf.jobs.finetuning): setting checks, the restore rule."""

import logging
import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.jobs.finetuning import RUN_RECORD, check_resume, owned, prepare, restore_trained
from bert_tf.jobs.run_setup import FlagValueError
from bert_tf.modeling import BertEncoder, BertSpanLabeler


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
    (dict(init_checkpoint=None), r"--bert_config_file is required \(or an --init_checkpoint "
                                 r"that records its configuration\)"),
    (dict(init_checkpoint="/models/uncased_L-2_H-128_A-2/bert_model.ckpt", vocab_file=__file__),
     "--bert_config_file is required: --init_checkpoint=/models/uncased_L-2_H-128_A-2/"
     "bert_model.ckpt has no bert_config.json beside it"),
])
def test_bad_flags_are_named(tmp_path, pretrained_dir, overrides, message):
    with pytest.raises(FlagValueError, match=message):
        prepare(_options(pretrained_dir, tmp_path, **overrides))


def test_hugging_face_directory_alone_gives_config_vocab_and_weights(tmp_path):
    """--init_checkpoint=<HF dir> with no --bert_config_file / --vocab_file: the config comes from
    its config.json ("gelu" = the exact form), the vocabulary from its vocab.txt, and the
    encoder of the task model loads completely."""
    import os

    import numpy as np

    from bert_tf.jobs.finetuning import build_model, warm_start_fn
    from bert_tf.interop import load_huggingface
    from bert_tf.modeling import BertClassifier

    hf_dir = os.path.join(os.path.dirname(os.path.dirname(__file__)), "interop", "fixtures",
                          "hf_bert_gelu")
    options = _options(hf_dir, tmp_path, trainable_encoder=True, learning_rate=1e-4,
                       optimizer="adamw", weight_decay_rate=0.01,
                       distribution_strategy="one_device",
                       num_gpus=0, tpu=None, use_tpu=False, tpu_name=None, dtype="float32",
                       seed=None)
    context = prepare(options)
    assert context.vocab_file == os.path.join(hf_dir, "vocab.txt")
    assert (context.config.hidden_size, context.config.num_hidden_layers) == (32, 2)
    assert context.config.hidden_act == "gelu_exact"
    model, _ = build_model(context, options, lambda encoder: BertClassifier(encoder, 3))
    report = warm_start_fn(options)(hf_dir, model)
    assert sorted(report.newly_initialized) == ["classifier/bias", "classifier/kernel"], report
    reference, _, _ = load_huggingface(hf_dir)
    encoder = reference.encoder if hasattr(reference, "encoder") else reference
    want = {v.path: v.numpy() for v in encoder.weights}
    got = {v.path: v.numpy() for v in model.encoder.weights}
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_restore_skips_a_corrupt_newest_checkpoint_with_a_warning(tmp_path, caplog):
    """run_classifier, run_tagging and run_squad (eval/predict without --do_train) restore
    the newest readable checkpoint of --output_dir: a truncated newest one is skipped."""
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    model = BertSpanLabeler(BertEncoder(config))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path),
                                         max_to_keep=None)
    manager.save(checkpoint_number=10)
    want = [v.numpy() for v in model.weights]
    for variable in model.weights:
        variable.assign(variable + 1.0)
    manager.save(checkpoint_number=20)
    data_file = tmp_path / "ckpt-20.data-00000-of-00001"
    data_file.write_bytes(data_file.read_bytes()[:40])  # truncated, as by a full disk

    fresh = BertSpanLabeler(BertEncoder(config))
    options = types.SimpleNamespace(output_dir=str(tmp_path), init_checkpoint=None,
                                    do_lower_case=True)
    with caplog.at_level(logging.WARNING):
        step = restore_trained(options, fresh, "f1")
    assert step == 10
    for expected, variable in zip(want, fresh.weights, strict=True):
        np.testing.assert_array_equal(variable.numpy(), expected, err_msg=variable.path)
    assert any(f"Checkpoint {tmp_path}/ckpt-20 cannot be restored" in r.getMessage()
               and "falling back to the previous checkpoint" in r.getMessage()
               for r in caplog.records)


def _training_options(pretrained_dir, tmp_path, **overrides):
    return _options(pretrained_dir, tmp_path, trainable_encoder=True, optimizer="adamw",
                    distribution_strategy="one_device", num_gpus=0, tpu=None, use_tpu=False,
                    tpu_name=None, dtype="float32", seed=None, **overrides)


def test_resuming_with_other_settings_is_refused_naming_them(tmp_path, pretrained_dir):
    """A run resuming --output_dir's checkpoints must have the labels, length, casing, model
    and vocabulary of the run that wrote them; the refusal changes nothing there."""
    options = _training_options(pretrained_dir, tmp_path)
    context = prepare(options)
    check_resume(context, options, "run_classifier", "sst-2", ["0", "1"])
    record = (tmp_path / RUN_RECORD).read_text()
    assert '"labels": [\n    "0",\n    "1"\n  ]' in record
    tf.train.Checkpoint(step=tf.Variable(1)).save(str(tmp_path / "ckpt"))  # ckpt-1
    check_resume(context, options, "run_classifier", "sst-2", ["0", "1"])  # The same run.

    changed = _training_options(pretrained_dir, tmp_path, max_seq_length=32)
    with pytest.raises(FlagValueError) as e:
        check_resume(prepare(changed), changed, "run_classifier", "sst-2", ["0", "1", "2"])
    assert str(e.value) == (
        f"--output_dir={tmp_path} holds checkpoints of another fine-tuning run "
        f"({tmp_path / RUN_RECORD}); resuming would mix them: labels=['0', '1'] then, "
        "['0', '1', '2'] now; --max_seq_length=16 then, 32 now. Choose a new --output_dir "
        "(--init_checkpoint may name this one to start from its weights)")
    assert (tmp_path / RUN_RECORD).read_text() == record


def test_a_second_run_on_an_owned_output_dir_is_refused(tmp_path, pretrained_dir):
    """While a fine-tuning run owns --output_dir, the CLI started on it fails with one line
    naming the owner, before it writes anything."""
    import os
    import socket
    import subprocess
    import sys

    options = _training_options(pretrained_dir, tmp_path)
    with owned(prepare(options), options):
        result = subprocess.run(
            [sys.executable, "-m", "bert_tf.run_classifier", "--task_name=sst-2",
             f"--data_dir={tmp_path}", f"--init_checkpoint={pretrained_dir}",
             "--max_seq_length=16", "--do_train", f"--output_dir={tmp_path}"],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"run_classifier: error: --output_dir={tmp_path} is in use by another run (host "
        f"{socket.gethostname()}, pid {os.getpid()}, started ")
    assert sorted(os.listdir(tmp_path)) == [".bert_tf_run.lock"]
    with owned(prepare(options), options):  # Released: the next run takes it.
        pass
