"""tools/export_saved_model.py and the run directories it reads; saved_model_cli on the exports."""

import json
import os
import shutil
import subprocess
import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertEncoder, BertPretrainer, BertTokenClassifier
from bert_tf.serving import load_model_dir, write_task_info

import serving_cases as cases
import zygote
from command_batch import run_commands

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("export_cli")

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools", "export_saved_model.py")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _write_tagging_run(run, serving_run):
    """What a run_tagging --output_dir holds, without vocab.txt, in `run`."""
    run.mkdir()
    shutil.copy(serving_run.model_files["tagging"], run / "model.keras")
    cases.tiny_config().to_json_file(str(run / "bert_config.json"))
    write_task_info(str(run), "tagging", do_lower_case=True, max_seq_length=cases.SEQ_LENGTH,
                    labels=cases.TAGS)
    return str(run)


@pytest.fixture
def tagging_run(serving_run, tmp_path):
    return _write_tagging_run(tmp_path / "tagging_run", serving_run)


def _write_bpe_tagging_run(run):
    """A tagging run whose tokenizer is a byte-level BPE tokenizer.json, in `run`; returns the
    tokenizer.json's path."""
    import dataclasses

    from bpe_fixtures import write_tiny_byte_level_tokenizer

    from bert_tf.training.checkpointing import save_keras_model

    run.mkdir()
    tokenizer_json = write_tiny_byte_level_tokenizer(str(run / "tokenizer.json"))
    config = dataclasses.replace(cases.tiny_config(), vocab_size=100)
    save_keras_model(BertTokenClassifier(BertEncoder(config), num_classes=len(cases.TAGS)),
                     str(run / "model.keras"))
    write_task_info(str(run), "tagging", do_lower_case=False, max_seq_length=cases.SEQ_LENGTH,
                    labels=cases.TAGS)
    return tokenizer_json


@pytest.fixture(scope="module")
def tool_runs(serving_run, tmp_path_factory):
    """The tool's runs of this module, one after the other in one process (one TensorFlow
    start-up instead of three; each run starts from the tool's defaults): name -> namespace of
    the run's directory `run`, its `export_dir` and `result` (returncode, stdout, stderr).
    "ids": --signatures=ids from a tagging run without vocab.txt; "bad_buckets":
    --length_buckets=16,x; "bpe_tagging": a byte-level BPE tagging run with the default
    signatures (raw text too)."""
    root = tmp_path_factory.mktemp("tool_runs")
    tagging = _write_tagging_run(root / "tagging_run", serving_run)
    bpe = root / "bpe_tagging_run"
    tokenizer_json = _write_bpe_tagging_run(bpe)
    runs = {
        "ids": (tagging, str(root / "EXPORT" / "1"), ["--signatures=ids"]),
        "bad_buckets": (tagging, str(root / "bad_buckets" / "1"),
                        ["--signatures=ids", "--length_buckets=16,x"]),
        "bpe_tagging": (str(bpe), str(root / "bpe_export" / "1"), [])}
    results = run_commands([(TOOL, [f"--model_dir={run}", f"--export_dir={export_dir}", *flags])
                            for run, export_dir, flags in runs.values()], env=ENV)
    return {name: types.SimpleNamespace(run=run, export_dir=export_dir, result=result,
                                        tokenizer_json=tokenizer_json)
            for (name, (run, export_dir, _)), result in zip(runs.items(), results)}


def test_pretraining_run_directory(serving_run):
    pretraining_run = serving_run.pretraining_run
    source = load_model_dir(pretraining_run)
    assert isinstance(source.model, BertPretrainer)
    assert source.model_file == os.path.join(pretraining_run, "pretrainer.keras")
    assert source.vocab_file == os.path.join(pretraining_run, "vocab.txt")
    assert (source.do_lower_case, source.max_seq_length, source.task_info) == (
        True, cases.SEQ_LENGTH, None)
    encoder = load_model_dir(os.path.join(pretraining_run, "encoder.keras"))
    assert isinstance(encoder.model, BertEncoder)
    assert (encoder.do_lower_case, encoder.max_seq_length) == (True, cases.SEQ_LENGTH)


def test_fine_tuning_run_directory(tagging_run, serving_run):
    source = load_model_dir(tagging_run)
    assert isinstance(source.model, BertTokenClassifier)
    assert source.vocab_file is None
    assert source.task_info.labels == tuple(cases.TAGS)
    assert (source.do_lower_case, source.max_seq_length) == (True, cases.SEQ_LENGTH)
    # A task_info.json that names another task than the model is an error naming both.
    shutil.copy(serving_run.model_files["classifier"], os.path.join(tagging_run, "model.keras"))
    with pytest.raises(ValueError) as error:
        load_model_dir(tagging_run)
    assert str(error.value) == (
        f"{os.path.join(tagging_run, 'task_info.json')}: task='tagging', but "
        f"{os.path.join(tagging_run, 'model.keras')} holds a BertClassifier (a classification "
        "model)")
    # bert-tf-export says so in one line (FlagValueError), not a traceback.
    from bert_tf.jobs.export import ExportConfig, export
    from bert_tf.jobs.flag_checks import FlagValueError

    with pytest.raises(FlagValueError) as error:
        export(ExportConfig(model_dir=tagging_run, export_dir=tagging_run + "_export"))
    assert str(error.value).startswith(f"{os.path.join(tagging_run, 'task_info.json')}: "
                                       "task='tagging', but")


