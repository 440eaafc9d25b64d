"""A run is never lost or silently corrupted: exact resume with dropout after kill -9, numeric
flags refused up front, one run per --output_dir, resume compatibility checks."""

import copy
import json
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.jobs import flag_checks
from bert_tf.config import BertConfig
from bert_tf.cli import pretrain as pretrain_cli
from bert_tf.jobs.pretraining import FlagValueError, pretrain
from bert_tf.jobs.sections import from_flat, sections_of
from bert_tf import run_directory
from file_digests import digest
import zygote
from test_run_pretraining import FLAGS, P, S, _job, write_dropout_inputs

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def setup(tmp_path):
    """Tiny records, vocabulary and a config with BERT's dropout 0.1."""
    return (tmp_path, *write_dropout_inputs(tmp_path))


def _flag_values(*args):
    """The config of parsed run_pretraining flags (a private copy of FLAGS), and their
    flagfile text."""
    flag_values = copy.deepcopy(FLAGS)
    flag_values(["run_pretraining", *args])
    return pretrain_cli.pretraining_config(flag_values), flag_values.flags_into_string()


@pytest.mark.parametrize("overrides, message", [
    (dict(learning_rate=float("nan")), "--learning_rate=nan must be >= 0 and finite"),
    (dict(learning_rate=float("inf")), "--learning_rate=inf must be >= 0 and finite"),
    (dict(learning_rate=-1e-4), "--learning_rate=-0.0001 must be >= 0 and finite"),
    (dict(weight_decay_rate=float("nan")),
     "--weight_decay_rate=nan must be >= 0 and finite"),
    (dict(masked_lm_prob=1.5), "--masked_lm_prob=1.5 must be in (0, 1]"),
    (dict(masked_lm_prob=0.0), "--masked_lm_prob=0.0 must be in (0, 1]"),
    # A decay of 1 never moves its moment; the corrected step would divide by 1 - 1^t = 0.
    (dict(adam_beta2=1.0), "--adam_beta2=1.0 must be in [0, 1)"),
    (dict(adam_beta1=-0.1), "--adam_beta1=-0.1 must be in [0, 1)"),
    (dict(adam_epsilon=0.0), "--adam_epsilon=0.0 must be > 0 and finite"),
    (dict(clip_norm=float("inf")), "--clip_norm=inf must be >= 0 and finite"),
])
def test_non_finite_and_negative_numeric_flags_refused_up_front(setup, overrides, message):
    tmp_path, config_path, _ = setup
    with pytest.raises(FlagValueError) as error:
        pretrain(_job(tmp_path, config_path, output_dir=str(tmp_path / "out"), **overrides))
    assert str(error.value) == message
    assert not (tmp_path / "out").exists()


def test_resume_with_other_settings_refused_and_directory_unchanged(setup):
    tmp_path, config_path, vocab = setup
    out = tmp_path / "out"
    base = [f"--bert_config_file={config_path}", f"--input_file={tmp_path}/train-0.tfrecord",
            f"--output_dir={out}", f"--vocab_file={vocab}", f"--max_seq_length={S}",
            f"--max_predictions_per_seq={P}", "--train_batch_size=8", "--do_train", "--seed=1",
            "--num_train_steps=2", "--num_warmup_steps=1", "--steps_per_loop=2",
            "--dtype=float32", "--nodo_lower_case"]
    pretrain(*_flag_values(*base))
    before = digest(out)
    assert {"ckpt-2.index", "bert_config.json", "vocab.txt", "run_pretraining.flags",
            "bert_tf_run.json"} <= set(before)

    wider = BertConfig.from_json_file(str(config_path)).replace(intermediate_size=128)
    wider.to_json_file(str(tmp_path / "wider.json"))
    lines = vocab.read_text().splitlines()
    reordered = tmp_path / "reordered.txt"
    reordered.write_text("\n".join(lines[:5] + lines[6:] + lines[5:6]) + "\n")  # same size

    def tokens(path):
        return run_directory.tokenizer_digest(str(path))[:16]

    cases = [
        ([f"--bert_config_file={tmp_path}/wider.json"],
         "bert_config intermediate_size=64 then, 128 now"),
        ([f"--vocab_file={reordered}"],
         f"the tokenizer differs (sha256 {tokens(vocab)} then, {tokens(reordered)} now: "
         f"--vocab_file={reordered})"),
        (["--do_lower_case"], "--do_lower_case=false then, true now"),
        (["--max_seq_length=20"], f"--max_seq_length={S} then, 20 now"),
        (["--max_predictions_per_seq=3"], f"--max_predictions_per_seq={P} then, 3 now"),
        # Another batch size resumed silently: a step would no longer mean the same examples.
        (["--train_batch_size=4"], "--train_batch_size=8 then, 4 now"),
        # Another objective: the checkpoint's heads are not the model's.
        (["--nouse_next_sentence_label"], "--use_next_sentence_label=true then, false now"),
    ]
    for change, problem in cases:
        with pytest.raises(run_directory.ResumeMismatchError) as error:
            pretrain(*_flag_values(*base, "--num_train_steps=4", *change))
        assert str(error.value) == (
            f"--output_dir={out} holds checkpoints of a run with other settings "
            f"({out}/bert_tf_run.json); resuming would mix them: {problem}. Rerun with the "
            "run's settings to resume it, or choose a new --output_dir (--init_checkpoint="
            f"{out} starts from its weights)"), change
        assert digest(out) == before, change

    # The same settings resume; what a killed run left half-written is cleaned up first.
    for name in (".tmp_123_pretrainer.keras", "checkpoint.tmp9f8e7d"):
        (out / name).write_text("partial")
    (out / "ckpt-3_temp").mkdir()
    (out / "ckpt-3_temp" / "part-00000-of-00001.index").write_text("partial")
    # A CRLF copy of the vocabulary is the same vocabulary.
    crlf = tmp_path / "vocab_crlf.txt"
    crlf.write_bytes(vocab.read_bytes().replace(b"\n", b"\r\n"))
    results = pretrain(*_flag_values(*base, "--num_train_steps=4", f"--vocab_file={crlf}"))
    assert results["global_step"] == 4
    left = set(os.listdir(out))
    assert not {".tmp_123_pretrainer.keras", "checkpoint.tmp9f8e7d", "ckpt-3_temp"} & left


