"""tools/convert_checkpoint.py end to end: tf1 -> bert_tf -> huggingface, and a clear error."""

import json
import logging
import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file

from bert_tf.config import BertConfig
from bert_tf.interop import load_huggingface, warm_start
from bert_tf.interop.weights import model_arrays
from bert_tf.modeling import BertClassifier, BertEncoder
from command_batch import run_commands
from interop_reference import TINY, original_arrays, write_tf1_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERT = os.path.join(REPO, "tools", "convert_checkpoint.py")
FIXTURE_RUNS = os.path.join(REPO, "tests", "fixtures", "runs_v0_1")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(50)]


@pytest.fixture(scope="module")
def conversions(tmp_path_factory):
    """The tool's runs of this module, one after another in one process (one TensorFlow
    start-up; each run starts from the tool's defaults): tf1 -> bert_tf, that -> huggingface,
    and two refused inputs. Returns (tmp_path, the original arrays, the four results)."""
    tmp_path = tmp_path_factory.mktemp("convert")
    source = tmp_path / "uncased_L-2_H-32_A-4"
    source.mkdir()
    arrays = original_arrays(seed=6, **TINY)
    prefix = write_tf1_checkpoint(source / "bert_model.ckpt", arrays)
    BertConfig(**TINY).to_json_file(str(source / "bert_config.json"))
    (source / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (tmp_path / "empty").mkdir()
    bert_tf_dir = tmp_path / "bert_tf"
    results = run_commands([(CONVERT, flags) for flags in (
        ["--from=tf1", "--to=bert_tf", f"--checkpoint={prefix}", f"--output_dir={bert_tf_dir}",
         "--do_lower_case=true"],
        ["--from=bert_tf", "--to=huggingface", f"--checkpoint={bert_tf_dir}",
         f"--output_dir={tmp_path / 'hf'}"],
        ["--from=tf1", "--to=huggingface", f"--checkpoint={tmp_path / 'none.ckpt'}",
         f"--output_dir={tmp_path / 'out'}"],
        # The loader is shared with the training CLIs; it names this tool's flag (flag=).
        ["--from=bert_tf", "--to=tf1", f"--checkpoint={tmp_path / 'empty'}",
         f"--output_dir={tmp_path / 'out'}"])])
    return tmp_path, arrays, results


@pytest.mark.slow
def test_tf1_to_bert_tf_to_huggingface(conversions):
    tmp_path, arrays, (proc, back, _, _) = conversions
    bert_tf_dir = tmp_path / "bert_tf"
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(bert_tf_dir)) == ["bert_config.json", "encoder.keras",
                                               "pretrainer.keras", "tokenizer_config.json",
                                               "vocab.txt"]
    # The directory works as --init_checkpoint, casing checked.
    classifier = BertClassifier(BertEncoder(BertConfig(**TINY)), num_classes=2)
    report = warm_start(str(bert_tf_dir), classifier, do_lower_case=True)
    assert report.source == str(bert_tf_dir / "pretrainer.keras")
    got = model_arrays(classifier)
    for name, value in arrays.items():
        if name.startswith("bert/"):
            assert np.array_equal(got[name], value), name

    hf_dir = tmp_path / "hf"
    assert back.returncode == 0, back.stderr
    assert json.loads((hf_dir / "config.json").read_text())["architectures"] == [
        "BertForPreTraining"]
    assert json.loads((hf_dir / "tokenizer_config.json").read_text())["do_lower_case"] is True
    assert (hf_dir / "vocab.txt").read_text().split() == VOCAB
    tensors = load_file(str(hf_dir / "model.safetensors"))
    assert np.array_equal(tensors["bert.encoder.layer.1.intermediate.dense.weight"],
                          arrays["bert/encoder/layer_1/intermediate/dense/kernel"].T)
    model, config, _ = load_huggingface(str(hf_dir))
    assert config.hidden_act == "gelu"  # written as "gelu_new": the original's tanh GELU
    assert all(np.array_equal(model_arrays(model)[k], v) for k, v in arrays.items())


@pytest.mark.slow
def test_a_tf1_output_records_the_casing_that_travels_on(conversions):
    """--to=tf1 wrote no record of the casing, so a cased model converted to a TF1 checkpoint
    and given as --init_checkpoint was tokenized lower-cased (a vocab.txt's default). Its
    tokenizer_config.json now says so, as every output's does, and a later conversion reads it
    without --do_lower_case."""
    from bert_tf.interop import checkpoint_casing
    from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint

    tmp_path = conversions[0]
    cased = tmp_path / "hf_cased"
    shutil.copytree(tmp_path / "hf", cased)
    (cased / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    names = convert_checkpoint(ConvertCheckpointConfig(
        from_format="huggingface", to_format="tf1", checkpoint=str(cased),
        output_dir=str(tmp_path / "tf1_cased")))
    assert names == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                     "bert_model.ckpt.index", "tokenizer_config.json", "vocab.txt"]
    prefix = str(tmp_path / "tf1_cased" / "bert_model.ckpt")
    assert checkpoint_casing(prefix) == (False, "tokenizer_config.json do_lower_case")
    convert_checkpoint(ConvertCheckpointConfig(
        from_format="tf1", to_format="huggingface", checkpoint=prefix,
        output_dir=str(tmp_path / "hf_again")))
    assert json.loads((tmp_path / "hf_again" / "tokenizer_config.json").read_text())[
        "do_lower_case"] is False


