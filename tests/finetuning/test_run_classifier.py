"""End to end: python -m bert_tf.run_classifier on generated GLUE-format and CSV data."""

import csv
import json
import os
import random
import shutil

import keras
import numpy as np
import pytest

import bert_tf
from bert_tf.metrics.classification import THRESHOLD_GRID
from command_batch import run_commands
from finetuning_helpers import (FILLER, NEGATIVE, PERSONS, PLACES, POSITIVE, encoder_weights,
                                pretrained_encoder_weights, sentiment_sentence, write_sst2)

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("run_classifier")


# The multi-label run's --multi_label_threshold, and its LiteRT export's.
THRESHOLD, LITERT_THRESHOLD = 0.6, 0.95


@pytest.fixture(scope="module")
def pretrained_runs(tmp_path_factory, pretrained_dir):
    """The runs of this module that start from the pre-trained directory, one after the other
    in one process (one TensorFlow start-up; each run starts from the command's defaults):
    name -> (its directory, its result). "sst2": a fine-tuning run on generated SST-2 files
    (output in out/); "regression": --regression on a CSV of scores; "bad_input": a dev file
    with an unknown label, evaluated and trained with ("bad_input_training"); "multi_label":
    --multi_label on a CSV of topic sets, exported as a SavedModel, then as LiteRT
    ("multi_label_litert") and Hugging Face ("multi_label_hf"), its predictions of a text
    file ("multi_label_lines"), then evaluated without --multi_label
    ("multi_label_mismatch")."""
    root = tmp_path_factory.mktemp("classifier")
    sst2, regression, bad = root / "sst2", root / "regression", root / "bad_input"
    multi = root / "multi_label"
    multi.mkdir()
    for name, count in (("train", 256), ("dev", 64), ("test", 10)):
        _write_topic_sets_csv(multi / f"{name}.csv", count, rng=random.Random(name))
    # The head starts wider than BERT's 0.02: on this 1-layer, 32-wide random encoder a head
    # at 0.02 learns one label first, saturates the tanh pooler and leaves the others at
    # chance (measured on the AMD EPYC: dev micro F1 0.75 for two of three seeds; at 0.3, 1.0
    # for seeds 1 and 2 after 8 epochs, 0.87-0.89 after 6).
    config = json.loads((pretrained_dir / "bert_config.json").read_text())
    (multi / "bert_config.json").write_text(json.dumps(dict(config, initializer_range=0.3)))
    (multi / "lines.txt").write_text("a film in rome .\nthe actor was dull .\n")
    write_sst2(str(sst2 / "SST-2"))
    rng = random.Random(5)
    regression.mkdir()
    _write_scored_csv(regression / "train.csv", 256, rng)
    _write_scored_csv(regression / "dev.csv", 64, rng)
    _write_scored_csv(regression / "test.csv", 8, rng)
    write_sst2(str(bad / "SST-2"), num_train=8, num_dev=4, num_test=2)
    with open(bad / "SST-2" / "dev.tsv", "a", encoding="utf-8") as f:
        f.write("a film .\t2\n")
    runs = {
        # No --bert_config_file / --vocab_file: both come from the pre-training run directory.
        "sst2": [
            "--task_name=sst-2", f"--data_dir={sst2 / 'SST-2'}",
            f"--init_checkpoint={pretrained_dir}", "--max_seq_length=16",
            "--train_batch_size=16", "--learning_rate=3e-3", "--num_train_epochs=4",
            "--save_checkpoints_steps=32", "--seed=1", "--do_train", "--do_eval", "--do_predict",
            f"--output_dir={sst2 / 'out'}", f"--export_dir={sst2 / 'export' / '1'}"],
        "regression": [
            f"--data_dir={regression}", "--text_a_column=sentence", "--label_column=score",
            "--regression", f"--init_checkpoint={pretrained_dir}", "--max_seq_length=16",
            "--train_batch_size=16", "--learning_rate=3e-3", "--num_train_epochs=4", "--seed=1",
            "--do_train", "--do_eval", "--do_predict", f"--output_dir={regression / 'out'}"],
        # An evaluation restores its weights first (a run that cannot have them writes
        # nothing): a head, even an untrained one, lets it reach the data.
        "bad_input": [
            "--task_name=sst-2", f"--data_dir={bad / 'SST-2'}",
            f"--init_checkpoint={pretrained_dir}", "--max_seq_length=16", "--do_eval",
            "--allow_untrained_head", f"--output_dir={bad / 'out'}"],
        # Training reads the dev data once it owns --output_dir and has written its record.
        "bad_input_training": [
            "--task_name=sst-2", f"--data_dir={bad / 'SST-2'}",
            f"--init_checkpoint={pretrained_dir}", "--max_seq_length=16", "--do_train",
            "--do_eval", f"--output_dir={bad / 'training_out'}"],
        "multi_label": [
            f"--data_dir={multi}", "--text_a_column=sentence", "--label_column=topics",
            "--multi_label", f"--init_checkpoint={pretrained_dir}",
            f"--bert_config_file={multi / 'bert_config.json'}", "--max_seq_length=16",
            "--train_batch_size=16", "--learning_rate=3e-3", "--num_train_epochs=8", "--seed=1",
            "--do_train", "--do_eval", "--do_predict", f"--output_dir={multi / 'out'}",
            f"--export_dir={multi / 'export' / '1'}", f"--multi_label_threshold={THRESHOLD}"],
        # Another threshold for this export only.
        "multi_label_litert": [f"--model_dir={multi / 'out'}", "--format=litert",
                               f"--export_dir={multi / 'litert'}",
                               f"--multi_label_threshold={LITERT_THRESHOLD}"],
        "multi_label_int8": [f"--model_dir={multi / 'out'}", "--format=litert",
                             "--quantize=dynamic_int8", f"--eval_file={multi / 'dev.csv'}",
                             "--label_column=topics",
                             f"--export_dir={multi / 'int8'}"],
        "multi_label_hf": ["--from=bert_tf", "--to=huggingface",
                           f"--checkpoint={multi / 'out' / 'model.keras'}",
                           f"--output_dir={multi / 'hf'}"],
        # No --max_seq_length: the trained run's 16, from its record.
        "multi_label_lines": [
            "--multi_label", f"--test_file={multi / 'lines.txt'}", "--do_predict",
            f"--init_checkpoint={multi / 'out'}", f"--output_dir={multi / 'lines_out'}"],
        "multi_label_mismatch": [
            f"--data_dir={multi}", "--text_a_column=sentence", "--label_column=topics",
            f"--init_checkpoint={pretrained_dir}", "--max_seq_length=16", "--do_eval",
            f"--output_dir={multi / 'out'}"]}
    programs = {"multi_label_litert": "bert_tf.cli.export_saved_model",
                "multi_label_int8": "bert_tf.cli.export_saved_model",
                "multi_label_hf": "bert_tf.cli.convert_checkpoint"}
    results = run_commands([(programs.get(name, "bert_tf.run_classifier"), args)
                            for name, args in runs.items()])
    return {name: (root / name, result) for name, result in zip(runs, results)}


