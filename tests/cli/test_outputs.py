"""The output rule (bert_tf.cli.outputs) and the commands that follow it: no output is an input,
no model directory is written into or holds a file output unless it is the command's own
earlier output, --overwrite replaces only the command's own kind of output, every output
location is checked writable before the work. Directories are hashed before and after."""

import os
import shutil
import subprocess

import pytest
from file_digests import digest

from bert_tf import run_directory
from bert_tf.cli import outputs
from command_batch import run_commands
import zygote

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "ran",
         "on", "mat", "."]
CORPUS = "the cat sat on the mat .\nthe dog ran .\n\na cat ran on a mat .\nthe dog sat .\n"


def tool(name, *flags):
    return subprocess.run([zygote.shared_python(), os.path.join(REPO, "tools", f"{name}.py"),
                           *flags], capture_output=True, text=True, timeout=300, env=ENV)


def last_line(result):
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def _write_corpus(directory):
    (directory / "corpus.txt").write_text(CORPUS)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return directory


@pytest.fixture
def corpus(tmp_path):
    return _write_corpus(tmp_path)


@pytest.fixture(scope="module")
def refused(tmp_path_factory, pretrained_dir):
    """The refusals of the commands that import TensorFlow (seconds each to start), run in one
    process (tests/command_batch.py): (corpus, run, {name: digest before}, {case: result});
    a corpus directory and a copy of the tiny pre-trained run."""
    root = tmp_path_factory.mktemp("refused")
    (root / "corpus").mkdir()
    corpus = _write_corpus(root / "corpus")
    (corpus / "lines.txt").write_text("the cat sat\nthe dog ran\n")
    (corpus / "empty.txt").write_text("")
    run = root / "run"
    shutil.copytree(pretrained_dir, run)
    before = {"corpus": digest(corpus), "run": digest(run)}
    extract = ["--max_seq_length=16", "--layers=-1", f"--init_checkpoint={pretrained_dir}"]
    cases = {
        "extract_into_input": ("extract_features", [
            f"--input_file={corpus / 'lines.txt'}", f"--output_file={corpus}/./lines.txt",
            *extract]),
        "extract_empty": ("extract_features", [
            f"--input_file={corpus / 'empty.txt'}", f"--output_file={corpus / 'out.jsonl'}",
            *extract]),
        "convert_into_own_run": ("convert_checkpoint", [
            "--from=bert_tf", "--to=bert_tf", f"--checkpoint={run}", f"--output_dir={run}/"]),
        "unknown_scheme": ("convert_checkpoint", [
            "--from=bert_tf", "--to=tf1", "--checkpoint=unknownfs://bucket/run",
            f"--output_dir={root / 'out'}"]),
    }
    results = run_commands([(os.path.join(REPO, "tools", f"{name}.py"), args)
                            for name, args in cases.values()])
    return corpus, run, before, dict(zip(cases, results))


# --- The rule itself --------------------------------------------------------------------------

def test_same_file_through_dot_symlink_list_and_glob_is_refused(tmp_path):
    (tmp_path / "x.txt").write_text("x")
    os.symlink(tmp_path / "x.txt", tmp_path / "link.txt")
    for output in (f"{tmp_path}/./x.txt", str(tmp_path / "link.txt"),
                   f"{tmp_path}/y.txt,{tmp_path}/../{tmp_path.name}/x.txt"):
        with pytest.raises(outputs.OutputError, match=r"is also --input_file=.*a command never "
                                                      "writes over its own input"):
            outputs.check_not_inputs({"--output_file": output},
                                     {"--input_file": f"{tmp_path}/*.txt"})
    outputs.check_not_inputs({"--output_file": str(tmp_path / "new.txt")},
                             {"--input_file": f"{tmp_path}/*.txt"})


def test_run_directories_are_recognised(pretrained_dir, tmp_path):
    assert run_directory.markers(pretrained_dir) == ["checkpoint", "ckpt-7.index"]
    assert run_directory.markers(tmp_path) == []
    (tmp_path / ".bert_tf_run.lock").write_text("")
    with pytest.raises(outputs.OutputError, match=exact_start(
            f"--output_dir={tmp_path} holds a training run (.bert_tf_run.lock); a command never "
            "writes into a model directory that is not its own earlier output: choose a new "
            "directory")):
        outputs.check_not_a_model_dir("--output_dir", str(tmp_path))
    outputs.check_not_a_model_dir("--output_dir", str(tmp_path), own=("a training run",))


def exact_start(text):
    import re
    return "^" + re.escape(text)


