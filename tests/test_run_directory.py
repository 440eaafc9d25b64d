"""The run directory (bert_tf.run_directory): run records, the legacy reader, the one resume
check and casing reader, the lock, and runs of bert_tf 0.1 resumed and fine-tuned by this code.

tests/fixtures/runs_v0_1/ holds run directories as bert_tf 0.1.0 wrote them
(tools/make_run_fixtures.py): pre-training from raw text (default casing) and from cased
records (--do_lower_case=false), a classifier and an embedding run on the raw-text one.
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from bert_tf import run_directory
from bert_tf.config import BertConfig
from bert_tf.run_directory import RunRecord
from command_batch import run_commands

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("run_directory")

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "runs_v0_1")


def _fixture(name):
    return os.path.join(FIXTURE, name)


def test_runs_of_release_0_1_read_as_run_records():
    """The legacy reader: run_pretraining.flags (with bert_config.json and vocab.txt beside
    it), finetuning_run.json and task_info.json become RunRecords."""
    config = BertConfig.from_json_file(_fixture("inputs/bert_config.json")).to_dict()
    vocab = run_directory.tokenizer_digest(_fixture("inputs/vocab.txt"))

    text = run_directory.read_record(_fixture("pretrain_text"))
    assert text == RunRecord(
        job="pretraining", command="run_pretraining", model_config=config,
        tokenizer_sha256=vocab, do_lower_case=True,
        settings={"max_seq_length": 32, "max_predictions_per_seq": 5, "train_batch_size": 4,
                  "gradient_accumulation_steps": 1,
                  "use_next_sentence_label": True, "sentence_order_prediction": False,
                  "span_boundary_objective": False, "full_sentences": False,
                  "pack_sequences": False, "optimizer": "adamw"})
    assert text.source == _fixture("pretrain_text/run_pretraining.flags")
    # Cased records: the run was told --do_lower_case=false (its flagfile: --nodo_lower_case).
    records = run_directory.read_record(_fixture("pretrain_records"))
    assert (records.job, records.do_lower_case, records.settings["max_seq_length"]) == (
        "pretraining", False, 32)

    classifier = run_directory.read_record(_fixture("classifier"))
    assert classifier == RunRecord(
        job="finetuning", command="run_classifier", model_config=config,
        tokenizer_sha256=vocab, do_lower_case=True, task="fixture", labels=["neg", "pos"],
        settings={"max_seq_length": 32, "trainable_encoder": True, "optimizer": "adamw",
                  "train_batch_size": 8})
    assert classifier.accepts_file_sha256
    embed = run_directory.read_record(_fixture("embed"))
    assert embed == RunRecord(job="embedding", command="bert-tf-embed", do_lower_case=True,
                              settings={"max_seq_length": 32})
    assert run_directory.read_record(_fixture("inputs")) is None


def test_one_casing_reader_for_every_kind_of_run(tmp_path):
    assert run_directory.recorded_casing(_fixture("pretrain_text")) == (
        True, "run_pretraining.flags --do_lower_case")
    assert run_directory.recorded_casing(_fixture("pretrain_records")) == (
        False, "run_pretraining.flags --do_lower_case")
    assert run_directory.recorded_casing(_fixture("classifier")) == (
        True, "finetuning_run.json do_lower_case")
    assert run_directory.recorded_casing(_fixture("embed")) == (
        True, "task_info.json do_lower_case")
    # Records pre-trained with the default (true) say nothing of create_pretraining_data's.
    (tmp_path / "run_pretraining.flags").write_text("--input_file=x.tfrecord\n--do_lower_case\n")
    assert run_directory.recorded_casing(tmp_path) == (None, None)
    # The run record wins over every legacy file.
    run_directory.write_record(tmp_path, RunRecord(job="pretraining", command="run_pretraining",
                                                   do_lower_case=False))
    assert run_directory.recorded_casing(tmp_path) == (False, "bert_tf_run.json do_lower_case")


def test_read_flagfile_and_its_malformed_values(tmp_path):
    path = tmp_path / "x.flags"
    path.write_text("--do_lower_case\n--max_seq_length=64\n# comment\n--nodo_lower_case\n"
                    "--other=1\n--nomax_seq_length_extra\n")
    assert run_directory.read_flagfile(str(path), ("do_lower_case", "max_seq_length")) == {
        "do_lower_case": "false", "max_seq_length": "64"}
    (tmp_path / "run_pretraining.flags").write_text("--input_text_file=c.txt\n"
                                                    "--max_seq_length=long\n")
    with pytest.raises(run_directory.RunDirectoryError) as error:
        run_directory.read_record(tmp_path)
    assert str(error.value) == (f"{tmp_path}/run_pretraining.flags: --max_seq_length=long is "
                                "not an integer")


def test_a_record_round_trips_and_a_newer_or_foreign_one_is_named(tmp_path):
    record = RunRecord(job="embedding", command="bert-tf-embed", model_config={"a": 1},
                       tokenizer_sha256="ab" * 32, do_lower_case=False,
                       settings={"pooling": ("cls", "mean"), "normalize": True},
                       init_checkpoint="st/")
    path = run_directory.write_record(tmp_path, record)
    assert path == str(tmp_path / "bert_tf_run.json")
    read = run_directory.read_record(tmp_path)
    assert read == RunRecord(**{**record.__dict__, "settings": {"pooling": ["cls", "mean"],
                                                                "normalize": True}})
    assert read.source == path
    for text, message in ((json.dumps({"job": "embedding", "format": 2}),
                           "format=2 was written by a newer bert_tf"),
                          ('{"job": "serving"}', "not a bert_tf run record"),
                          ("{", "not valid JSON")):
        (tmp_path / "bert_tf_run.json").write_text(text)
        with pytest.raises(run_directory.RunDirectoryError, match=message):
            run_directory.read_record(tmp_path)


def test_resume_problems_name_every_difference_and_skip_what_a_record_lacks(tmp_path):
    recorded = RunRecord(job="finetuning", command="run_classifier",
                         model_config={"hidden_size": 32, "vocab_size": 40},
                         tokenizer_sha256="1" * 64, do_lower_case=True, task="sst-2",
                         labels=["0", "1"], settings={"max_seq_length": 16,
                                                      "train_batch_size": 32})
    wanted = RunRecord(job="finetuning", command="run_tagging",
                       model_config={"hidden_size": 64, "vocab_size": 40},
                       tokenizer_sha256="2" * 64, do_lower_case=False, task="tagging",
                       labels=("0", "1", "2"), settings={"max_seq_length": 16,
                                                         "optimizer": "lamb",
                                                         "trainable_encoder": False})
    assert run_directory.resume_problems(recorded, wanted, "v.txt") == [
        "a run_classifier run then, run_tagging now",
        "task=sst-2 then, tagging now",
        "labels=0,1 then, 0,1,2 now",
        "bert_config hidden_size=32 then, 64 now",
        "the tokenizer differs (sha256 1111111111111111 then, 2222222222222222 now: "
        "--vocab_file=v.txt)",
        "--do_lower_case=true then, false now"]
    # A --time_budget is recorded in seconds and named in the flag's form.
    assert run_directory.resume_problems(
        RunRecord(job="pretraining", settings={"time_budget": 45.0}),
        RunRecord(job="pretraining", settings={"time_budget": 5400.0})) == [
        "--time_budget=45s then, 1h30m now"]
    assert run_directory.resume_problems(
        RunRecord(job="pretraining", settings={"time_budget": "none"}),
        RunRecord(job="pretraining", settings={"time_budget": 60.0})) == [
        "--time_budget=none then, 1m now"]
    # The best checkpoint of a multi-label run is chosen by scores at one threshold.
    assert run_directory.resume_problems(
        RunRecord(job="finetuning", settings={"multi_label": True,
                                              "multi_label_threshold": 0.5}),
        RunRecord(job="finetuning", settings={"multi_label": True,
                                              "multi_label_threshold": 0.3})) == [
        "--multi_label_threshold=0.5 then, 0.3 now"]
    # What one side does not know is not compared (a record of bert_tf 0.1 lacks fields).
    assert run_directory.resume_problems(
        RunRecord(job="pretraining", settings={"max_seq_length": 16}),
        RunRecord(job="pretraining", do_lower_case=True, tokenizer_sha256="3" * 64,
                  settings={"max_seq_length": 16, "pack_sequences": True})) == []
    # finetuning_run.json of bert_tf 0.1.0's first releases held the vocab file's own SHA-256.
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n")
    old = RunRecord(job="finetuning", tokenizer_sha256=hashlib.sha256(
        vocab.read_bytes()).hexdigest().upper(), accepts_file_sha256=True)
    assert run_directory.resume_problems(
        old, RunRecord(job="finetuning", tokenizer_sha256="4" * 64), str(vocab)) != []
    old.tokenizer_sha256 = old.tokenizer_sha256.lower()
    assert run_directory.resume_problems(
        old, RunRecord(job="finetuning", tokenizer_sha256="4" * 64), str(vocab)) == []


def test_check_resume_refuses_with_flags_and_never_invites_deleting(tmp_path, caplog):
    out = tmp_path / "run"
    out.mkdir()
    record = RunRecord(job="embedding", command="bert-tf-embed", do_lower_case=True,
                       settings={"pooling": ["mean"], "normalize": True, "max_seq_length": 32},
                       init_checkpoint="st")
    run_directory.write_record(out, record)
    other = RunRecord(job="embedding", command="bert-tf-embed", do_lower_case=True,
                      settings={"pooling": ["cls"], "normalize": False, "max_seq_length": 16},
                      init_checkpoint="other_st")
    run_directory.check_resume(out, other)  # no checkpoint: a new run, nothing to resume
    (out / "ckpt-3.index").write_bytes(b"")
    with pytest.raises(run_directory.ResumeMismatchError) as error:
        run_directory.check_resume(out, other)
    assert str(error.value) == (
        f"--output_dir={out} holds checkpoints of a run with other settings "
        f"({out}/bert_tf_run.json); resuming would mix them: --max_seq_length=32 then, 16 "
        "now; --normalize=true then, false now; --pooling=mean then, cls now. Rerun with the "
        f"run's settings to resume it, or choose a new --output_dir (--init_checkpoint={out} "
        "starts from its weights)")
    # Another --init_checkpoint is no difference: the run's own checkpoints are resumed.
    with caplog.at_level("WARNING"):
        run_directory.check_resume(out, RunRecord(**{**record.__dict__,
                                                     "init_checkpoint": "other_st"}))
    assert any("--init_checkpoint=other_st is not read" in r.getMessage()
               and "(it started from st), which are resumed" in r.getMessage()
               for r in caplog.records)


def test_model_file_lookup_and_a_run_that_is_still_running(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("encoder.keras", "pretrainer.keras"):
        (run / name).write_bytes(b"")
    assert run_directory.model_file(str(run)) == str(run / "pretrainer.keras")
    (run / "model.keras").write_bytes(b"")
    assert run_directory.model_file(str(run)) == str(run / "model.keras")
    assert run_directory.model_file(str(run / "encoder.keras")) == str(run / "encoder.keras")
    (run / "results.json").write_text("{}")
    with pytest.raises(ValueError, match=r"--model_dir=.*/results.json: expected a run's output "
                                         r"directory or a \.keras file"):
        run_directory.model_file(str(run / "results.json"), flag="--model_dir")
    running = tmp_path / "running"
    with run_directory.RunDirectoryLock(str(running)) as lock:
        (running / "ckpt-1.index").write_bytes(b"")
        with pytest.raises(FileNotFoundError) as error:
            run_directory.model_file(str(running), flag="--model_dir")
        assert str(error.value) == (
            f"--model_dir={running}: found none of model.keras, pretrainer.keras, "
            "encoder.keras; expected the output directory of run_pretraining, run_classifier, "
            "run_squad or run_tagging; its run is still running "
            f"({run_directory.describe_holder(lock._record)}; lock file "
            f"{running}/.bert_tf_run.lock): its models are written when it ends")
    with pytest.raises(FileNotFoundError, match=r"run_tagging$"):
        run_directory.model_file(str(running))  # released: no longer named as running


def test_owning_a_directory_that_stays_untouched_leaves_nothing(tmp_path):
    """Never-destroy round two: a command refused after taking the lock left its output
    directory holding only the lock file."""
    new = tmp_path / "new" / "out"
    with pytest.raises(ValueError, match="refused"):
        with run_directory.owned(str(new)):
            assert os.listdir(new) == [".bert_tf_run.lock"]
            raise ValueError("refused")
    assert not new.exists() and (tmp_path / "new").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with run_directory.owned(str(empty)):
        pass
    assert os.listdir(empty) == []
    # A run that wrote something keeps its directory; the lock file stays, emptied.
    with run_directory.owned(str(new)):
        (new / "results.json").write_text("{}")
    assert sorted(os.listdir(new)) == [".bert_tf_run.lock", "results.json"]
    assert (new / ".bert_tf_run.lock").read_text() == ""
    # Workers of a multi-worker run take no lock.
    with run_directory.owned(str(tmp_path / "worker"), chief=False):
        pass
    assert not (tmp_path / "worker").exists()


def test_a_lock_file_removed_under_a_waiting_opener_is_not_held_twice(tmp_path, monkeypatch):
    """release(remove=True) unlinks the lock file: a run that opened it just before locks a
    file no longer under the name, and must not count as the owner."""
    directory = tmp_path / "run"
    first = run_directory.RunDirectoryLock(str(directory)).acquire()
    stale_fd = os.open(first.path, os.O_RDWR)  # a second run, between its open and its flock
    first.release(remove=True)
    second = run_directory.RunDirectoryLock(str(directory))
    real_open = os.open
    opened = []

    def open_once_stale(path, *args):
        if not opened:
            opened.append(path)
            return stale_fd  # the file opened before the unlink
        return real_open(path, *args)

    monkeypatch.setattr(os, "open", open_once_stale)
    second.acquire()
    monkeypatch.undo()
    assert opened == [second.path]
    assert os.stat(second.path).st_ino == os.fstat(second._fd).st_ino  # the file at the name
    with pytest.raises(run_directory.DirectoryInUseError):
        run_directory.RunDirectoryLock(str(directory)).acquire()
    second.release()


def test_check_writable_makes_nothing_and_names_the_flag(tmp_path):
    run_directory.check_writable(str(tmp_path / "a" / "b"))
    assert os.listdir(tmp_path) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(run_directory.RunDirectoryError,
                       match=f"^--export_dir={tmp_path}/file is a file; expected a directory$"):
        run_directory.check_writable(str(tmp_path / "file"), "--export_dir")


def test_a_lock_file_the_run_did_not_make_is_refused_and_left_as_it_is(tmp_path):
    """Never destroy, round three: a symbolic link in the lock's place had the lock record
    written through it into its target, which release then emptied. A link, a hard link, a
    FIFO, a directory or a file holding something else is refused, naming it; nothing it
    names changes."""
    precious = tmp_path / "notes.txt"
    precious.write_text("my notes\n")
    run = tmp_path / "run"
    run.mkdir()
    lock = run / run_directory.LOCK_FILE
    refusal = (f"--output_dir={run}: its lock file {lock} {{}}; a run locks a file of its own "
               "and never writes through another: remove it (what it names is left as it is), "
               "or choose another --output_dir")
    os.symlink(precious, lock)
    cases = [(lambda: None, f"is a symbolic link (to {precious})")]
    cases.append((lambda: (os.remove(lock), os.link(precious, lock)),
                  "is a hard link (one of 2 names of one file)"))
    cases.append((lambda: (os.remove(lock), os.mkfifo(lock)), "is not a regular file"))
    cases.append((lambda: (os.remove(lock), os.mkdir(lock)), "is a directory"))
    cases.append((lambda: (os.rmdir(lock), lock.write_text("my other notes\n")),
                  "holds something other than a lock record"))
    for make, problem in cases:
        make()
        assert run_directory.lock_holder(run) is None
        with pytest.raises(run_directory.RunDirectoryError) as error:
            with run_directory.owned(str(run)):
                pass
        assert str(error.value) == refusal.format(problem)
        assert precious.read_text() == "my notes\n"
    assert lock.read_text() == "my other notes\n"
    assert sorted(os.listdir(run)) == [run_directory.LOCK_FILE]


def test_owning_an_existing_directory_leaves_no_lock_file_it_made_when_nothing_changed(
        tmp_path):
    """A run refused after taking the lock of a directory that held another run's files (an
    evaluation that cannot read its checkpoint) left a lock file there."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "ckpt-2.index").write_text("x")
    with pytest.raises(ValueError, match="refused"):
        with run_directory.owned(str(run)):
            raise ValueError("refused")
    assert os.listdir(run) == ["ckpt-2.index"]
    # A lock file that was there stays (emptied), as after any run.
    with run_directory.owned(str(run)):
        (run / run_directory.EVAL_ONLY_RESULTS_FILE).write_text("{}\n")
    with run_directory.owned(str(run)):
        pass
    assert sorted(os.listdir(run)) == [run_directory.LOCK_FILE, "ckpt-2.index",
                                       run_directory.EVAL_ONLY_RESULTS_FILE]
    assert (run / run_directory.LOCK_FILE).read_text() == ""


