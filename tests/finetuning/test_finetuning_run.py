"""The fine-tuning driver (bert_tf.jobs.finetuning): setting checks, the restore rule."""

import dataclasses
import logging

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.cli.outputs import check_finetuning_dirs
from bert_tf.config import BertConfig
from bert_tf import run_directory
from bert_tf.jobs.finetuning import check_resume, owned, prepare, restore_trained, run_record
from bert_tf.jobs.finetuning_config import FinetuningConfig
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.sections import from_flat
from bert_tf.modeling import BertEncoder, BertSpanLabeler
from bert_tf.training.runtime import on_tensorflow

import zygote


def _job(pretrained_dir, tmp_path, **overrides):
    values = dict(do_train=True, do_eval=False, do_predict=False, output_dir=str(tmp_path),
                  eval_batch_size=8, predict_batch_size=8, num_train_epochs=3.0,
                  warmup_proportion=0.1, save_checkpoints_steps=None, do_lower_case=True,
                  init_checkpoint=str(pretrained_dir), bert_config_file=None, vocab_file=None,
                  max_seq_length=16, export_dir=None, train_batch_size=16,
                  gradient_accumulation_steps=1)
    values.update(overrides)
    return from_flat(FinetuningConfig, **values)


def _check_dirs(job, command=None):
    """check_finetuning_dirs as the commands call it, with the job's values."""
    check_finetuning_dirs(job.output_dir, job.task.init_checkpoint, job.export_dir, command)


@pytest.mark.parametrize("overrides,message", [
    (dict(do_train=False), "at least one of --do_train, --do_eval or --do_predict must be set"),
    (dict(output_dir=None), "--output_dir is required"),
    (dict(eval_batch_size=0), "--eval_batch_size=0 must be >= 1"),
    (dict(num_train_epochs=0.0), "--num_train_epochs=0.0 must be > 0"),
    (dict(gradient_accumulation_steps=0), "--gradient_accumulation_steps=0 must be >= 1"),
    (dict(warmup_proportion=1.5), r"--warmup_proportion=1.5 must be in \[0, 1\]"),
    (dict(warmup_proportion=1.0, lr_schedule="wsd", decay_proportion=0.1),
     "--lr_schedule=wsd decays after warmup: --warmup_proportion=1.0 leaves it no step"),
    (dict(lr_schedule="wsd", decay_proportion=1.5),
     r"--decay_proportion=1.5 must be in \(0, 1\]"),
    (dict(save_checkpoints_steps=0), "--save_checkpoints_steps=0 must be >= 1"),
    (dict(export_dir="."), r"--export_dir=\. exists and is not empty; choose a new version "
                           "directory"),
    (dict(max_seq_length=64), "--max_seq_length=64 exceeds max_position_embeddings=32 in "),
    (dict(init_checkpoint="/models/cased_L-12_H-768_A-12/bert_model.ckpt"),
     "--do_lower_case=True contradicts --init_checkpoint"),
    (dict(init_checkpoint=None), r"--bert_config_file is required \(or an --init_checkpoint "
                                 r"that records its configuration\)"),
    (dict(init_checkpoint="/models/uncased_L-2_H-128_A-2/bert_model.ckpt", vocab_file=__file__),
     r"--init_checkpoint=/models/uncased_L-2_H-128_A-2/bert_model.ckpt does not exist \("),
    # A missing --init_checkpoint was reported as a missing --vocab_file.
    (dict(init_checkpoint="/models/no_such_run/"),
     r"^--init_checkpoint=/models/no_such_run/ does not exist \(expected a run directory, a "
     r"\.keras file, a checkpoint prefix with its \.index file, or a Hugging Face or keras-hub "
     r"directory\)$"),
])
def test_bad_flags_are_named(tmp_path, pretrained_dir, overrides, message):
    with pytest.raises(FlagValueError, match=message):
        prepare(_job(pretrained_dir, tmp_path, **overrides))


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
    job = _job(hf_dir, tmp_path, trainable_encoder=True, learning_rate=1e-4,
               optimizer="adamw", weight_decay_rate=0.01, distribution_strategy="one_device",
               num_gpus=0, tpu=None, use_tpu=False, tpu_name=None, dtype="float32", seed=None)
    context = prepare(job)
    assert context.vocab_file == os.path.join(hf_dir, "vocab.txt")
    assert (context.config.hidden_size, context.config.num_hidden_layers) == (32, 2)
    assert context.config.hidden_act == "gelu_exact"
    model, _ = build_model(context, job, lambda encoder: BertClassifier(encoder, 3))
    # --adam_bias_correction and the Adam constants reach the optimizer (the original's rule,
    # 0.9 / 0.999 / 1e-6 and a clip at 1.0 without them; --clip_norm=0: no clipping).
    for correction, betas, epsilon, clip in ((False, (0.9, None), 1e-6, 1.0),
                                             (True, (0.8, 0.98), 1e-8, 0.0)):
        trainer = dataclasses.replace(job.trainer, adam_bias_correction=correction,
                                      adam_beta1=betas[0], adam_beta2=betas[1],
                                      adam_epsilon=epsilon, clip_norm=clip)
        _, optimizer = build_model(context, dataclasses.replace(job, trainer=trainer),
                                   lambda e: BertClassifier(e, 3), 10)
        assert optimizer.bias_correction is correction
        assert (optimizer.beta_1, optimizer.beta_2) == (betas[0], betas[1] or 0.999)
        assert (optimizer.epsilon, optimizer.clip_norm) == (epsilon, clip or None)
    report = warm_start_fn(job.task.do_lower_case)(hf_dir, model)
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
    job = from_flat(FinetuningConfig, output_dir=str(tmp_path), init_checkpoint=None,
                        do_lower_case=True)
    with caplog.at_level(logging.WARNING):
        step = restore_trained(job, fresh, "f1", on_tensorflow())
    assert step == 10
    for expected, variable in zip(want, fresh.weights, strict=True):
        np.testing.assert_array_equal(variable.numpy(), expected, err_msg=variable.path)
    assert any(f"Checkpoint {tmp_path}/ckpt-20 cannot be restored" in r.getMessage()
               and "falling back to the previous checkpoint" in r.getMessage()
               for r in caplog.records)