@pytest.fixture(scope="module")
def sst2_run(pretrained_runs):
    """The fine-tuning run on generated SST-2 files: (its output dir, the process result)."""
    directory, result = pretrained_runs["sst2"]
    return directory / "out", result


@pytest.mark.slow
def test_glue_sst2_train_eval_predict(sst2_run, pretrained_dir):
    out, result = sst2_run
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "results.json") as f:
        results = json.load(f)
    assert results["global_step"] == results["num_train_steps"] == 64
    assert [e["step"] for e in results["evaluations"]] == [32, 64]
    best = max(results["evaluations"], key=lambda e: e["score"])
    assert results["best_step"] == best["step"]
    assert results["eval"]["accuracy"] == best["accuracy"] >= 0.9
    assert results["train"]["examples_per_second"] > 0
    assert results["num_examples"] == {"train": 256, "dev": 64, "test": 20}
    with open(out / "eval_results.txt") as f:
        lines = f.read().splitlines()
    assert f"accuracy = {best['accuracy']}" in lines and "global_step = 64" in lines
    with open(out / "best" / "metrics.json") as f:
        assert json.load(f)["step"] == best["step"]
    assert os.listdir(out / "summaries" / "eval")

    # GLUE submission file: index and label name per test row; test labels alternate 0/1.
    with open(out / "SST-2.tsv") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["index", "prediction"] and len(rows) == 21
    assert [r[0] for r in rows[1:]] == [str(i) for i in range(20)]
    hits = [r[1] == str(i % 2) for i, r in enumerate(rows[1:])]
    assert sum(hits) >= 17
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (20, 2)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)
    assert [str(i) for i in probabilities.argmax(1)] == [r[1] for r in rows[1:]]

    with open(out / "task_info.json") as f:
        assert json.load(f) == {"task": "classification", "labels": ["0", "1"],
                                "do_lower_case": True, "max_seq_length": 16,
                                "text_pair": False}
    # In Python the run is a classifier of raw text, answering as the run predicted.
    with open(out.parent / "SST-2" / "test.tsv") as f:
        test_texts = [row["sentence"] for row in csv.DictReader(f, delimiter="\t")]
    answers = bert_tf.load_task(out).predict(test_texts)
    np.testing.assert_allclose([[a["scores"]["0"], a["scores"]["1"]] for a in answers],
                               probabilities, atol=1e-5)
    assert [a["label"] for a in answers] == [r[1] for r in rows[1:]]
    assert {"bert_config.json", "vocab.txt", "model.keras"} <= set(os.listdir(out))
    # The SavedModel reads raw text and agrees with model.keras.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of the text signature)

    served = tf.saved_model.load(str(out.parent / "export" / "1")).signatures["serve_text"](
        text=tf.constant(["a superb film .", "the plot was dull ."]))
    assert [s.decode() for s in served["predicted_label"].numpy()] == ["1", "0"]
    model = keras.saving.load_model(out / "model.keras")
    # Full fine-tuning moved the pre-trained encoder.
    moved = [not np.array_equal(a, b) for a, b in
             zip(encoder_weights(model), pretrained_encoder_weights(pretrained_dir))]
    assert all(moved)