# --- Case 1: bert-tf-export --overwrite never deletes a run ----------------------------------

@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    """A fine-tuning-like run directory: model.keras of a tiny BertClassifier, a checkpoint
    file and results.json."""
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertClassifier, BertEncoder

    run = tmp_path_factory.mktemp("run_a")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    model = BertClassifier(BertEncoder(config), num_classes=2)
    model.save(str(run / "model.keras"))
    (run / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (run / "results.json").write_text("{}\n")
    (run / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    return run


def test_export_overwrite_never_replaces_a_run_directory(classifier_run, tmp_path):
    run_b = tmp_path / "run_b"
    shutil.copytree(classifier_run, run_b)
    before_a, before_b = digest(classifier_run), digest(run_b)
    export = os.path.join(REPO, "tools", "export_saved_model.py")
    common = ["--signatures=ids", "--overwrite"]
    export_dir = tmp_path / "EXPORT" / "1"
    # One process (tests/command_batch.py): the refusals, then an export made and replaced.
    into_b, into_a, into_input, first, second = run_commands([
        (export, [f"--model_dir={classifier_run}", f"--export_dir={run_b}", *common]),
        (export, [f"--model_dir={classifier_run}", f"--export_dir={classifier_run}", *common]),
        (export, [f"--model_dir={classifier_run}/./model.keras",
                  f"--export_dir={classifier_run}", *common]),
        (export, [f"--model_dir={classifier_run}", f"--export_dir={export_dir}", *common]),
        (export, [f"--model_dir={classifier_run}", f"--export_dir={export_dir}", *common]),
    ])
    for result in (into_b, into_a, into_input):
        assert result.returncode != 0
        assert "Traceback" not in result.stderr
    assert digest(run_b) == before_b and digest(classifier_run) == before_a
    # The message names the flag and the run's files (RUN_A itself: it is the input).
    assert (f"--export_dir={run_b} holds a training run (checkpoint, model.keras, "
            "results.json); a command never writes into a model directory that is not its own "
            "earlier output: choose a new directory") in into_b.stderr
    assert (f"--export_dir={classifier_run} holds --model_dir={classifier_run}/./model.keras, "
            "an input of this command") in into_input.stderr

    # An earlier export is replaced with --overwrite, as before.
    for result in (first, second):
        assert result.returncode == 0, result.stderr[-2000:]
    assert "saved_model.pb" in os.listdir(export_dir)
    assert os.listdir(tmp_path / "EXPORT") == ["1"]


def test_export_library_overwrite_replaces_only_an_export(classifier_run, tmp_path):
    import keras

    from bert_tf import serving

    run_b = tmp_path / "run_b"
    shutil.copytree(classifier_run, run_b)
    before = digest(run_b)
    model = keras.saving.load_model(str(classifier_run / "model.keras"), compile=False)
    with pytest.raises(FileExistsError, match=exact_start(
            f"export: {run_b} is not a SavedModel export (it holds checkpoint, model.keras, "
            "results.json, vocab.txt); overwrite replaces only an export")):
        serving.export(model, str(run_b), signatures=("ids",), overwrite=True)
    assert digest(run_b) == before


# --- Case 2: an output that is an input --------------------------------------------------------

def test_build_vocab_output_equal_to_input_is_refused(corpus):
    before = digest(corpus)
    result = tool("build_vocab", f"--input_file={corpus}/*.txt", "--vocab_size=20",
                  f"--output_file={corpus}/./corpus.txt")
    assert result.returncode == 1
    assert last_line(result) == (
        f"build_vocab: error: --output_file={corpus}/./corpus.txt is also --input_file="
        f"{corpus}/corpus.txt ({corpus}/corpus.txt): a command never writes over its own input; "
        "choose another output")
    assert digest(corpus) == before


def test_create_pretraining_data_output_equal_to_an_input_is_refused(corpus):
    before = digest(corpus)
    for output, culprit in ((corpus / "corpus.txt", "--input_file"),
                            (corpus / "vocab.txt", "--vocab_file")):
        result = tool("create_pretraining_data", f"--input_file={corpus / 'corpus.txt'}",
                      f"--output_file={output}", f"--vocab_file={corpus / 'vocab.txt'}",
                      "--max_seq_length=16", "--dupe_factor=1")
        assert result.returncode == 1
        assert last_line(result).startswith(
            f"create_pretraining_data: error: --output_file={output} is also {culprit}=")
    assert digest(corpus) == before


def test_extract_features_output_equal_to_input_is_refused(refused):
    # Through the command: its flags are defined on import (see bert_tf.cli.extract_features).
    corpus, _, before, results = refused
    result = results["extract_into_input"]
    assert result.returncode == 1
    assert last_line(result) == (
        f"extract_features: error: --output_file={corpus}/./lines.txt is also --input_file="
        f"{corpus / 'lines.txt'} ({corpus / 'lines.txt'}): a command never writes over its own "
        "input; choose another output")
    assert digest(corpus) == before["corpus"]


# --- Case 11: one output file named twice ----------------------------------------------------

def test_create_pretraining_data_duplicate_output_through_dot_is_refused(corpus):
    out = corpus / "d"
    out.mkdir()
    result = tool("create_pretraining_data", f"--input_file={corpus / 'corpus.txt'}",
                  f"--output_file={out}/b.tfrecord,{out}/./b.tfrecord",
                  f"--vocab_file={corpus / 'vocab.txt'}", "--max_seq_length=16",
                  "--dupe_factor=1")
    assert result.returncode == 1
    assert last_line(result) == (
        f"create_pretraining_data: error: --output_file={out}/./b.tfrecord names the same file "
        f"as --output_file={out}/b.tfrecord ({out}/b.tfrecord); give each output once")
    assert os.listdir(out) == []


# --- Case 12: an output location that cannot be written --------------------------------------

def _unwritable_dir(tmp_path):
    if os.geteuid() == 0:
        # Root writes through any mode bits; sysfs takes no new files from anyone.
        if not os.path.isdir("/sys") or os.access("/sys", os.W_OK) and _can_create("/sys"):
            pytest.skip("no read-only directory available to root here")
        return "/sys"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return str(locked)


def _can_create(directory):
    try:
        open(os.path.join(directory, ".bert_tf_probe"), "w").close()
    except OSError:
        return False
    os.remove(os.path.join(directory, ".bert_tf_probe"))
    return True


def test_build_vocab_read_only_output_fails_before_learning(corpus, tmp_path):
    directory = _unwritable_dir(tmp_path)
    result = tool("build_vocab", f"--input_file={corpus}/corpus.txt", "--vocab_size=20",
                  f"--output_file={directory}/vocab.txt")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert last_line(result).startswith(
        f"build_vocab: error: --output_file: cannot write in {directory} (")
    assert "Learning" not in result.stderr and "Counted" not in result.stderr


# --- Case 3: convert_checkpoint never writes into a run or over its source -------------------

def test_convert_checkpoint_into_its_own_run_directory_is_refused(refused):
    _, run, before, results = refused
    result = results["convert_into_own_run"]
    assert result.returncode == 1
    assert last_line(result) == (
        f"convert_checkpoint: error: --output_dir={run}/ holds --checkpoint={run}, an input of "
        "this command; writing there would replace it: choose a new directory")
    assert digest(run) == before["run"]


def test_convert_checkpoint_into_another_run_or_foreign_directory_is_refused(pretrained_dir,
                                                                             tmp_path):
    other_run = tmp_path / "other_run"
    shutil.copytree(pretrained_dir, other_run)
    (other_run / ".bert_tf_run.lock").write_text("")
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "config.json").write_text("{}")
    (foreign / "notes.md").write_text("mine")
    with pytest.raises(outputs.OutputError, match=exact_start(
            f"--output_dir={other_run} holds a training run (.bert_tf_run.lock, checkpoint, "
            "ckpt-7.index)")):
        outputs.check_conversion_output_dir(str(other_run), str(pretrained_dir))
    with pytest.raises(outputs.OutputError, match=exact_start(
            f"--output_dir={foreign} holds files no conversion to --to=bert_tf writes "
            "(config.json, notes.md); choose a new or empty directory")):
        outputs.check_conversion_output_dir(str(foreign), str(pretrained_dir))
    with pytest.raises(outputs.OutputError, match=exact_start(
            f"--output_dir={tmp_path} holds --vocab_file={foreign}/../v.txt, an input")):
        outputs.check_conversion_output_dir(str(tmp_path), str(pretrained_dir),
                                            vocab_file=f"{foreign}/../v.txt")
    # An earlier conversion to the same format is replaced with --overwrite only.
    converted = tmp_path / "converted"
    converted.mkdir()
    for name in ("bert_config.json", "encoder.keras", "pretrainer.keras", "vocab.txt"):
        (converted / name).write_text("")
    with pytest.raises(outputs.OutputError, match=exact_start(
            f"--output_dir={converted} holds a conversion to --to=bert_tf (bert_config.json, "
            "encoder.keras, pretrainer.keras, vocab.txt); pass --overwrite to replace it, or "
            "choose a new directory")):
        outputs.check_conversion_output_dir(str(converted), str(pretrained_dir))
    outputs.check_conversion_output_dir(str(converted), str(pretrained_dir), overwrite=True)
    with pytest.raises(outputs.OutputError, match=exact_start(
            f"--output_dir={converted} holds a bert_tf model (encoder.keras, pretrainer.keras); "
            "a command never writes into a model directory that is not its own earlier "
            "output")):
        outputs.check_conversion_output_dir(str(converted), str(pretrained_dir),
                                            to_format="huggingface", overwrite=True)


# --- POOR: one line, not a traceback ----------------------------------------------------------

def test_a_missing_flagfile_is_one_line(tmp_path):
    result = tool("build_vocab", f"--flagfile={tmp_path}/missing.flags")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert last_line(result) == (
        f"build_vocab: error: --flagfile: Unable to open flagfile: [Errno 2] No such file or "
        f"directory: '{tmp_path}/missing.flags'")


def test_an_unsupported_file_system_scheme_is_one_line(refused):
    result = refused[3]["unknown_scheme"]
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert last_line(result).startswith("convert_checkpoint: error: File system scheme "
                                        "'unknownfs' not implemented (file: 'unknownfs://bucket/")


def _run_script(script):
    """`python -c script`, forked from the tests' server (TensorFlow and Keras imported)."""
    return subprocess.run([zygote.shared_python(), "-c", script], capture_output=True,
                          text=True, timeout=120, env=ENV)


def test_disk_full_while_writing_is_one_line():
    """Every command: an OSError (here ENOSPC while writing the final file) ends in one line."""
    script = (
        "import errno, sys\n"
        "from bert_tf import cli\n"
        "def main(argv):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device', '/runs/out/model.keras')\n"
        "sys.argv = ['run_classifier']\n"
        "cli.run(main, 'run_classifier')\n")
    result = _run_script(script)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "run_classifier: error: [Errno 28] No space left on device: '/runs/out/model.keras'")