_HOLDER = textwrap.dedent("""
    import sys, time
    from bert_tf.run_directory import RunDirectoryLock
    RunDirectoryLock(sys.argv[1]).acquire()
    print("HOLDING", flush=True)
    time.sleep(600)
""")


@pytest.mark.slow
def test_second_run_on_a_directory_refused_and_killed_owner_taken_over(setup, caplog):
    tmp_path, config_path, _ = setup
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HOLDING"
        record = json.loads((out / run_directory.LOCK_FILE).read_text())
        assert (record["host"], record["pid"]) == (socket.gethostname(), holder.pid)
        flagfile = tmp_path / "second.flags"
        flagfile.write_text("\n".join([
            f"--bert_config_file={config_path}", f"--input_file={tmp_path}/train-0.tfrecord",
            f"--output_dir={out}", f"--max_seq_length={S}", f"--max_predictions_per_seq={P}",
            "--train_batch_size=8", "--do_train", "--num_train_steps=2",
            "--num_warmup_steps=1"]) + "\n")
        # Forked from the worker's server for env where one runs (tests/zygote.py): the
        # refusal needs no interpreter of its own.
        second = subprocess.run([zygote.shared_python(env), "-m", "bert_tf.run_pretraining",
                                 f"--flagfile={flagfile}"], env=env, capture_output=True,
                                text=True, timeout=300)
        assert second.returncode == 1, second.stderr[-3000:]
        assert (f"run_pretraining: error: --output_dir={out} is in use by another run (host "
                f"{socket.gethostname()}, pid {holder.pid}, started {record['start_time']}; "
                f"lock file {out}/{run_directory.LOCK_FILE}): wait for it to end, stop it, or "
                "choose another --output_dir") in second.stderr
        assert sorted(os.listdir(out)) == [run_directory.LOCK_FILE]  # it wrote nothing
    finally:
        holder.kill()
        holder.wait()
    # The kernel dropped the killed holder's lock: the next run takes the directory over.
    lock = run_directory.RunDirectoryLock(str(out)).acquire()
    assert json.loads((out / run_directory.LOCK_FILE).read_text())["pid"] == os.getpid()
    assert any("Taking over" in r.getMessage() and f"pid {holder.pid}" in r.getMessage()
               for r in caplog.records)
    lock.release()


# run_pretraining's CLI in a process with 2 logical CPUs: --distribution_strategy=mirrored
# then trains on 2 replicas.
_TWO_REPLICA_CLI = textwrap.dedent("""
    import os
    import sys
    with open(sys.argv.pop(1), "w") as f:  # the pid a kill -9 goes to
        f.write(str(os.getpid()))
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from bert_tf import run_pretraining
    sys.argv = ["run_pretraining"] + sys.argv[1:]
    run_pretraining.run()
""")


def _checkpoint_steps(directory):
    return sorted(int(p.name[len("ckpt-"):-len(".index")]) for p in directory.glob("ckpt-*.index"))


