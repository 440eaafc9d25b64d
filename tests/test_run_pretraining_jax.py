"""bert-tf-pretrain on JAX (--backend=jax): the same flags, inputs and run directory, step-exact
resume after kill -9 with dropout on, several devices and processes, SIGTERM, refusals; the
run's model fine-tunes and exports on TensorFlow.

Each run is a real process with KERAS_BACKEND=jax (Keras fixes its backend at import).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import numpy as np
import pytest

from command_batch import run_commands
from test_run_pretraining import P, S, VOCAB, write_dropout_inputs
import zygote
from no_tensorflow import jax_env

# One worker runs the module: its JAX subprocesses (the module fixture) are built once.
pytestmark = pytest.mark.xdist_group("jax_pretraining")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE_RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "runs_v0_1")
STEPS = 10


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Records, vocabulary and a 1-layer config with BERT's dropout 0.1 (on in training)."""
    directory = tmp_path_factory.mktemp("jax_inputs")
    write_dropout_inputs(directory)
    return directory


def _args(inputs, output_dir, *extra, steps=STEPS):
    return [f"--bert_config_file={inputs / 'bert_config.json'}",
            f"--input_file={inputs / 'train-0.tfrecord'}", f"--vocab_file={inputs / 'vocab.txt'}",
            f"--output_dir={output_dir}", "--do_train", f"--max_seq_length={S}",
            f"--max_predictions_per_seq={P}", "--train_batch_size=8",
            "--gradient_accumulation_steps=2", f"--num_train_steps={steps}",
            "--num_warmup_steps=2", "--save_checkpoints_steps=5", "--log_steps=5",
            "--learning_rate=2e-3", "--seed=3", *extra]