def _training_job(pretrained_dir, tmp_path, **overrides):
    return _job(pretrained_dir, tmp_path, trainable_encoder=True, optimizer="adamw",
                distribution_strategy="one_device", num_gpus=0, tpu=None, use_tpu=False,
                tpu_name=None, dtype="float32", seed=None, **overrides)


def test_resuming_with_other_settings_is_refused_naming_them(tmp_path, pretrained_dir):
    """A run resuming --output_dir's checkpoints must have the labels, length, casing, model
    and vocabulary of the run that wrote them; the refusal changes nothing there."""
    job = _training_job(pretrained_dir, tmp_path)
    context = prepare(job)
    record = run_record(context, job, "run_classifier", "sst-2", ["0", "1"])
    check_resume(context, job.output_dir, record)  # No checkpoint yet: nothing to compare.
    run_directory.write_record(tmp_path, record)
    written = (tmp_path / run_directory.RECORD_FILE).read_text()
    assert '"labels": [\n    "0",\n    "1"\n  ]' in written
    tf.train.Checkpoint(step=tf.Variable(1)).save(str(tmp_path / "ckpt"))  # ckpt-1
    check_resume(context, job.output_dir, record)  # The same run.

    changed = _training_job(pretrained_dir, tmp_path, max_seq_length=32)
    context = prepare(changed)
    with pytest.raises(run_directory.ResumeMismatchError) as e:
        check_resume(context, changed.output_dir,
                     run_record(context, changed, "run_classifier", "sst-2", ["0", "1", "2"]))
    assert str(e.value) == (
        f"--output_dir={tmp_path} holds checkpoints of a run with other settings "
        f"({tmp_path / run_directory.RECORD_FILE}); resuming would mix them: labels=0,1 then, "
        "0,1,2 now; --max_seq_length=16 then, 32 now. Rerun with the run's settings to resume "
        f"it, or choose a new --output_dir (--init_checkpoint={tmp_path} starts from its "
        "weights)")
    assert (tmp_path / run_directory.RECORD_FILE).read_text() == written