def test_the_command_error_classes_load_only_when_main_raises():
    """A command's error classes (`errors=`) may live in modules that import Keras, which fixes
    its backend: they load after main has chosen it (they once made every --backend=jax run
    start twice: Keras on TensorFlow, then os.execv under KERAS_BACKEND)."""
    script = (
        "import atexit, sys\n"
        "from bert_tf import cli\n"
        "from bert_tf.config import ConfigError\n"
        "calls = []\n"
        "atexit.register(lambda: print(','.join(calls)))\n"
        "def errors():\n"
        "    calls.append('errors')\n"
        "    return (ConfigError,)\n"
        "def main(argv):\n"
        "    calls.append('main')\n"
        "    raise ConfigError('bert_config.json: hidden_size must be > 0')\n"
        "sys.argv = ['run_pretraining']\n"
        "cli.run(main, 'run_pretraining', errors=errors)\n")
    result = _run_script(script)
    assert result.returncode == 1
    assert result.stdout.strip() == "main,errors"
    assert result.stderr.strip() == (
        "run_pretraining: error: bert_config.json: hidden_size must be > 0")


def test_extract_features_empty_input_is_one_line(refused):
    corpus, _, _, results = refused
    result = results["extract_empty"]
    assert result.returncode == 1
    assert last_line(result) == (f"extract_features: error: --input_file={corpus / 'empty.txt'} "
                                 "is empty; expected one input per line")
    assert not (corpus / "out.jsonl").exists()


def test_prepare_demo_data_never_writes_into_a_run(pretrained_dir, tmp_path):
    run = tmp_path / "demo_run"
    shutil.copytree(pretrained_dir, run)
    before = digest(run)
    result = tool("prepare_demo_data", f"--output_dir={run}", "--dupe_factor=1")
    assert result.returncode == 1
    assert last_line(result) == (
        f"prepare_demo_data: error: --output_dir={run} holds a training run (checkpoint, "
        "ckpt-7.index); a command never writes into a model directory that is not its own "
        "earlier output: choose a new directory")
    assert digest(run) == before


def test_fine_tuning_export_dir_that_cannot_be_written_fails_before_training(tmp_path):
    """Case 12 for the fine-tuning CLIs: the export comes after training, its location is
    checked before."""
    from bert_tf.jobs.flag_checks import FlagValueError

    directory = _unwritable_dir(tmp_path)
    with pytest.raises(FlagValueError) as error:
        outputs.check_finetuning_dirs(str(tmp_path / "out"), export_dir=f"{directory}/export/1")
    assert str(error.value).startswith(f"--export_dir: cannot write in {directory} (")