def test_evaluation_only_results_are_added_beside_the_runs_own(tmp_path):
    path = run_directory.append_eval_only_results(tmp_path, {"global_step": 2, "eval": {"a": 1}})
    assert path == str(tmp_path / "eval_only_results.jsonl")
    (tmp_path / "eval_only_results.jsonl").write_text(
        (tmp_path / "eval_only_results.jsonl").read_text().rstrip("\n"))  # an unended line
    run_directory.append_eval_only_results(tmp_path, {"global_step": 4})
    assert [json.loads(line) for line in open(path, encoding="utf-8")] == [
        {"global_step": 2, "eval": {"a": 1}}, {"global_step": 4}]
    assert run_directory.markers(tmp_path) == ["eval_only_results.jsonl"]


def test_checkpoints_of_the_other_backend_are_named_for_resume_and_evaluation(tmp_path):
    assert run_directory.checkpoint_names(tmp_path) == []
    run_directory.check_checkpoints_backend(tmp_path, "jax")  # none: nothing to refuse
    for step in (10, 5):
        (tmp_path / f"ckpt-{step}.npz").write_bytes(b"")
    assert run_directory.checkpoint_names(tmp_path) == ["ckpt-5.npz", "ckpt-10.npz"]
    run_directory.check_checkpoints_backend(tmp_path, "jax")
    with pytest.raises(run_directory.ResumeMismatchError) as error:
        run_directory.check_checkpoints_backend(tmp_path, "tensorflow", evaluating=True)
    assert str(error.value) == (
        f"--output_dir={tmp_path} holds checkpoints of a run on the JAX backend; this "
        "evaluation is on TensorFlow (--backend=tensorflow), which cannot read them. Rerun with "
        "--backend=jax to evaluate them (--init_checkpoint is not read while --output_dir holds "
        "the run's own checkpoints)")
    with pytest.raises(run_directory.ResumeMismatchError, match="whose loop cannot resume them"):
        run_directory.check_resume(tmp_path, RunRecord(job="pretraining"), backend="tensorflow")