@pytest.mark.slow
def test_error_is_reported_on_stderr(conversions):
    tmp_path, _, (_, _, proc, _) = conversions
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"convert_checkpoint: error: {tmp_path / 'none.ckpt'}: no config given and no "
        "bert_config.json beside the checkpoint")


@pytest.mark.slow
def test_error_names_this_tools_flag(conversions):
    tmp_path, _, (_, _, _, proc) = conversions
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"convert_checkpoint: error: --checkpoint={tmp_path / 'empty'}: the directory holds no "
        "checkpoint: expected ")


def test_an_original_checkpoint_given_as_bert_tf_names_the_right_format(tmp_path):
    # What --from=bert_tf loads (in-process: the CLI module's flags would clash with other
    # CLIs' in this test process); an original TF1 checkpoint used to end in a traceback about
    # _CHECKPOINTABLE_OBJECT_GRAPH. The CLI says --checkpoint= where this says --init_checkpoint=.
    from bert_tf.interop import InteropError, load_bert_tf

    source = tmp_path / "original"
    source.mkdir()
    write_tf1_checkpoint(str(source / "bert_model.ckpt"), original_arrays(**TINY))
    BertConfig(**TINY).to_json_file(str(source / "bert_config.json"))
    with pytest.raises(InteropError) as raised:
        load_bert_tf(str(source / "bert_model.ckpt"))
    assert str(raised.value) == (
        f"--init_checkpoint={source / 'bert_model.ckpt'} is an original (TF1) BERT or ALBERT "
        "checkpoint, not a bert_tf checkpoint; read it with --from=tf1 (or --from=albert)")


def test_a_fine_tuning_run_directory_converts_as_its_task_model(tmp_path, caplog):
    """--checkpoint=RUN reads the model the run saved (model.keras), as bert_tf.load_model and
    bert-tf-export read a run: the classifier and its label names. It read the encoder of the
    newest checkpoint, without a word; a task model's checkpoint given itself now says so. An
    embedding run converts as its encoder (its pooling has no weights) with the length it
    trained at."""
    from bert_tf.interop import load_bert_tf
    from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint

    for name in ("classifier", "embed"):
        shutil.copytree(os.path.join(FIXTURE_RUNS, name), tmp_path / name)
    run, hf_dir = tmp_path / "classifier", tmp_path / "hf"
    caplog.set_level(logging.INFO, logger="absl")
    convert_checkpoint(ConvertCheckpointConfig(from_format="bert_tf", to_format="huggingface",
                                               checkpoint=str(run), output_dir=str(hf_dir)))
    assert f"Converted {run} (bert_tf, BertClassifier) to huggingface in {hf_dir}" in (
        caplog.messages)
    values = json.loads((hf_dir / "config.json").read_text())
    assert values["architectures"] == ["BertForSequenceClassification"]
    assert values["id2label"] == {"0": "neg", "1": "pos"}
    trained = model_arrays(load_bert_tf(str(run / "model.keras")))
    tensors = load_file(str(hf_dir / "model.safetensors"))
    assert np.array_equal(tensors["classifier.weight"], trained["output_weights"])
    assert np.array_equal(tensors["classifier.bias"], trained["output_bias"])

    # Its best/model-N: the config, vocabulary and casing are the run's (best/ holds only
    # weights and metrics.json); it asked for --bert_config_file.
    from bert_tf.interop import checkpoint_config
    best = run / "best" / "model-6"
    assert checkpoint_config(str(best)).to_dict() == json.loads(
        (run / "bert_config.json").read_text())
    convert_checkpoint(ConvertCheckpointConfig(from_format="bert_tf", to_format="huggingface",
                                               checkpoint=str(best),
                                               output_dir=str(tmp_path / "hf_best")))
    assert sorted(os.listdir(tmp_path / "hf_best")) == [
        "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    assert (tmp_path / "hf_best" / "vocab.txt").read_text() == (run / "vocab.txt").read_text()

    caplog.clear()
    caplog.set_level(logging.WARNING, logger="absl")
    assert type(load_bert_tf(str(run / "ckpt-6"))) is BertEncoder
    assert caplog.messages == [
        f"{run / 'ckpt-6'} is a task model's training checkpoint, which does not record its "
        "head's class: read its encoder only, without the head (the model.keras its run saves "
        "when it ends holds both)"]

    convert_checkpoint(ConvertCheckpointConfig(
        from_format="bert_tf", to_format="huggingface", checkpoint=str(tmp_path / "embed"),
        output_dir=str(tmp_path / "hf_embed")))
    assert json.loads((tmp_path / "hf_embed" / "config.json").read_text())[
        "architectures"] == ["BertModel"]
    # The length the run trained at (its task_info.json: 32), which bert-tf-embed and
    # bert-tf-export read beside an encoder instead of their default 128.
    assert json.loads((tmp_path / "hf_embed" / "sentence_bert_config.json").read_text())[
        "max_seq_length"] == 32