LABEL_NAMES = ["negative", "positive", "neutral"]
# A text file to predict: one text per line, an empty one, a tab and a quote among them.
LINES = ["a superb film .", "", "the plot was dull\tand \"slow\" .", "a great movie"]


def _write_reviews_jsonl(path, count, rng):
    """JSON lines {"review", "id", "polarity"}: the sentiment word's polarity, or neutral
    for reviews without one."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            kind = i % 3
            text = (sentiment_sentence(rng, kind) if kind < 2 else
                    " ".join(rng.choice(FILLER) for _ in range(rng.randint(4, 9))) + " .")
            f.write(json.dumps({"review": text, "id": i, "polarity": LABEL_NAMES[kind]}) + "\n")


@pytest.fixture(scope="module")
def finetuned_runs(tmp_path_factory, sst2_run):
    """The runs of this module that start from the SST-2 run's output, one after the other in
    one process: name -> (its directory, its result). "jsonl": a three-class task on JSON
    lines with the encoder frozen; "off", "8": evaluation and prediction of copies of the
    trained run with --length_buckets=off and =8; "bad_buckets": --length_buckets=16,8."""
    trained, _ = sst2_run
    root = tmp_path_factory.mktemp("finetuned")
    jsonl = root / "jsonl"
    jsonl.mkdir()
    rng = random.Random(3)
    _write_reviews_jsonl(jsonl / "train.jsonl", 192, rng)
    _write_reviews_jsonl(jsonl / "dev.jsonl", 60, rng)
    _write_reviews_jsonl(jsonl / "test.jsonl", 9, rng)
    runs = {"jsonl": [
        f"--data_dir={jsonl}", "--text_a_column=review", "--label_column=polarity",
        # No --max_seq_length: the 16 of the run whose model.keras it starts from.
        "--task_name=reviews", f"--init_checkpoint={trained / 'model.keras'}",
        "--train_batch_size=8", "--gradient_accumulation_steps=2",
        "--learning_rate=1e-2", "--num_train_epochs=3", "--log_steps=4", "--seed=2",
        "--trainable_encoder=false", "--do_train", "--do_eval", "--do_predict",
        f"--output_dir={jsonl / 'out'}"]}
    # The same run again, as multi-label: its softmax head's checkpoints must not resume.
    runs["jsonl_multi_label"] = runs["jsonl"] + ["--multi_label"]
    data_dir = trained.parent / "SST-2"
    for buckets in ("off", "8"):
        out = root / buckets
        shutil.copytree(trained, out, ignore=shutil.ignore_patterns("features"))
        # No --max_seq_length: the run's own 16, from its record.
        runs[buckets] = ["--task_name=sst-2", f"--data_dir={data_dir}",
                         "--do_eval", "--do_predict", f"--output_dir={out}",
                         f"--init_checkpoint={out}", f"--length_buckets={buckets}"]
    runs["bad_buckets"] = ["--task_name=sst-2", f"--data_dir={data_dir}", "--max_seq_length=16",
                           "--do_eval", f"--output_dir={root / 'bad_buckets'}",
                           "--length_buckets=16,8", f"--init_checkpoint={trained}"]
    # Texts to predict, one per line, three times into one directory: the second run keeps
    # the first's predictions, the third (--overwrite) replaces them.
    (root / "lines.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    lines_run = ["--do_predict", f"--test_file={root / 'lines.txt'}", "--max_seq_length=16",
                 f"--init_checkpoint={trained}", f"--output_dir={root / 'lines'}"]
    runs.update(lines=lines_run, lines_again=lines_run, lines_overwrite=lines_run + [
        "--overwrite"])
    results = run_commands([("bert_tf.run_classifier", args) for args in runs.values()])
    return {name: (root / name, result) for name, result in zip(runs, results)}


@pytest.mark.slow
def test_own_jsonl_data_with_a_frozen_encoder(sst2_run, finetuned_runs):
    """The feature-based approach: the encoder of a fine-tuned model file, frozen, under a new
    three-class head (the file's two-class head does not fit and is not loaded)."""
    init_dir, _ = sst2_run
    init_encoder = encoder_weights(keras.saving.load_model(init_dir / "model.keras"))
    directory, result = finetuned_runs["jsonl"]
    out = directory / "out"
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "results.json") as f:
        results = json.load(f)
    assert results["trainable_encoder"] is False and results["task"] == "reviews"
    # The length came from the run it started from; its flagfile holds it for a rerun.
    assert results["max_seq_length"] == 16
    assert "--max_seq_length=16\n" in (out / "run_classifier.flags").read_text()
    # Optimizer steps of 2 accumulated batches of 8: int(192 / 16 * 3).
    assert results["num_train_steps"] == 36 == results["global_step"]
    # Only the new head trained: the loss fell and the classes are told apart above chance
    # (1/3; an encoder fine-tuned on two sentiments barely separates "neutral")...
    assert results["train"]["loss"] < results["train"]["first_log"]["loss"]
    assert results["eval"]["accuracy"] >= 0.6
    with open(out / "task_info.json") as f:
        info = json.load(f)
    assert info["labels"] == ["negative", "neutral", "positive"]
    assert info["text_pair"] is False
    # Predictions of your own data: row index, the text, the label name and its probability.
    with open(out / "predictions.tsv") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["index", "text", "prediction", "score"]
    assert [r[0] for r in rows[1:]] == [str(i) for i in range(9)]
    with open(directory / "test.jsonl") as f:
        assert [r[1] for r in rows[1:]] == [json.loads(line)["review"] for line in f]
    assert {r[2] for r in rows[1:]} <= set(LABEL_NAMES)
    assert sum(r[2] == LABEL_NAMES[i % 3] for i, r in enumerate(rows[1:])) >= 5
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose([float(r[3]) for r in rows[1:]], probabilities.max(1), atol=2e-6)
    # ... and the encoder is exactly the one it started from.
    model = keras.saving.load_model(out / "model.keras")
    assert model.get_layer("classifier").kernel.shape == (32, 3)
    for trained, initial in zip(encoder_weights(model), init_encoder):
        np.testing.assert_array_equal(trained, initial)
    # Rerun as multi-label (the same label set): refused by the record of its checkpoints,
    # before it wrote anything.
    switched = finetuned_runs["jsonl_multi_label"][1]
    assert switched.returncode == 1
    last = switched.stderr.strip().splitlines()[-1]
    assert "holds checkpoints of a run with other settings" in last, last
    assert "--multi_label=false then, true now" in last, last
    assert json.loads((out / "results.json").read_text()) == results