def test_stale_temporaries_are_removed_and_nothing_else(tmp_path):
    for name in (".tmp_1_pretrainer.keras", "checkpoint.tmp9f8e", "ckpt-3.index", "checkpoint"):
        (tmp_path / name).write_text("x")
    (tmp_path / "ckpt-3_temp").mkdir()
    (tmp_path / "ckpt-3_temp" / "part").write_text("x")
    # A link of a temporary's name is removed, never followed.
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "file").write_text("x")
    os.symlink(tmp_path / "kept", tmp_path / ".tmp_link")
    # The best weights a killed run was writing, and the ones it replaced (best/ is in place);
    # a user's own directories of such names are theirs.
    for name in ("best", "best.tmp-7", "best.old-7", "best.old-backup", "best.tmp-7x"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(name)
    removed = run_directory.remove_stale_temp_files(str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == [
        ".tmp_1_pretrainer.keras", ".tmp_link", "best.old-7", "best.tmp-7",
        "checkpoint.tmp9f8e", "ckpt-3_temp"]
    assert sorted(os.listdir(tmp_path)) == ["best", "best.old-backup", "best.tmp-7x", "checkpoint",
                                            "ckpt-3.index", "kept"]
    assert os.listdir(tmp_path / "kept") == ["file"]
    assert (tmp_path / "best" / "metrics.json").read_text() == "best"
    # Without best/, only what the keeper moved aside is put back.
    shutil.rmtree(tmp_path / "best")
    assert run_directory.remove_stale_temp_files(str(tmp_path)) == []
    assert not (tmp_path / "best").exists()
    (tmp_path / "best.old-8").mkdir()
    (tmp_path / "best.old-8" / "metrics.json").write_text("best.old-8")
    assert run_directory.remove_stale_temp_files(str(tmp_path)) == []
    assert (tmp_path / "best" / "metrics.json").read_text() == "best.old-8"
    assert (tmp_path / "best.old-backup" / "metrics.json").read_text() == "best.old-backup"


def _write_remote(path, record):
    import tensorflow as tf

    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)  # ram:// appends to an existing file
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(record))