def test_a_second_run_on_an_owned_output_dir_is_refused(tmp_path, pretrained_dir):
    """While a fine-tuning run owns --output_dir, the CLI started on it fails with one line
    naming the owner, before it writes anything."""
    import os
    import socket
    import subprocess

    from finetuning_helpers import write_sst2

    write_sst2(tmp_path / "data", num_train=32, num_dev=8, num_test=4)
    out = tmp_path / "out"
    job = _training_job(pretrained_dir, out)
    with owned(prepare(job), job.output_dir):
        result = subprocess.run(
            [zygote.shared_python(), "-m", "bert_tf.run_classifier", "--task_name=sst-2",
             f"--data_dir={tmp_path / 'data'}", f"--init_checkpoint={pretrained_dir}",
             "--max_seq_length=16", "--do_train", f"--output_dir={out}"],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        assert sorted(os.listdir(out)) == [".bert_tf_run.lock"]  # the refused run wrote nothing
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"run_classifier: error: --output_dir={out} is in use by another run (host "
        f"{socket.gethostname()}, pid {os.getpid()}, started ")
    # The owner wrote nothing either: giving the directory up leaves nothing behind.
    assert not out.exists()
    with owned(prepare(job), job.output_dir):  # Released: the next run takes it.
        pass


def test_predict_only_from_a_pretraining_run_is_refused_unless_asked(tmp_path, pretrained_dir):
    """Case 6: no fine-tuned weights in --output_dir and a pre-training run as --init_checkpoint
    would predict with a random classifier head."""
    from bert_tf.modeling import BertClassifier

    config = BertConfig.from_json_file(str(pretrained_dir / "bert_config.json"))
    job = from_flat(FinetuningConfig, output_dir=str(tmp_path), do_lower_case=True,
                        init_checkpoint=str(pretrained_dir))
    with pytest.raises(FlagValueError) as e:
        restore_trained(job, BertClassifier(BertEncoder(config), 2), "score",
                        on_tensorflow())
    assert str(e.value).startswith(
        f"--do_eval/--do_predict without --do_train: --output_dir={tmp_path} holds no "
        f"fine-tuned weights and --init_checkpoint={pretrained_dir} has no BertClassifier head "
        "(2 head variables would be random, e.g. ")
    assert str(e.value).endswith("or pass --allow_untrained_head")
    job.task.allow_untrained_head = True
    assert restore_trained(job, BertClassifier(BertEncoder(config), 2), "score",
                           on_tensorflow()) == 0


def test_export_dir_equal_to_output_dir_is_refused_before_training(tmp_path, pretrained_dir):
    """Case 9: the export would have failed after training, losing results.json."""
    out = tmp_path / "out"
    for export_dir in (f"{out}/.", str(tmp_path)):
        with pytest.raises(FlagValueError) as e:
            _check_dirs(_job(pretrained_dir, out, export_dir=export_dir))
        assert str(e.value) == (
            f"--export_dir={export_dir} holds --output_dir={out}, which this run also uses; "
            "writing there would replace it: choose a new directory")
    job = _training_job(pretrained_dir, out, export_dir=str(out / "export" / "1"))
    _check_dirs(job)
    prepare(job)


def test_too_short_max_seq_length_is_refused_before_training(tmp_path, pretrained_dir):
    """Case 10: --max_seq_length=2 trained on [CLS] [SEP] alone, then failed at the end."""
    with pytest.raises(FlagValueError, match=r"^--max_seq_length=2 must be >= 3 \(\[CLS\], at "
                                             r"least one token, \[SEP\]\)$"):
        prepare(_job(pretrained_dir, tmp_path / "out", max_seq_length=2))
    assert not (tmp_path / "out").exists()


def test_a_pretraining_run_is_not_a_fine_tuning_output_dir(tmp_path, pretrained_dir):
    import hashlib
    import shutil

    run = tmp_path / "pretraining_run"
    shutil.copytree(pretrained_dir, run)
    (run / "run_pretraining.flags").write_text("--do_lower_case\n")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()}
    with pytest.raises(FlagValueError, match=r"holds a run of another command \("
                                             r"run_pretraining\.flags\); run_classifier there "
                                             r"would replace its model and files"):
        _check_dirs(_job(pretrained_dir, run), "run_classifier")
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()} == before