def _env(devices=1):
    return jax_env(TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")


def _pretrain(args, env, **kwargs):
    # A JAX process, forked from a server that imported JAX, Keras and TensorFlow under env
    # (tests/zygote.py): killed, signalled and exiting as the real process would. The server
    # starts at the first run (now=True): each env here serves several runs, and a first run
    # in a fresh interpreter would import everything once more.
    return subprocess.Popen([zygote.shared_python(env, now=True), "-m",
                             "bert_tf.run_pretraining", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def _finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def _checkpoint(run_dir, step):
    """The weights and optimizer state of a checkpoint (not the run's clock)."""
    from bert_tf.training.jax_checkpoints import load_arrays

    return load_arrays(str(run_dir / f"ckpt-{step}.orbax"))


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """An uninterrupted one-device run of STEPS steps."""
    run_dir = tmp_path_factory.mktemp("jax_runs") / "reference"
    code, err = _finish(_pretrain(_args(inputs, run_dir), _env()))
    assert code == 0, err[-3000:]
    (run_dir.parent / "reference.log").write_text(err)
    return run_dir


def test_the_log_holds_progress_and_checkpoints_not_orbax_chatter(reference):
    """Orbax logs about 35 INFO lines per checkpoint (temporary directories, handler
    registries, throughputs); the command's log keeps its own lines only."""
    log = (reference.parent / "reference.log").read_text()
    sources = re.findall(r"^I\d{4} [\d:.]+\s+\d+ (\S+):\d+\] ", log, re.MULTILINE)
    assert sources.count("jax_checkpoints.py") == 2 and "logging_window.py" in sources, log
    orbax_files = {"atomicity.py", "composite_checkpoint_handler.py", "async_io_engine.py",
                   "event_tracking.py", "base_pytree_checkpoint_handler.py"}
    assert not orbax_files & set(sources), log


def test_run_directory_holds_the_usual_files_and_tensorflow_fine_tunes_and_exports_it(
        reference, tmp_path):
    import json

    import keras

    import bert_tf
    from bert_tf import serving
    from bert_tf.modeling import BertClassifier

    for name in ("bert_config.json", "vocab.txt", "run_pretraining.flags", "bert_tf_run.json",
                 "results.json", "encoder.keras", "pretrainer.keras", "ckpt-10.orbax",
                 "ckpt-5.orbax"):
        assert (reference / name).exists(), name
    results = json.loads((reference / "results.json").read_text())
    assert results["global_step"] == STEPS
    assert results["train"]["masked_lm_accuracy"] > 0.5  # learnable records: id 10 + pos % 5
    record = json.loads((reference / "bert_tf_run.json").read_text())
    assert record["settings"]["backend"] == "jax"
    assert os.listdir(reference / "summaries" / "train")

    # This process is TensorFlow: the JAX run's encoder fine-tunes and exports here.
    pretrainer = bert_tf.load_model(str(reference))
    weights = _checkpoint(reference, STEPS)
    table = next(v for k, v in weights.items() if k.endswith("word_embeddings/embeddings"))
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(pretrainer.encoder.word_embeddings.embeddings), table)
    classifier = BertClassifier(pretrainer.encoder, num_classes=2)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3))
    ids = np.random.default_rng(0).integers(5, VOCAB, (16, S)).astype("int32")
    features = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids)}
    labels = (ids[:, 1] % 2).astype("int32")
    history = classifier.fit(features, labels, batch_size=8, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    export_dir = str(tmp_path / "export" / "1")
    serving.export(classifier, export_dir, vocab_file=str(reference / "vocab.txt"),
                   max_seq_length=S, signatures=("ids",))
    import tensorflow as tf

    served = tf.saved_model.load(export_dir).signatures["serving_default"](
        **{k: tf.constant(v[:4]) for k, v in features.items()})
    expected = classifier.predict(features, verbose=0)[:4]
    np.testing.assert_allclose(served["logits"].numpy(), expected, atol=1e-5)


def test_two_devices_take_the_steps_of_one(inputs, reference, tmp_path):
    """The same global batch split over 2 devices (XLA_FLAGS) gives one device's weights and
    losses: dropout on, 2 accumulated micro-batches per step."""
    run_dir = tmp_path / "two_devices"
    code, err = _finish(_pretrain(_args(inputs, run_dir), _env(devices=2)))
    assert code == 0, err[-3000:]
    one, two = _checkpoint(reference, STEPS), _checkpoint(run_dir, STEPS)
    assert sorted(one) == sorted(two)
    for key in one:
        np.testing.assert_allclose(two[key], one[key], atol=1e-5, rtol=1e-5, err_msg=key)
    import json

    losses = [json.loads((d / "results.json").read_text())["train"]["loss"]
              for d in (reference, run_dir)]
    assert losses[1] == pytest.approx(losses[0], abs=1e-5)


def test_kill_9_then_resume_gives_the_uninterrupted_run(inputs, reference, tmp_path):
    """kill -9 once the step-5 checkpoint is written, rerun: the step-10 checkpoint (weights,
    optimizer slots, dropout generators' states) equals the uninterrupted run's."""
    run_dir = tmp_path / "killed"
    proc = _pretrain(_args(inputs, run_dir), _env())
    deadline = time.time() + 300
    while not (run_dir / "ckpt-5.orbax").exists() and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    if not (run_dir / "ckpt-10.orbax").exists():
        assert proc.returncode == -signal.SIGKILL
    for name in os.listdir(run_dir):
        if name.startswith("ckpt-10"):
            # The kill came after the end: resume from step 5 anyway.
            shutil.rmtree(run_dir / name)
    code, err = _finish(_pretrain(_args(inputs, run_dir), _env()))
    assert code == 0, err[-3000:]
    assert "Restored" in err and "ckpt-5.orbax" in err
    resumed, straight = _checkpoint(run_dir, STEPS), _checkpoint(reference, STEPS)
    assert sorted(resumed) == sorted(straight)
    for key in straight:
        np.testing.assert_allclose(resumed[key], straight[key], atol=1e-6, err_msg=key)


def test_a_resume_that_can_read_none_of_its_checkpoints_is_refused(inputs, reference,
                                                                    tmp_path):
    """Every checkpoint damaged: the run is refused naming them and writes nothing (it trained
    a new model into the run's directory before)."""
    import glob

    from file_digests import digest

    run_dir = tmp_path / "damaged"
    shutil.copytree(reference, run_dir)
    for name in glob.glob(str(run_dir / "ckpt-*.orbax" / "state" / "**" / "d" / "*"),
                          recursive=True):
        with open(name, "r+b") as f:
            f.truncate(8)
    before = digest(str(run_dir))
    code, err = _finish(_pretrain(_args(inputs, run_dir), _env()))
    assert code == 1, err[-3000:]
    assert err.strip().splitlines()[-1] == (
        f"run_pretraining: error: none of the checkpoints in {run_dir} could be restored "
        f"({run_dir}/ckpt-5.orbax, {run_dir}/ckpt-10.orbax): the warnings above say why each "
        "was skipped; rerun with the settings of the run that wrote them to resume it, move "
        "them away to start afresh, or choose a new --output_dir")
    assert f"Checkpoint {run_dir}/ckpt-10.orbax cannot be restored (not a readable checkpoint" \
        in err
    assert digest(str(run_dir)) == before


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_together_resume_and_stop_on_sigterm(inputs, tmp_path):
    """Two processes on 127.0.0.1 (jax.distributed) train one run; rerun with more steps,
    SIGTERM to both: each saves the same step's checkpoint and exits 143."""
    run_dir = tmp_path / "two_processes"

    def start(steps):
        port = _free_port()
        return [_pretrain(_args(inputs, run_dir, f"--coordinator_address=127.0.0.1:{port}",
                                "--num_processes=2", f"--process_id={i}", steps=steps),
                          _env()) for i in range(2)]

    results = [_finish(p) for p in start(5)]
    assert [code for code, _ in results] == [0, 0], [err[-2000:] for _, err in results]
    assert sorted(os.listdir(run_dir))[:1] and (run_dir / "ckpt-5.orbax").exists()
    procs = start(100000)
    deadline = time.time() + 300
    # Resumed and training once a checkpoint after step 5 is written.
    while not _saved_after_step_5(run_dir) and time.time() < deadline:
        time.sleep(0.1)
        if any(p.poll() is not None for p in procs):
            break
    for p in procs:
        p.send_signal(signal.SIGTERM)
    results = [_finish(p) for p in procs]
    assert [code for code, _ in results] == [143, 143], [err[-2000:] for _, err in results]
    steps = sorted(int(n[5:-6]) for n in os.listdir(run_dir) if n.endswith(".orbax"))
    assert steps[-1] > 5
    assert all(f"ckpt-{steps[-1]}.orbax" in err for _, err in results)


def _saved_after_step_5(run_dir):
    return any(n.startswith("ckpt-") and n.endswith(".orbax") and n != "ckpt-5.orbax"
               for n in os.listdir(run_dir))


def test_refusals_name_the_flag_and_write_nothing(inputs, tmp_path):
    tf_run = tmp_path / "tensorflow_run"
    shutil.copytree(os.path.join(FIXTURE_RUNS, "pretrain_records"), tf_run)
    env = _env(devices=2)
    command = "bert_tf.run_pretraining"
    runs = run_commands([
        (command, _args(inputs, tmp_path / "a", "--tf_data_service=grpc://x:1")),
        (command, _args(inputs, tmp_path / "b", "--train_batch_size=7")),
        (command, _args(inputs, tmp_path / "c", "--distribution_strategy=mirrored")),
        (command, _args(inputs, tmp_path / "d", "--dtype=mixed_float16")),
        (command, _args(inputs, tf_run, "--max_seq_length=16")),
        (command, _args(inputs, tmp_path / "nan", "--learning_rate=1e30", "--steps_per_loop=1")),
    ], env=env)
    errors = [r.stderr.strip().splitlines()[-1] for r in runs]
    assert [r.returncode for r in runs] == [1] * 6, errors
    assert errors[0] == ("run_pretraining: error: --tf_data_service has no meaning with "
                         "--backend=jax (it feeds TensorFlow's distributed loop)")
    assert errors[1] == ("run_pretraining: error: --train_batch_size=7 does not divide over "
                         "the 2 devices (1 process(es)); use a multiple of 2")
    assert errors[2].startswith("run_pretraining: error: --distribution_strategy=mirrored is a "
                                "tf.distribute setting, which a --backend=jax run does not read")
    assert errors[3].startswith("run_pretraining: error: --dtype=mixed_float16 needs loss "
                                "scaling")
    assert errors[4].startswith(f"run_pretraining: error: --output_dir={tf_run} holds "
                                "checkpoints of a run on the TensorFlow backend; this run is on "
                                "JAX (--backend=jax)")
    assert "NaN" in errors[5] or "non-finite" in errors[5], errors[5]
    assert not any((tmp_path / name).exists() for name in "abcd")
    assert not [n for n in os.listdir(tmp_path / "nan") if n.startswith("ckpt-")]


def _last_line(result):
    return result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""


@pytest.mark.slow
def test_evaluation_and_model_reading_across_backends_never_touch_the_run(inputs, reference,
                                                                          tmp_path):
    """Never destroy, round three, on both backends. An evaluation-only run of the other
    backend's run (with or without --init_checkpoint=OTHER) evaluated OTHER's weights and
    replaced the run's models, results.json and flags; now it is refused naming both backends.
    An evaluation of the run's own backend adds only its results. A TensorFlow run directory
    as --init_checkpoint under JAX ("not trackable") starts from the model its run wrote; a
    JAX run that has only its checkpoints is named as such by embed, convert and classify; a
    lock file that is a link, and a resume with another --gradient_accumulation_steps, are
    refused on JAX."""
    from file_digests import digest

    tf_run, jax_run = tmp_path / "tf_run", tmp_path / "jax_run"
    shutil.copytree(os.path.join(FIXTURE_RUNS, "pretrain_records"), tf_run)
    shutil.copytree(reference, jax_run)
    only_checkpoints = tmp_path / "jax_unfinished"
    shutil.copytree(reference, only_checkpoints,
                    ignore=shutil.ignore_patterns("*.keras", "results.json"))
    linked = tmp_path / "linked"
    shutil.copytree(reference, linked)
    (tmp_path / "notes.txt").write_text("my notes\n")
    os.remove(linked / ".bert_tf_run.lock")
    os.symlink(tmp_path / "notes.txt", linked / ".bert_tf_run.lock")
    before = {run: digest(run) for run in (tf_run, jax_run)}
    evaluate = ("--nodo_train", "--do_eval", "--max_eval_steps=2", "--eval_batch_size=8")
    fixture_records = [f"--input_file={os.path.join(FIXTURE_RUNS, 'records.tfrecord')}",
                       "--bert_config_file=" + os.path.join(FIXTURE_RUNS, "inputs",
                                                            "bert_config.json"),
                       "--max_seq_length=32", "--max_predictions_per_seq=5", *evaluate]
    command = "bert_tf.run_pretraining"
    on_jax = run_commands([
        (command, [f"--output_dir={tf_run}", *fixture_records]),
        (command, [f"--output_dir={tf_run}", f"--init_checkpoint={jax_run}", *fixture_records]),
        (command, _args(inputs, jax_run, *evaluate)),
        (command, [f"--init_checkpoint={tf_run}", f"--output_dir={tmp_path / 'evaluated'}",
                   *fixture_records]),
        (command, _args(inputs, linked, steps=12)),
        (command, _args(inputs, jax_run, "--gradient_accumulation_steps=1", steps=12)),
    ], env=_env())
    on_tensorflow = run_commands([
        (command, _args(inputs, jax_run, *evaluate)),
        (command, _args(inputs, jax_run, f"--init_checkpoint={linked}", *evaluate)),
        (os.path.join(REPO_ROOT, "tools", "embed.py"), [
            f"--init_checkpoint={only_checkpoints}", f"--input_file={inputs / 'vocab.txt'}",
            f"--output_file={tmp_path / 'v.npy'}"]),
        (os.path.join(REPO_ROOT, "tools", "convert_checkpoint.py"), [
            "--from=bert_tf", "--to=huggingface", f"--checkpoint={only_checkpoints}",
            f"--output_dir={tmp_path / 'hf'}"]),
        ("bert_tf.run_classifier", [
            f"--init_checkpoint={only_checkpoints}", f"--output_dir={tmp_path / 'classifier'}",
            f"--train_file={os.path.join(FIXTURE_RUNS, 'inputs', 'train.tsv')}",
            "--text_a_column=sentence", "--label_column=label", "--do_train",
            f"--max_seq_length={S}"]),
    ], env=dict(_env(), KERAS_BACKEND="tensorflow"))

    other = ("--output_dir={run} holds checkpoints of a run on the {then} backend; this "
             "evaluation is on {now} (--backend={backend}), which cannot read them. Rerun with "
             "--backend={written} to evaluate them (--init_checkpoint is not read while "
             "--output_dir holds the run's own checkpoints)")
    for result in on_jax[:2]:
        assert _last_line(result) == "run_pretraining: error: " + other.format(
            run=tf_run, then="TensorFlow", now="JAX", backend="jax", written="tensorflow")
    for result in on_tensorflow[:2]:
        assert _last_line(result) == "run_pretraining: error: " + other.format(
            run=jax_run, then="JAX", now="TensorFlow", backend="tensorflow", written="jax")
    assert digest(tf_run) == before[tf_run]
    # The JAX run's own evaluation: its files as they were, and its results beside them.
    assert on_jax[2].returncode == 0, on_jax[2].stderr[-3000:]
    after = digest(jax_run)
    assert {name: after.get(name) for name in before[jax_run]} == before[jax_run]
    added = sorted(set(after) - set(before[jax_run]))
    assert added[0] == "eval_only_results.jsonl"
    assert all(name.startswith("summaries/eval/") for name in added[1:])
    line = json.loads((jax_run / "eval_only_results.jsonl").read_text())
    assert (line["evaluated"], line["global_step"]) == (str(jax_run / f"ckpt-{STEPS}.orbax"),
                                                        STEPS)
    assert line["eval"]["masked_lm_accuracy"] > 0.5  # the learnable records, trained
    # A TensorFlow run's weights on JAX: its pretrainer.keras, evaluated into a new directory.
    assert on_jax[3].returncode == 0, on_jax[3].stderr[-3000:]
    assert "reading pretrainer.keras, the model its run saved when it ended" in on_jax[3].stderr
    assert sorted(os.listdir(tmp_path / "evaluated")) == [
        ".bert_tf_run.lock", "eval_only_results.jsonl", "summaries"]
    assert _last_line(on_jax[4]) == (
        f"run_pretraining: error: --output_dir={linked}: its lock file "
        f"{linked}/.bert_tf_run.lock is a symbolic link (to {tmp_path / 'notes.txt'}); a run "
        "locks a file of its own and never writes through another: remove it (what it names "
        "is left as it is), or choose another --output_dir")
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"
    assert _last_line(on_jax[5]).startswith(
        f"run_pretraining: error: --output_dir={jax_run} holds checkpoints of a run with other "
        f"settings ({jax_run / 'bert_tf_run.json'}); resuming would mix them: "
        "--gradient_accumulation_steps=2 then, 1 now.")
    assert not (jax_run / "ckpt-12.orbax").exists()
    unfinished = (
        f"holds only training checkpoints of the JAX loop (ckpt-5.orbax, ckpt-10.orbax), which "
        f"only that run reads, to resume (bert-tf-pretrain --backend=jax --output_dir="
        f"{only_checkpoints}); a model starts from the model.keras, pretrainer.keras or "
        "encoder.keras that a run writes when it ends, and this run has not ended: finish it, "
        "then give "
        "{flag}=" + str(only_checkpoints))
    for result, program, flag in ((on_tensorflow[2], "embed", "--init_checkpoint"),
                                  (on_tensorflow[3], "convert_checkpoint", "--checkpoint"),
                                  (on_tensorflow[4], "run_classifier", "--init_checkpoint")):
        assert _last_line(result) == (f"{program}: error: {flag}={only_checkpoints} "
                                      + unfinished.replace("{flag}", flag))
    assert not any((tmp_path / name).exists() for name in ("v.npy", "hf", "classifier"))