def test_lock_on_a_remote_file_system_refuses_and_takes_over_stale_records():
    import tensorflow as tf

    directory = f"ram://lock_test_{os.getpid()}/out"
    lock = run_directory.RunDirectoryLock(directory, heartbeat_seconds=0.05).acquire()
    path = f"{directory}/{run_directory.LOCK_FILE}"
    record = json.loads(tf.io.gfile.GFile(path).read())
    with pytest.raises(run_directory.DirectoryInUseError,
                       match=rf"is in use by another run \(host {socket.gethostname()}, pid "
                             rf"{os.getpid()}, started {record['start_time']};"):
        run_directory.RunDirectoryLock(directory).acquire()
    time.sleep(1.2)  # the heartbeat moves on (to the second)
    assert json.loads(tf.io.gfile.GFile(path).read())["heartbeat"] > record["heartbeat"]
    lock.release()
    assert not tf.io.gfile.exists(path)

    # Left by a process that is gone: on this host a dead pid, elsewhere an old heartbeat.
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    for stale in ({"host": socket.gethostname(), "pid": dead.pid,
                   "start_time": "2026-01-01T00:00:00Z", "heartbeat": "2099-01-01T00:00:00Z"},
                  {"host": "elsewhere", "pid": 1, "start_time": "2026-01-01T00:00:00Z",
                   "heartbeat": "2026-01-01T00:00:00Z"}):
        _write_remote(path, stale)
        taken = run_directory.RunDirectoryLock(directory).acquire()
        assert json.loads(tf.io.gfile.GFile(path).read())["pid"] == os.getpid()
        taken.release()
    # A live run on another host with a fresh heartbeat keeps it.
    _write_remote(path, {"host": "elsewhere", "pid": 1, "start_time": "x",
                         "heartbeat": run_directory.lock._now()})
    with pytest.raises(run_directory.DirectoryInUseError,
                       match="host elsewhere, pid 1, started x"):
        run_directory.RunDirectoryLock(directory).acquire()


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """A copy of the bert_tf 0.1 runs, and this code's commands run on it in order, in the
    copy (the runs' flagfiles hold paths relative to it), one process: (root, {name: result})."""
    root = tmp_path_factory.mktemp("runs") / "runs_v0_1"
    shutil.copytree(FIXTURE, root)
    (root / "texts.txt").write_text("Alice met Bob in Paris .\n", encoding="utf-8")
    tiny = ["--seed=1", "--steps_per_loop=1", "--jit_compile=false"]
    classify = ["--task_name=fixture", "--text_a_column=sentence", "--label_column=label",
                "--train_file=inputs/train.tsv", "--dev_file=inputs/dev.tsv", "--do_train",
                "--max_seq_length=32", "--train_batch_size=8", "--num_train_epochs=1",
                "--learning_rate=1e-3", "--length_buckets=off", *tiny]
    embed = ["--init_checkpoint=pretrain_text", "--train_file=inputs/pairs.tsv",
             "--output_dir=embed", "--sentence_transformers_dir=-", "--train_batch_size=8",
             "--learning_rate=1e-3", "--save_checkpoints_steps=4", *tiny]
    runs = {
        # Resumed from its own flagfile with other settings: refused by the legacy record.
        "pretrain_other_length": ("bert_tf.cli.pretrain", [
            "--flagfile=pretrain_text/run_pretraining.flags", "--num_train_steps=4",
            "--max_seq_length=16"]),
        "pretrain_resumed": ("bert_tf.cli.pretrain", [
            "--flagfile=pretrain_text/run_pretraining.flags", "--num_train_steps=4"]),
        "classifier_resumed": ("bert_tf.cli.classify", [
            "--flagfile=classifier/run_classifier.flags", "--num_train_epochs=2"]),
        # Case 9: a cased run pre-trained from records, fine-tuned with the default casing.
        "cased_explicit_true": ("bert_tf.cli.classify", [
            *classify, "--init_checkpoint=pretrain_records", "--output_dir=cased_true",
            "--do_lower_case=true"]),
        "cased_default": ("bert_tf.cli.classify", [
            *classify, "--init_checkpoint=pretrain_records", "--output_dir=cased_default"]),
        "extract_cased": ("bert_tf.cli.extract_features", [
            "--input_file=texts.txt", "--output_file=features.jsonl",
            "--init_checkpoint=pretrain_records", "--max_seq_length=16", "--layers=-1"]),
        "embed_other_length": ("bert_tf.cli.embed", [
            *embed, "--num_train_epochs=2", "--max_seq_length=16"]),
        "embed_resumed": ("bert_tf.cli.embed", [*embed, "--num_train_epochs=2",
                                                "--max_seq_length=32"]),
        # Records resumed by this code: its run record keeps the casing it was told.
        "records_resumed": ("bert_tf.cli.pretrain", [
            "--flagfile=pretrain_records/run_pretraining.flags", "--num_train_steps=4"]),
        "cased_from_new_record": ("bert_tf.cli.classify", [
            *classify, "--init_checkpoint=pretrain_records", "--output_dir=cased_new"]),
    }
    results = run_commands(list(runs.values()), cwd=str(root))
    return root, dict(zip(runs, results))