def test_casing_recorded_by_a_bert_tf_pretraining_run_is_checked(tmp_path, pretrained_dir):
    """Case 4: a cased raw-text pre-training run (--nodo_lower_case in its flags file) was
    fine-tuned lower-cased without a word. Never-destroy case 9: from records (made cased by
    create_pretraining_data), the run's --do_lower_case=false was not read at all."""
    import shutil

    run = tmp_path / "cased_run"
    shutil.copytree(pretrained_dir, run)
    for flags_text in ("--input_text_file=corpus.txt.gz\n--nodo_lower_case\n",
                       "--input_file=train.tfrecord\n--do_lower_case=false\n"):
        (run / "run_pretraining.flags").write_text(flags_text + "--max_seq_length=16\n")
        with pytest.raises(FlagValueError) as e:
            prepare(_job(run, tmp_path / "out"))  # --do_lower_case=true given
        assert str(e.value) == (
            f"--do_lower_case=True contradicts --init_checkpoint={run}: its "
            "run_pretraining.flags --do_lower_case is False, so pass --do_lower_case=False to "
            "tokenize as the model was trained (or leave it unset to use it)")
        assert not (tmp_path / "out").exists()
        job = _training_job(run, tmp_path / "out", do_lower_case=None)
        prepare(job)
        assert job.task.do_lower_case is False  # unset: the run's casing
    # From records, the default (true) does not say how create_pretraining_data tokenized.
    (run / "run_pretraining.flags").write_text("--input_file=train.tfrecord\n--do_lower_case\n")
    assert run_directory.recorded_casing(run) == (None, None)
    prepare(_training_job(run, tmp_path / "out2", do_lower_case=False))


def test_a_damaged_best_checkpoint_falls_back_to_the_newest(tmp_path, caplog):
    """Case 7: a truncated best/ raised a raw IndexError after training and in every
    predict-only rerun; docs/fine-tuning.md promises the newest readable checkpoint."""
    from bert_tf.training.task_loop import BestModelKeeper

    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    model = BertSpanLabeler(BertEncoder(config))
    BestModelKeeper(model, str(tmp_path), "f1").update(10, {"f1": 0.5})
    for variable in model.weights:
        variable.assign(variable + 1.0)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path),
                               max_to_keep=None).save(checkpoint_number=20)
    want = [v.numpy() for v in model.weights]
    data_file = tmp_path / "best" / "model-10.data-00000-of-00001"
    data_file.write_bytes(data_file.read_bytes()[:40])

    fresh = BertSpanLabeler(BertEncoder(config))
    job = from_flat(FinetuningConfig, output_dir=str(tmp_path), init_checkpoint=None,
                        do_lower_case=True)
    with caplog.at_level(logging.WARNING):
        assert restore_trained(job, fresh, "f1", on_tensorflow()) == 20
    for expected, variable in zip(want, fresh.weights, strict=True):
        np.testing.assert_array_equal(variable.numpy(), expected, err_msg=variable.path)
    assert any(f"The best weights {tmp_path}/best/model-10 cannot be restored" in r.getMessage()
               and "falling back to the newest weights" in r.getMessage()
               for r in caplog.records)
    # After training (fine_tune's end), the model keeps its last weights, untouched.
    keeper = BestModelKeeper(fresh, str(tmp_path), "f1")
    assert keeper.restore() is None
    for expected, variable in zip(want, fresh.weights, strict=True):
        np.testing.assert_array_equal(variable.numpy(), expected, err_msg=variable.path)


def test_resume_checks_batch_size_but_not_vocabulary_line_endings(tmp_path, pretrained_dir):
    """POOR: another --train_batch_size resumed silently (no longer exact); a CRLF copy of the
    same vocabulary was refused."""
    crlf = tmp_path / "vocab_crlf.txt"
    crlf.write_bytes((pretrained_dir / "vocab.txt").read_bytes().replace(b"\n", b"\r\n"))
    out = tmp_path / "out"

    def record_of(job):
        context = prepare(job)
        return context, run_record(context, job, "run_classifier", "sst-2", ["0", "1"])

    job = _training_job(pretrained_dir, out)
    out.mkdir()
    run_directory.write_record(out, record_of(job)[1])
    tf.train.Checkpoint(step=tf.Variable(1)).save(str(out / "ckpt"))
    same = _training_job(pretrained_dir, out, vocab_file=str(crlf))
    context, record = record_of(same)
    check_resume(context, same.output_dir, record)
    # Another batch, or another accumulation, changes what a step is (and which examples the
    # resume skips).
    for change, difference in ((dict(train_batch_size=8), "--train_batch_size=16 then, 8 now"),
                               (dict(gradient_accumulation_steps=2),
                                "--gradient_accumulation_steps=1 then, 2 now")):
        other = _training_job(pretrained_dir, out, **change)
        context, record = record_of(other)
        with pytest.raises(run_directory.ResumeMismatchError,
                           match=f"resuming would mix them: {difference}\\. Rerun with the "
                                 "run's settings"):
            check_resume(context, other.output_dir, record)