@pytest.mark.slow
def test_bad_input_is_a_one_line_error(pretrained_runs):
    directory, result = pretrained_runs["bad_input"]
    assert result.returncode == 1
    dev = directory / "SST-2" / "dev.tsv"
    message = (f"run_classifier: error: {dev}:6 (column 1): label '2' is not one of 0, 1 "
               "(GLUE sst-2)")
    assert result.stderr.strip().splitlines()[-1] == message
    training = pretrained_runs["bad_input_training"][1]
    assert training.returncode == 1 and training.stderr.strip().splitlines()[-1] == message
    # Refused after taking --output_dir (its lock, run record and feature records written):
    # a directory that held nothing is left as it was.
    assert not (directory / "out").exists() and not (directory / "training_out").exists()


def _write_scored_csv(path, n, rng):
    """Sentences whose score is the number of positive words in them (0 to 3)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence", "score"])
        for _ in range(n):
            k = rng.randint(0, 3)
            words = [rng.choice(FILLER) for _ in range(6 - k)] + [rng.choice(POSITIVE)
                                                                  for _ in range(k)]
            rng.shuffle(words)
            writer.writerow([" ".join(words), f"{k:.1f}"])


@pytest.mark.slow
def test_own_csv_regression(pretrained_runs):
    """--regression: one output trained with squared error, Pearson/Spearman on dev, scores as
    predictions."""
    directory, result = pretrained_runs["regression"]
    out = directory / "out"
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "results.json") as f:
        results = json.load(f)
    evaluation = results["eval"]
    # The score is a count of words: well correlated after a few epochs (chance: 0).
    assert evaluation["pearson"] > 0.8 and evaluation["spearman"] > 0.8, evaluation
    with open(out / "task_info.json") as f:
        assert json.load(f)["task"] == "regression"
    with open(out / "predictions.tsv") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["index", "text", "prediction"] and len(rows) == 9
    scores = [float(r[2]) for r in rows[1:]]
    with open(directory / "test.csv") as f:
        test = list(csv.DictReader(f))
    gold = [float(r["score"]) for r in test]
    assert np.corrcoef(scores, gold)[0, 1] > 0.7, (scores, gold)
    # In Python: a regression on raw text, scoring as the run did.
    answers = bert_tf.load_task(out).predict([r["sentence"] for r in test])
    np.testing.assert_allclose([a["score"] for a in answers],
                               np.loadtxt(out / "test_results.tsv"), atol=1e-5)


# Each keyword stands for a set of topics (a place for two at once); a sentence has at most one
# keyword, and about one in five has none (no topic applies).
TOPIC_SETS = [(POSITIVE, ("positive",)), (NEGATIVE, ("negative",)), (PERSONS, ("person",)),
              (PLACES, ("person", "positive"))]


def _write_topic_sets_csv(path, n, rng):
    """Sentences and their topics (0, 1 or 2 of negative, person, positive), comma-joined."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence", "topics"])
        for _ in range(n):
            words = [rng.choice(FILLER) for _ in range(rng.randint(3, 6))]
            kind = rng.randint(0, len(TOPIC_SETS))
            topics = ()
            if kind < len(TOPIC_SETS):
                keywords, topics = TOPIC_SETS[kind]
                words.insert(rng.randint(0, len(words)), rng.choice(keywords))
            writer.writerow([" ".join(words) + " .", ",".join(topics)])