def _read_checkpoint(prefix):
    """Every tensor but the object graph, the count of saves and the wall-clock seconds the run
    spent; fails on a truncated one."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and not name.startswith(
                ("save_counter", "run_state/seconds_spent"))}


def _temp_steps(directory):
    """Steps whose checkpoint TensorFlow is writing (its shards go to ckpt-<n>_temp/ first)."""
    return [int(p.name[len("ckpt-"):-len("_temp")]) for p in directory.glob("ckpt-*_temp")]


@pytest.mark.slow
def test_killed_runs_with_dropout_on_two_replicas_end_with_the_uninterrupted_weights(setup):
    """Dropout 0.1, 2 accumulated micro-batches, 2 mirrored replicas, a checkpoint every step:
    kill -9 as soon as a save at a random step is seen in progress, then kill -9 a few ms after
    another random step's save, restarting the same command each time; the final checkpoint
    equals an uninterrupted run's bit for bit (same compiled step, same CPU, same inputs and
    dropout masks: nothing may round differently, so the tolerance is 0)."""
    tmp_path, config_path, _ = setup
    total = 24
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    # Forked from the worker's server that imported TensorFlow (tests/zygote.py); the kills go
    # to the forked process itself (its pid file), which dies at once as a process of its own.
    python = zygote.shared_python(env)
    if python == sys.executable:
        python = zygote.shared_python(env)

    def command(output_dir, steps_per_loop, save_checkpoints_steps):
        flagfile = tmp_path / f"{output_dir.name}.flags"
        flagfile.write_text("\n".join([
            f"--bert_config_file={config_path}", f"--input_file={tmp_path}/train-0.tfrecord",
            f"--output_dir={output_dir}", f"--max_seq_length={S}",
            f"--max_predictions_per_seq={P}", "--train_batch_size=8", "--learning_rate=5e-3",
            "--num_warmup_steps=5", "--seed=1", "--do_train", f"--num_train_steps={total}",
            "--gradient_accumulation_steps=2", "--distribution_strategy=mirrored",
            "--dtype=float32", f"--steps_per_loop={steps_per_loop}",
            f"--save_checkpoints_steps={save_checkpoints_steps}"]) + "\n")
        return [python, "-c", _TWO_REPLICA_CLI, str(tmp_path / f"{output_dir.name}.pid"),
                f"--flagfile={flagfile}"]

    straight = tmp_path / "straight"
    # The uninterrupted run goes alongside the interrupted ones.
    straight_log = open(tmp_path / "straight.log", "w")
    straight_proc = subprocess.Popen(command(straight, 8, total), env=env,
                                     stdout=subprocess.DEVNULL, stderr=straight_log)
    out = tmp_path / "interrupted"
    interrupted = command(out, 4, 1)
    rng = random.Random(7)
    reached = 0
    killed_mid_save = []
    try:
        for mid_save in (True, False):
            target = reached + rng.randint(3, 7)
            log = tmp_path / f"run-{reached}.log"
            with open(log, "w") as stderr:
                proc = subprocess.Popen(interrupted, env=env, stdout=subprocess.DEVNULL,
                                        stderr=stderr)
                try:
                    deadline = time.time() + 300
                    while True:
                        assert proc.poll() is None, log.read_text()[-3000:]
                        assert time.time() < deadline, f"no checkpoint {target} within 300 s"
                        if mid_save and any(s >= target for s in _temp_steps(out)):
                            break  # busy-polled: the save is still being written
                        if _checkpoint_steps(out) and _checkpoint_steps(out)[-1] >= target + (
                                2 if mid_save else 0):
                            break
                        # Busy-poll (to catch a save in progress) only near the target.
                        if not mid_save or (_checkpoint_steps(out) or [0])[-1] < target - 1:
                            time.sleep(0.005)
                    if not mid_save:
                        time.sleep(rng.uniform(0.0, 0.02))
                    os.kill(int((tmp_path / "interrupted.pid").read_text()), signal.SIGKILL)
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=120)
                finally:
                    proc.kill()
                    proc.wait()
            assert proc.returncode == -signal.SIGKILL
            killed_mid_save.append(bool(_temp_steps(out)))
            latest = tf.train.latest_checkpoint(str(out))
            step = int(latest.rsplit("-", 1)[1])
            assert target - 1 <= step < total
            for kept in _checkpoint_steps(out):
                if kept <= step:  # a later index may be the one the kill interrupted
                    _read_checkpoint(str(out / f"ckpt-{kept}"))
            assert step > reached
            reached = step

        proc = subprocess.run(interrupted, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert not _temp_steps(out)  # what the kills left half-written was cleaned up
        assert straight_proc.wait(timeout=600) == 0, (tmp_path / "straight.log").read_text()[-3000:]
    finally:
        straight_proc.kill()
        straight_proc.wait()
        straight_log.close()
    assert ("Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/device:CPU:0'"
            ", '/job:localhost/replica:0/task:0/device:CPU:1')") in proc.stderr
    print("kills that left a checkpoint half-written:", killed_mid_save)
    want = _read_checkpoint(str(straight / f"ckpt-{total}"))
    got = _read_checkpoint(str(out / f"ckpt-{total}"))
    assert set(got) == set(want)
    assert any(name.startswith("rng/") for name in want)  # the dropout generators' states
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.parametrize("values, message", [
    (dict(num_train_epochs=float("inf")), "--num_train_epochs=inf must be > 0 and finite"),
    (dict(warmup_proportion=float("nan")), "--warmup_proportion=nan must be in [0, 1]"),
    (dict(null_score_diff_threshold=float("-inf")),
     "--null_score_diff_threshold=-inf must be a finite number"),
])
def test_fine_tuning_float_flags_refused(values, message):
    # The fine-tuning CLIs call the same check, on their config's sections, first in their
    # validation.
    from bert_tf.jobs.finetuning_config import SquadConfig

    job = from_flat(SquadConfig, learning_rate=5e-5, **values)
    with pytest.raises(FlagValueError) as error:
        flag_checks.check_numeric_flags(*sections_of(job))
    assert str(error.value) == message