def test_run_directory_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="found none of model.keras, pretrainer.keras, "
                                                "encoder.keras; expected the output directory"):
        load_model_dir(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no such directory or .keras file"):
        load_model_dir(str(tmp_path / "missing"))
    (tmp_path / "model.h5").write_text("")
    with pytest.raises(ValueError, match="expected a run's output directory or a .keras file"):
        load_model_dir(str(tmp_path / "model.h5"))


@pytest.mark.slow
def test_cli_exported_the_pretraining_run_for_fill_mask(serving_run):
    # conftest.py ran the tool on the pre-training run directory; test_signatures.py checks
    # what the export answers.
    written = serving_run.moved_from["fill_mask"]
    assert serving_run.tool_stdout.strip().splitlines()[-1] == written
    export_dir = serving_run.export_dirs["fill_mask"]
    with open(os.path.join(export_dir, "assets.extra", "bert_tf_export.json")) as f:
        info = json.load(f)
    # Casing and length come from run_pretraining.flags, the buckets from --length_buckets.
    assert info == {"model": "BertPretrainer", "task": "fill_mask",
                    "max_seq_length": cases.SEQ_LENGTH, "length_buckets": [8, 16, 32],
                    "do_lower_case": True, "signatures": {
                        "serving_default": ["input_mask", "input_type_ids", "input_word_ids",
                                            "masked_lm_positions"],
                        "serve_text": ["text"], "serve_examples": ["examples"]}}
    # Only numbered version directories are left beside it.
    assert os.listdir(os.path.dirname(export_dir)) == ["1"]


def _saved_model_cli_run(command, export_dir, features, out_dir):
    inputs = []
    for name, value in features.items():
        path = os.path.join(out_dir, f"{name}.npy")
        np.save(path, value)
        inputs.append(f"{name}={path}")
    result = subprocess.run(command + [
        "run", "--dir", export_dir, "--tag_set", "serve", "--signature_def", "serving_default",
        "--inputs", ";".join(inputs), "--outdir", out_dir, "--overwrite"],
        capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    return {name[:-4]: np.load(os.path.join(out_dir, name)) for name in os.listdir(out_dir)
            if name.endswith(".npy") and name[:-4] not in features}


@pytest.mark.slow
def test_cli_id_export_runs_in_saved_model_cli(tool_runs, serving_run, python_tok, tmp_path):
    # The run directory has no vocab.txt: fine for token ids.
    export_dir, result = tool_runs["ids"].export_dir, tool_runs["ids"].result
    assert result.returncode == 0, result.stderr[-3000:]

    # The id signature is plain TensorFlow: the stock saved_model_cli runs it.
    out_dir = str(tmp_path / "cli_out")
    os.makedirs(out_dir)
    features = cases.ids_inputs(python_tok, "tagging")
    got = _saved_model_cli_run(["saved_model_cli"], export_dir, features, out_dir)
    expected = serving_run.model("tagging")(features).numpy()
    assert sorted(got) == ["logits"]
    np.testing.assert_allclose(got["logits"], expected, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_saved_model_cli_with_tf_text_ops_on_a_full_export(serving_run, python_tok, tmp_path):
    # The graph of a text-signature export names tf-text ops, which saved_model_cli only knows
    # once tensorflow_text is imported (the README's command).
    command = [zygote.shared_python(), "-c", "import tensorflow_text; from tensorflow.python.tools "
               "import saved_model_cli; saved_model_cli.main()"]
    features = cases.ids_inputs(python_tok, "classifier")
    got = _saved_model_cli_run(command, serving_run.export_dirs["classifier"], features,
                               str(tmp_path))
    expected = serving_run.model("classifier")(features).numpy()
    np.testing.assert_allclose(got["logits"], expected, rtol=0, atol=1e-5)


def test_cli_length_buckets_must_be_integers(tool_runs):
    result = tool_runs["bad_buckets"].result
    assert result.returncode != 0
    assert ("--length_buckets=16,x: 'x' is not a length; expected auto, off or increasing "
            "integers like 16,32,64,128") in result.stderr
    assert not os.path.exists(os.path.dirname(tool_runs["bad_buckets"].export_dir))


def test_cli_bpe_tagging_run_exports_raw_text_signatures(tool_runs):
    """A tagging run whose tokenizer is a byte-level BPE tokenizer.json exports serve_text too:
    words (punctuation apart) with their labels and character offsets."""
    runs = tool_runs["bpe_tagging"]
    assert runs.result.returncode == 0, runs.result.stderr[-2000:]
    served = tf.saved_model.load(runs.export_dir)
    assert sorted(served.signatures) == ["serve_examples", "serve_text", "serving_default"]
    got = served.signatures["serve_text"](text=tf.constant(["Anna met Bo in Oslo."]))
    assert int(got["num_tokens"][0]) == 6
    assert [t.decode() for t in got["tokens"][0].numpy()] == ["Anna", "met", "Bo", "in", "Oslo",
                                                              "."]
    assert got["start_offsets"][0].numpy().tolist() == [0, 5, 9, 12, 15, 19]
    assert {l.decode() for l in got["labels"][0].numpy()} <= set(cases.TAGS)