@pytest.mark.slow
def test_multi_label_trains_predicts_and_serves_label_sets(pretrained_runs):
    """--multi_label: a sigmoid per topic, sets of 0 to 2 topics learned, scored by F1 and
    exact match (with the dev set's best threshold beside), predicted as comma-joined sets of
    the labels above --multi_label_threshold; model.keras (load_task), the SavedModel's
    serve_text and the LiteRT file answer with the same probabilities and decide at the run's
    threshold (the LiteRT file at its own --multi_label_threshold); an evaluation that forgets
    --multi_label is refused, writing nothing."""
    directory, result = pretrained_runs["multi_label"]
    out = directory / "out"
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    evaluation = results["eval"]
    # Chance: predicting every topic gives micro F1 0.5; predicting none, exact match 0.2.
    assert evaluation["micro_f1"] > 0.9 and evaluation["exact_match"] > 0.8, evaluation
    assert evaluation["score"] == evaluation["micro_f1"]
    assert evaluation["label_accuracy"] > 0.9 and evaluation["macro_f1"] > 0.9, evaluation
    # Scored at the run's threshold; the best of 0.01 ... 0.99 scores at least as well.
    assert evaluation["threshold"] == THRESHOLD
    assert evaluation["best_threshold"] in THRESHOLD_GRID
    assert evaluation["best_threshold_micro_f1"] >= evaluation["micro_f1"]
    info = json.loads((out / "task_info.json").read_text())
    assert (info["task"], info["labels"]) == ("multi_label", ["negative", "person", "positive"])
    assert (info["label_separator"], info["multi_label_threshold"]) == (",", THRESHOLD)

    with open(directory / "test.csv", encoding="utf-8") as f:
        test = list(csv.DictReader(f))
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (10, 3) and np.all((probabilities > 0) & (probabilities < 1))
    with open(out / "predictions.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["index", "text", "prediction"] and len(rows) == 11
    predicted = [set(filter(None, r[2].split(","))) for r in rows[1:]]
    assert predicted == [{name for name, p in zip(info["labels"], row) if p > THRESHOLD}
                         for row in probabilities]
    gold = [set(filter(None, r["topics"].split(","))) for r in test]
    assert sum(p == g for p, g in zip(predicted, gold)) >= 9, (predicted, gold)
    assert {len(g) for g in gold} == {0, 1, 2}

    texts = [r["sentence"] for r in test]
    answers = bert_tf.load_task(out).predict(texts)
    np.testing.assert_allclose([[a["scores"][n] for n in info["labels"]] for a in answers],
                               probabilities, atol=1e-5)
    assert [set(a["labels"]) for a in answers] == predicted
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of the text signature)

    served = tf.saved_model.load(str(directory / "export" / "1")).signatures["serve_text"](
        text=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    np.testing.assert_array_equal(served["predicted"].numpy(), probabilities > THRESHOLD)
    assert [n.decode() for n in served["label_names"].numpy()[0]] == info["labels"]

    litert_result = pretrained_runs["multi_label_litert"][1]
    assert litert_result.returncode == 0, litert_result.stderr[-3000:]
    from bert_tf.serving import LiteRTModel

    light = LiteRTModel(str(directory / "litert")).predict(texts)
    np.testing.assert_allclose(light["probabilities"], probabilities, atol=1e-5)
    np.testing.assert_array_equal(light["predicted"], probabilities > LITERT_THRESHOLD)
    # Some test topics lie between the two thresholds: the export decided at its own.
    assert np.any((probabilities > THRESHOLD) & (probabilities <= LITERT_THRESHOLD))
    assert json.loads((directory / "litert" / "bert_tf_litert.json").read_text())[
        "multi_label_threshold"] == LITERT_THRESHOLD
    # int8, scored on the dev label sets (names joined by the run's recorded separator) as
    # the run scored float32: micro F1 above 0.9 for both.
    int8_result = pretrained_runs["multi_label_int8"][1]
    assert int8_result.returncode == 0, int8_result.stderr[-3000:]
    accuracy = json.loads((directory / "int8" / "bert_tf_litert.json").read_text())[
        "accuracy_vs_float32"]
    assert accuracy["rows"] == 64 and accuracy["agreement"] > 0.9, accuracy
    metric = accuracy["metric"]
    assert metric["float32 micro_f1"] == pytest.approx(evaluation["micro_f1"], abs=0.02)
    assert metric["dynamic_int8 micro_f1"] > 0.9, metric
    assert "dynamic_int8 micro_f1" in int8_result.stdout + int8_result.stderr

    # As a Hugging Face directory: transformers' multi-label loss and the run's label names.
    converted = pretrained_runs["multi_label_hf"][1]
    assert converted.returncode == 0, converted.stderr[-3000:]
    hf_config = json.loads((directory / "hf" / "config.json").read_text())
    assert hf_config["problem_type"] == "multi_label_classification"
    assert hf_config["id2label"] == {"0": "negative", "1": "person", "2": "positive"}
    assert hf_config["label2id"] == {"negative": 0, "person": 1, "positive": 2}

    # Texts one per line, predicted by a run of their own from the trained run.
    lines_result = pretrained_runs["multi_label_lines"][1]
    assert lines_result.returncode == 0, lines_result.stderr[-3000:]
    assert (f"--max_seq_length unset: 16, as {out / 'bert_tf_run.json'} records"
            in lines_result.stderr)
    with open(directory / "lines_out" / "predictions.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    lines = (directory / "lines.txt").read_text().splitlines()
    assert [r[1] for r in rows[1:]] == lines
    assert [set(filter(None, r[2].split(","))) for r in rows[1:]] == [
        {"person", "positive"}, {"negative"}]

    refused = pretrained_runs["multi_label_mismatch"][1]
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"run_classifier: error: --multi_label=false, but {out / 'task_info.json'} says task "
        "multi_label: give --multi_label to evaluate or predict with the model it trained")
    # Refused before it wrote: the training run's results stand.
    assert json.loads((out / "results.json").read_text()) == results


@pytest.mark.slow
def test_length_buckets_keep_metrics_and_predictions(sst2_run, finetuned_runs):
    """Evaluation and prediction of the trained model with --length_buckets=off and with two
    buckets (8, 16: the sentences have 6 to 12 pieces): the same metrics and test_results in
    the same order; a bucket list the model cannot take stops the run before anything.

    Never destroy, round three: these runs without --do_train (on copies of the trained run)
    rewrote its model.keras, results.json, eval_results.txt, task_info.json and flags. They
    write their predictions (under the next free numbered names: the trained run's are kept),
    feature records and a line of eval_only_results.jsonl; every other file of the run hashes
    as before."""
    from file_digests import digest

    predictions = ("test_results.tsv", "SST-2.tsv")
    kept = {name: sha for name, sha in digest(sst2_run[0]).items()
            if not name.startswith("features/") and name not in predictions}
    outputs = {}
    for buckets in ("off", "8"):
        out, run = finetuned_runs[buckets]
        assert run.returncode == 0, run.stderr[-3000:]
        assert (f"--max_seq_length unset: 16, as {out / 'bert_tf_run.json'} records"
                in run.stderr)
        after = digest(out)
        assert {name: after.get(name) for name in kept} == kept
        assert {name for name in set(after) - set(kept) - set(predictions)
                if not name.startswith("features/")} == {
                    "eval_only_results.jsonl", "test_results-2.tsv", "SST-2-2.tsv"}
        with open(out / "eval_only_results.jsonl") as f:
            line = json.loads(f.read())
        with open(out / "results.json") as f:
            assert line["global_step"] == json.load(f)["best_step"]
        assert line["predict"]["predictions_file"] == "SST-2-2.tsv"
        outputs[buckets] = (line["eval"],
                            np.loadtxt(out / "test_results-2.tsv", delimiter="\t"))
    (off_eval, off_probs), (on_eval, on_probs) = outputs["off"], outputs["8"]
    assert on_eval.keys() == off_eval.keys()
    for name in off_eval:
        assert on_eval[name] == pytest.approx(off_eval[name], abs=1e-6), name
    np.testing.assert_allclose(on_probs, off_probs, atol=2e-6)

    _, result = finetuned_runs["bad_buckets"]
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "run_classifier: error: --length_buckets=16,8 is not strictly increasing (8 after 16)")


