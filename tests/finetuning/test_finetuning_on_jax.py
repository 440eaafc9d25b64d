"""Fine-tuning on Keras' JAX backend: classification, tagging and SQuAD with --backend=jax, the
same flags and run directories as on TensorFlow; the same classification reaches the same dev
accuracy on both backends; the JAX run's model.keras serves under TensorFlow, and its
--export_dir is written by bert-tf-export under TensorFlow."""

import json
import os

import numpy as np
import pytest

from no_tensorflow import jax_env

from command_batch import run_commands
from finetuning_helpers import make_pretrained_dir, write_conll, write_sst2
from test_run_squad import QUERY, STRIDE
from test_run_squad import _flags as squad_flags
from test_run_squad import _write_files as write_squad_files

pytestmark = pytest.mark.xdist_group("jax_finetuning")


def _jax_env():
    return jax_env(TF_CPP_MIN_LOG_LEVEL="2")


def _classify_args(pretrained, data, output_dir):
    # The encoder from the pre-trained model's .keras file, with its config and vocabulary.
    return ["--task_name=sst-2", f"--data_dir={data}",
            f"--init_checkpoint={pretrained / 'pretrainer.keras'}",
            f"--bert_config_file={pretrained / 'bert_config.json'}",
            f"--vocab_file={pretrained / 'vocab.txt'}", "--max_seq_length=16",
            "--train_batch_size=16", "--learning_rate=3e-3", "--num_train_epochs=3",
            "--save_checkpoints_steps=24", "--seed=1", "--do_train", "--do_eval", "--do_predict",
            f"--output_dir={output_dir}"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Classification on both backends, tagging and SQuAD v2.0 on JAX, from one tiny model, and
    a notebook's keras fit on JAX; the JAX runs in one process (tests/command_batch.py), the
    JAX classification and SQuAD runs with --export_dir:
    (root, [TensorFlow classify, JAX fit, classify, tag, squad, refused export])."""
    root = tmp_path_factory.mktemp("jax_finetuning")
    pretrained = root / "pretrained"
    make_pretrained_dir(str(pretrained)).save(str(pretrained / "pretrainer.keras"))
    write_sst2(str(root / "SST-2"))
    write_conll(str(root / "conll"))
    squad = root / "squad"
    squad.mkdir()
    write_squad_files(squad)
    tensorflow = run_commands([("bert_tf.run_classifier", _classify_args(
        pretrained, root / "SST-2", root / "classify_tensorflow"))])
    (root / "fit_on_jax.py").write_text(_FIT_ON_JAX)
    jax = run_commands([
        # First, as in a fresh notebook kernel: nothing has run in the process before it.
        (str(root / "fit_on_jax.py"), []),
        ("bert_tf.run_classifier", _classify_args(pretrained, root / "SST-2",
                                                  root / "classify_jax") + [
            f"--export_dir={root / 'export' / '1'}"]),
        ("bert_tf.run_tagging", [
            f"--data_dir={root / 'conll'}", f"--init_checkpoint={pretrained / 'pretrainer.keras'}",
            f"--bert_config_file={pretrained / 'bert_config.json'}",
            f"--vocab_file={pretrained / 'vocab.txt'}", "--max_seq_length=16",
            "--train_batch_size=16", "--learning_rate=3e-3", "--num_train_epochs=4",
            "--save_checkpoints_steps=1000", "--seed=1", "--do_train", "--do_eval",
            f"--output_dir={root / 'tag_jax'}"]),
        # v2.0 with a threshold, which task_info.json records: the export reads it there.
        ("bert_tf.run_squad", squad_flags(squad, root / "squad_jax", "v2") + [
            "--version_2_with_negative", "--null_score_diff_threshold=1.5",
            f"--export_dir={root / 'squad_export' / '1'}"]),
        ("bert_tf.run_classifier", [a for a in _classify_args(
            pretrained, root / "SST-2", root / "refused") if a != "--do_train"] + [
            f"--export_dir={root / 'refused_export' / '1'}"]),
    ], env=_jax_env())
    return root, tensorflow + jax


def _results(directory):
    with open(directory / "results.json", encoding="utf-8") as f:
        return json.load(f)


def test_classification_reaches_the_same_accuracy_on_both_backends(runs):
    root, results = runs
    for result in (results[0], results[2]):
        assert result.returncode == 0, result.stderr[-3000:]
    tensorflow, jax = (_results(root / f"classify_{b}") for b in ("tensorflow", "jax"))
    assert tensorflow["eval"]["accuracy"] > 0.9 and jax["eval"]["accuracy"] > 0.9
    assert abs(tensorflow["eval"]["accuracy"] - jax["eval"]["accuracy"]) <= 0.01
    assert jax["global_step"] == tensorflow["global_step"] == 48
    record = json.loads((root / "classify_jax" / "bert_tf_run.json").read_text())
    assert record["settings"]["optimizer"] == "adamw"
    names = set(os.listdir(root / "classify_jax"))
    assert {"model.keras", "task_info.json", "test_results.tsv", "SST-2.tsv", "best",
            "ckpt-48.orbax", "eval_results.txt"} <= names, names


def test_the_jax_run_serves_under_tensorflow(runs):
    """This process is TensorFlow: the JAX run's model.keras loads here and predicts what the
    JAX run wrote for the test set, and so does the SavedModel its --export_dir wrote (under
    TensorFlow, in a process of its own) from the test sentences' text."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signatures' tokenizer ops)

    import bert_tf
    from bert_tf.data.tasks import classifier_data, feature_records, glue
    from bert_tf.text import load_tokenizer
    from bert_tf.training import task_loop

    root, _ = runs
    run = root / "classify_jax"
    model = bert_tf.load_model(str(run / "model.keras"))
    examples = glue.read_glue_tsv(glue.glue_task("sst-2"), str(root / "SST-2"), "test")
    tokenizer = load_tokenizer(str(run / "vocab.txt"), True)
    path, meta = classifier_data.classifier_records(str(root / "features"), "test", examples,
                                                    tokenizer, 16, ["0", "1"])
    dataset = feature_records.records_dataset(
        path, classifier_data.classifier_spec(16, False), batch_size=8, is_training=False,
        num_examples=meta["num_examples"])
    logits = task_loop.predict(model, dataset)[:meta["num_examples"]]
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    written = np.loadtxt(run / "test_results.tsv")
    np.testing.assert_allclose(probabilities, written, atol=1e-4)
    serve_text = tf.saved_model.load(str(root / "export" / "1")).signatures["serve_text"]
    served = serve_text(text=tf.constant([e.text_a for e in examples]))
    np.testing.assert_allclose(served["probabilities"].numpy(), written, atol=1e-4)