def _error(result):
    return result.stderr.strip().splitlines()[-1]


def _ok(result):
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
def test_release_0_1_pretraining_runs_resume_from_their_flagfiles(resumed):
    root, results = resumed
    assert results["pretrain_other_length"].returncode == 1
    assert _error(results["pretrain_other_length"]) == (
        "run_pretraining: error: --output_dir=pretrain_text holds checkpoints of a run with "
        "other settings (pretrain_text/run_pretraining.flags); resuming would mix them: "
        "--max_seq_length=32 then, 16 now. Rerun with the run's settings to resume it, or "
        "choose a new --output_dir (--init_checkpoint=pretrain_text starts from its weights)")
    _ok(results["pretrain_resumed"])
    run = root / "pretrain_text"
    assert json.loads((run / "results.json").read_text())["global_step"] == 4
    assert {"ckpt-2.index", "ckpt-4.index"} <= set(os.listdir(run))
    record = run_directory.read_record(run)
    assert (record.source, record.do_lower_case, record.settings["max_seq_length"]) == (
        str(run / "bert_tf_run.json"), True, 32)
    assert record.tokenizer_sha256 == run_directory.read_record(
        _fixture("pretrain_text")).tokenizer_sha256


@pytest.mark.slow
def test_release_0_1_fine_tuning_and_embedding_runs_resume(resumed):
    root, results = resumed
    _ok(results["classifier_resumed"])
    # 48 examples / 8 = 6 steps per epoch: the second epoch continued from ckpt-6.
    assert json.loads((root / "classifier" / "results.json").read_text())["global_step"] == 12
    assert "ckpt-12.index" in os.listdir(root / "classifier")
    assert run_directory.read_record(root / "classifier").labels == ["neg", "pos"]

    assert results["embed_other_length"].returncode == 1
    assert _error(results["embed_other_length"]) == (
        "embed: error: --output_dir=embed holds checkpoints of a run with other settings "
        "(embed/task_info.json); resuming would mix them: --max_seq_length=32 then, 16 now. "
        "Rerun with the run's settings to resume it, or choose a new --output_dir "
        "(--init_checkpoint=embed starts from its weights)")
    _ok(results["embed_resumed"])
    summary = json.loads((root / "embed" / "eval_results.json").read_text())
    assert summary["step"] == 8  # 32 pairs / 8 = 4 steps per epoch, from ckpt-4
    record = run_directory.read_record(root / "embed")
    assert record.settings == {"max_seq_length": 32, "pooling": ["mean"], "normalize": True,
                               "train_batch_size": 8}