def test_a_vocab_file_other_than_the_checkpoints_is_refused(tmp_path, pretrained_dir):
    """POOR: a --vocab_file that differs from the vocab.txt beside --init_checkpoint was used
    silently (every id then picks another token's embedding)."""
    tokens = (pretrained_dir / "vocab.txt").read_text().split("\n")
    shuffled = tmp_path / "other_vocab.txt"
    shuffled.write_text("\n".join(tokens[:5] + tokens[6:7] + tokens[5:6] + tokens[7:]))
    with pytest.raises(FlagValueError) as e:
        prepare(_job(pretrained_dir, tmp_path / "out", vocab_file=str(shuffled)))
    assert str(e.value) == (
        f"--vocab_file={shuffled} differs from {pretrained_dir}/vocab.txt beside "
        f"--init_checkpoint={pretrained_dir}: id 5 is {tokens[6]!r}, not {tokens[5]!r}; the "
        "model's embeddings are indexed by that vocabulary (leave --vocab_file out to use it)")
    # A copy of the same tokens (CRLF) is the same vocabulary.
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes((pretrained_dir / "vocab.txt").read_bytes().replace(b"\n", b"\r\n"))
    prepare(_training_job(pretrained_dir, tmp_path / "out", vocab_file=str(crlf)))


def test_another_commands_fine_tuning_run_is_not_this_ones_output_dir(tmp_path, pretrained_dir):
    """The output rule: run_tagging predicting into a run_classifier directory would load a
    classifier head of the same shapes and replace its model.keras."""
    import hashlib

    run = tmp_path / "classifier_run"
    run.mkdir()
    (run / run_directory.LEGACY_FINETUNING_RECORD).write_text('{"cli": "run_classifier"}\n')
    (run / "run_classifier.flags").write_text("--task_name=sst-2\n")
    (run / "model.keras").write_bytes(b"weights")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()}
    with pytest.raises(FlagValueError) as e:
        _check_dirs(_job(pretrained_dir, run, do_train=False, do_predict=True),
                    "run_tagging")
    assert str(e.value) == (
        f"--output_dir={run} holds a run of another command (run_classifier.flags, "
        "finetuning_run.json: cli='run_classifier'); run_tagging there would replace its model and "
        "files: choose a new --output_dir (--init_checkpoint may name this one)")
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()} == before
    job = _training_job(pretrained_dir, run)
    _check_dirs(job, "run_classifier")
    prepare(job)


def test_results_that_cannot_be_written_say_the_training_is_kept(tmp_path, monkeypatch):
    """A full disk writing results.json (or model.keras) after fine-tuning printed only
    `[Errno 28] No space left on device`."""
    import errno
    import types

    from bert_tf.jobs import finetuning

    (tmp_path / "ckpt-42.index").write_bytes(b"")
    (tmp_path / "ckpt-83.index").write_bytes(b"")

    def full_disk(path, text, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(finetuning, "write_text_atomic", full_disk)
    with pytest.raises(run_directory.TrainedFileError) as error:
        finetuning.write_results(types.SimpleNamespace(chief=True), str(tmp_path), True,
                                 {"global_step": 83}, {"accuracy": 0.5})
    assert str(error.value) == (
        f"{tmp_path}/results.json cannot be written (No space left on device); nothing was "
        f"lost: training is saved in the checkpoint {tmp_path}/ckpt-83. Free space (or fix the "
        "directory) and rerun the same command: it has nothing left to train and writes the "
        "run's models and results")
    # model.keras likewise (the model files before it written).
    monkeypatch.setattr(finetuning.model_files, "copy_model_files", lambda *args: None)
    monkeypatch.setattr(finetuning.checkpointing, "save_keras_model", full_disk)
    context = types.SimpleNamespace(chief=True, runtime=None, config=None, vocab_file=None,
                                    tokenizer=None)
    job = types.SimpleNamespace(output_dir=str(tmp_path), task=None, do_train=True,
                                export_dir=None)
    with pytest.raises(run_directory.TrainedFileError) as error:
        finetuning.write_run_files(context, job, None, "classification", ["a", "b"],
                                   "run_classifier", "--x=1\n", {})
    assert str(error.value).startswith(f"{tmp_path}/model.keras cannot be written (No space "
                                       "left on device); nothing was lost: training is saved "
                                       f"in the checkpoint {tmp_path}/ckpt-83. ")