def test_tagging_and_squad_train_on_jax(runs):
    root, results = runs
    tagging, squad = results[3], results[4]
    assert tagging.returncode == 0, tagging.stderr[-3000:]
    assert squad.returncode == 0, squad.stderr[-3000:]
    tags = _results(root / "tag_jax")
    assert tags["eval"]["f1"] > 0.5, tags["eval"]
    assert _results(root / "squad_jax")["global_step"] > 0
    info = json.loads((root / "squad_export" / "1" / "assets.extra" /
                       "bert_tf_export.json").read_text())
    assert {k: info[k] for k in ("task", "version_2_with_negative", "null_score_diff_threshold",
                                 "doc_stride", "max_query_length")} == {
        "task": "squad", "version_2_with_negative": True, "null_score_diff_threshold": 1.5,
        "doc_stride": STRIDE, "max_query_length": QUERY}
    # The export answers the dev questions as the JAX run did.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signatures' tokenizer ops)

    dev = json.loads((root / "squad" / "dev-v2.json").read_text())["data"][0]["paragraphs"]
    predictions = json.loads((root / "squad_jax" / "predictions.json").read_text())
    served = tf.saved_model.load(str(root / "squad_export" / "1")).signatures["serve_text"](
        question=tf.constant([p["qas"][0]["question"] for p in dev]),
        context=tf.constant([p["context"] for p in dev]))
    got = [a.decode() for a in served["answer_text"].numpy()]
    expected = [predictions[p["qas"][0]["id"]] for p in dev]
    assert sum(map(bool, expected)) > len(dev) / 2, expected  # mostly answers, not ""
    assert sum(g == e for g, e in zip(got, expected)) >= 0.9 * len(dev), (got, expected)


def test_an_export_without_training_is_refused_on_jax_naming_what_to_do(runs):
    root, results = runs
    refused = results[5]
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "run_classifier: error: --export_dir on a --backend=jax run exports the model it "
        "trains: add --do_train, or export a trained run with bert-tf-export "
        "--model_dir=RUN_DIR")
    assert not (root / "refused").exists() and not (root / "refused_export").exists()


_FIT_ON_JAX = """
import keras, numpy as np
import bert_tf
from bert_tf.training.optimization import create_optimizer
assert keras.backend.backend() == "jax"
keras.utils.set_random_seed(0)
config = bert_tf.BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=16)
model = bert_tf.BertClassifier(bert_tf.BertEncoder(config), num_classes=2)
rng = np.random.default_rng(0)
labels = rng.integers(0, 2, 256).astype("int32")
# Each class draws its words from half of the vocabulary: a topic a sentence classifier learns.
ids = np.where(labels[:, None] == 1, rng.integers(5, 22, (256, 12)),
               rng.integers(22, 40, (256, 12))).astype("int32")
features = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}
model.compile(optimizer=create_optimizer(3e-3, 160, 16),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(features, labels, batch_size=16, epochs=10, verbose=0).history
print(history["loss"][0], history["loss"][-1], history["accuracy"][-1])
"""


def test_keras_fit_trains_a_bert_tf_model_on_jax(runs):
    """A notebook's `fit` with bert_tf's model and optimizer under KERAS_BACKEND=jax."""
    result = runs[1][1]
    assert result.returncode == 0, result.stderr[-3000:]
    first, last, accuracy = map(float, result.stdout.split())
    assert last < first * 0.5 and accuracy > 0.9, result.stdout


def test_a_failed_export_names_the_command_that_retries_it(tmp_path, capfd):
    """A JAX run's export is bert-tf-export in a TensorFlow process: when it fails (here: no
    model in the directory), its own error line shows, and the run's one line names the
    command that retries it, with the settings the run passed (the SQuAD threshold)."""
    from bert_tf.jobs import finetuning

    (tmp_path / "run").mkdir()
    export_dir = tmp_path / "export" / "1"
    with pytest.raises(finetuning.FlagValueError) as raised:
        finetuning.export_run(str(tmp_path / "run"), str(export_dir),
                              {"null_score_diff_threshold": 1.5})
    assert str(raised.value) == (
        f"--export_dir={export_dir}: the export under TensorFlow failed (exit status 1, its "
        "error above); the run's other files are written: retry with bert-tf-export "
        f"--model_dir={tmp_path / 'run'} --export_dir={export_dir} "
        "--null_score_diff_threshold=1.5")
    assert f"export_saved_model: error: --model_dir={tmp_path / 'run'}: found none of" in (
        capfd.readouterr().err)
    assert not export_dir.parent.exists()