@pytest.mark.slow
def test_a_cased_run_pre_trained_from_records_keeps_its_casing(resumed):
    """Never-destroy case 9: `create_pretraining_data --do_lower_case=false`, then
    `bert-tf-pretrain --input_file=... --do_lower_case=false`, fine-tuned with the default
    casing: lower-cased silently (run_pretraining.flags was read only for raw-text runs)."""
    root, results = resumed
    result = results["cased_explicit_true"]
    assert result.returncode == 1
    assert _error(result) == (
        "run_classifier: error: --do_lower_case=True contradicts --init_checkpoint="
        "pretrain_records: its run_pretraining.flags --do_lower_case is False, so pass "
        "--do_lower_case=False to tokenize as the model was trained (or leave it unset to use "
        "it)")
    assert not (root / "cased_true").exists()
    _ok(results["cased_default"])
    for name in ("cased_default", "cased_new"):
        info = json.loads((root / name / "task_info.json").read_text())
        assert info["do_lower_case"] is False, name
        assert run_directory.read_record(root / name).do_lower_case is False, name
    _ok(results["records_resumed"])
    assert run_directory.recorded_casing(root / "pretrain_records") == (
        False, "bert_tf_run.json do_lower_case")
    # Feature extraction and export read the run's casing too: the cased tokens are kept.
    _ok(results["extract_cased"])
    line = json.loads((root / "features.jsonl").read_text().splitlines()[0])
    assert [t["token"] for t in line["features"]] == [
        "[CLS]", "Alice", "met", "Bob", "in", "Paris", ".", "[SEP]"]
    from bert_tf.serving.model_dir import load_model_dir

    source = load_model_dir(_fixture("pretrain_records"))
    assert (source.do_lower_case, source.max_seq_length) == (False, 32)
    from bert_tf.interop.sentence_transformers import load_embedder

    assert load_embedder(_fixture("pretrain_records")).do_lower_case is False
    assert load_embedder(_fixture("pretrain_text")).do_lower_case is True


def test_the_fixture_is_what_release_0_1_wrote():
    """The committed runs stay as bert_tf 0.1.0 wrote them: no run record, the legacy files."""
    for name in ("pretrain_text", "pretrain_records", "classifier", "embed"):
        names = set(os.listdir(_fixture(name)))
        assert "bert_tf_run.json" not in names, name
        assert run_directory.has_checkpoint(_fixture(name)), name
    assert "run_pretraining.flags" in os.listdir(_fixture("pretrain_records"))
    assert "finetuning_run.json" in os.listdir(_fixture("classifier"))
