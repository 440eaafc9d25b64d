"""End to end: python -m bert_tf.run_tagging on generated CoNLL-2003-format files."""

import json
import os

import keras
import numpy as np
import pytest

import bert_tf
from command_batch import run_commands
from finetuning_helpers import encoder_weights, pretrained_encoder_weights, write_conll

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("run_tagging")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pretrained_dir):
    """This module's runs of python -m bert_tf.run_tagging, one after the other in one
    process (one TensorFlow start-up; each run starts from the command's defaults):
    (directory, {"ner": result, "frozen": result, "again": result}); data and outputs under
    directory/<name>; "again" predicts test.txt with the "ner" run's model into its
    directory."""
    root = tmp_path_factory.mktemp("tagging")
    write_conll(str(root / "ner" / "conll"))
    write_conll(str(root / "frozen" / "conll"), num_train=96, num_dev=32, num_test=0)
    ner, frozen = root / "ner", root / "frozen"
    results = run_commands([
        ("bert_tf.run_tagging", [
            f"--data_dir={ner / 'conll'}", f"--init_checkpoint={pretrained_dir}",
            "--max_seq_length=16", "--train_batch_size=16", "--learning_rate=3e-3",
            "--num_train_epochs=4", "--save_checkpoints_steps=22", "--seed=1", "--do_train",
            "--do_eval", "--do_predict", f"--output_dir={ner / 'out'}",
            f"--export_dir={ner / 'export' / '1'}"]),
        ("bert_tf.run_tagging", [
            f"--train_file={frozen / 'conll' / 'train.txt'}",
            f"--dev_file={frozen / 'conll' / 'dev.txt'}", f"--init_checkpoint={pretrained_dir}",
            "--max_seq_length=16", "--train_batch_size=16", "--learning_rate=1e-2",
            "--num_train_epochs=6", "--save_checkpoints_steps=1000", "--log_steps=8",
            "--seed=1", "--trainable_encoder=false", "--do_train", "--do_eval",
            f"--output_dir={frozen / 'out'}"]),
        ("bert_tf.run_tagging", [
            f"--test_file={ner / 'conll' / 'test.txt'}", "--do_predict",
            f"--output_dir={ner / 'out'}"])])
    return root, dict(zip(("ner", "frozen", "again"), results))


def _conll_rows(path):
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f.read().split("\n")]


@pytest.mark.slow
def test_ner_train_eval_predict(runs):
    root, results = runs
    ner, result, again = root / "ner", results["ner"], results["again"]
    out = ner / "out"
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "results.json") as f:
        results = json.load(f)
    assert results["labels"] == ["O", "B-LOC", "B-PER", "I-LOC"]
    # Every tenth sentence is longer than 14 pieces and was split into windows.
    assert results["split_sentences"] == {"train": 16, "dev": 4, "test": 2}
    assert results["num_windows"]["train"] == 176
    assert [e["step"] for e in results["evaluations"]] == [22, 44]
    # Chance is near 0: "new" is a filler word unless "york" follows.
    assert results["eval"]["f1"] == max(e["f1"] for e in results["evaluations"]) >= 0.85
    assert set(results["eval"]["per_type"]) == {"LOC", "PER"}
    assert results["test"]["f1"] >= 0.85
    with open(out / "eval_results.txt") as f:
        lines = f.read().splitlines()
    assert f"f1 = {results['eval']['f1']}" in lines and any(l.startswith("PER/f1 = ")
                                                            for l in lines)
    # CoNLL predictions: token, gold, predicted; sentences as in test.txt (no -DOCSTART-).
    rows = _conll_rows(out / "test_predictions.txt")
    with open(ner / "conll" / "test.txt", encoding="utf-8") as f:
        source = [line.split() for line in f.read().split("\n")[2:]]
    assert [r[:2] for r in rows if r] == [[s[0], s[3]] for s in source if s]
    assert sum(r[1] == r[2] for r in rows if r) / sum(1 for r in rows if r) >= 0.95
    # In Python the run tags raw text (long sentences in windows) as it tagged test.txt.
    sentences = [[]]
    for row in rows:
        if row:
            sentences[-1].append(row)
        elif sentences[-1]:
            sentences.append([])
    sentences = [sentence for sentence in sentences if sentence]
    answers = bert_tf.load_task(out).predict([" ".join(r[0] for r in s) for s in sentences])
    assert [[w["tag"] for w in a] for a in answers] == [[r[2] for r in s] for s in sentences]
    assert os.path.exists(out / "dev_predictions.txt")
    # Predicting again into the run keeps its predictions: the new ones are numbered.
    assert again.returncode == 0, again.stderr[-3000:]
    assert (f"Wrote the predicted tags of {len(sentences)} sentences to "
            f"{out / 'test_predictions-2.txt'}") in again.stderr
    assert _conll_rows(out / "test_predictions-2.txt") == rows
    with open(out / "task_info.json") as f:
        assert json.load(f) == {"task": "tagging", "labels": ["O", "B-LOC", "B-PER", "I-LOC"],
                                "do_lower_case": True, "max_seq_length": 16}
    model = keras.saving.load_model(out / "model.keras")
    assert model.output_shape == (None, None, 4)
    # The SavedModel tags raw text word by word.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of the text signature)

    served = tf.saved_model.load(str(ner / "export" / "1")).signatures["serve_text"](
        text=tf.constant(["bob was in new york"]))
    assert [t.decode() for t in served["labels"].numpy()[0]] == [
        "B-PER", "O", "O", "B-LOC", "I-LOC"]


@pytest.mark.slow
def test_frozen_encoder_trains_only_the_head(runs, pretrained_dir):
    root, results = runs
    out, result = root / "frozen" / "out", results["frozen"]
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "results.json") as f:
        results = json.load(f)
    assert results["train"]["loss"] < results["train"]["first_log"]["loss"]
    assert results["eval"]["f1"] >= 0.6
    model = keras.saving.load_model(out / "model.keras")
    for trained, pretrained in zip(encoder_weights(model),
                                   pretrained_encoder_weights(pretrained_dir)):
        np.testing.assert_array_equal(trained, pretrained)