@pytest.mark.slow
def test_predictions_of_a_text_file_keep_the_text_and_earlier_predictions(finetuned_runs):
    out, first = finetuned_runs["lines"]
    assert first.returncode == 0, first.stderr[-3000:]
    assert (f"Wrote the predictions of 4 examples to {out / 'predictions.tsv'} (class "
            f"probabilities: {out / 'test_results.tsv'})") in first.stderr
    with open(out / "predictions.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["index", "text", "prediction", "score"]
    assert [(r[0], r[1]) for r in rows[1:]] == [(str(i), t) for i, t in enumerate(LINES)]
    # Each text's likeliest label and its probability, as test_results.tsv has them.
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert [r[2] for r in rows[1:]] == [str(i) for i in probabilities.argmax(1)]
    np.testing.assert_allclose([float(r[3]) for r in rows[1:]], probabilities.max(1), atol=2e-6)
    # Predicting again keeps them: the new ones take the next names, logged; --overwrite
    # replaces them.
    _, again = finetuned_runs["lines_again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"to {out / 'predictions-2.tsv'} (class probabilities: " in again.stderr
    assert (out / "predictions-2.tsv").read_text() == (out / "predictions.tsv").read_text()
    assert (out / "test_results-2.tsv").exists()
    _, overwrite = finetuned_runs["lines_overwrite"]
    assert overwrite.returncode == 0, overwrite.stderr[-3000:]
    assert f"to {out / 'predictions.tsv'} (class " in overwrite.stderr
    assert not (out / "predictions-3.tsv").exists()
