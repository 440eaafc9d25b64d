"""Fine-tuning plumbing: task losses, prediction, best-model keeping, fine_tune end to end."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.modeling import BertClassifier, BertEncoder, BertSpanLabeler, BertTokenClassifier
from bert_tf.training import task_loop
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.runtime import on_tensorflow
from bert_tf.training.distribute import get_strategy
from bert_tf.training.optimization import create_optimizer

CONFIG = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=16)


def _features(n=8, seq=8, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 50, size=(n, seq)).astype("int32")
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}


def _np_ce(logits, labels):
    logits = logits.astype("float64")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]


def test_step_arithmetic_matches_the_original():
    assert task_loop.num_train_steps(3668, 32, 3.0) == 343  # MRPC: int(3668 / 32 * 3)
    assert task_loop.num_train_steps(5, 32, 1.0) == 1
    assert task_loop.num_warmup_steps(343, 0.1) == 34
    assert task_loop.steps_per_epoch(65, 32) == 3
    with pytest.raises(ValueError, match=r"--warmup_proportion=1.5 must be in \[0, 1\]"):
        task_loop.num_warmup_steps(10, 1.5)


def test_classification_loss_ignores_padding_examples():
    model = BertClassifier(BertEncoder(CONFIG), num_classes=3)
    batch = dict(_features(), label_ids=np.array([0, 1, 2, 0, 1, 2, 0, 1], "int32"),
                 example_weights=np.array([1, 1, 1, 1, 1, 1, 0, 0], "float32"))
    parts = task_loop.classification_loss_fn(model, batch, training=False)
    logits = model(batch).numpy()
    expected = _np_ce(logits[:6], batch["label_ids"][:6]).mean()
    np.testing.assert_allclose(parts["loss"], expected, rtol=1e-5)
    assert float(parts["count"]) == 6.0
    assert float(parts["correct"]) == float((logits[:6].argmax(-1) == batch["label_ids"][:6]).sum())


def test_regression_span_and_tagging_losses_match_numpy():
    features = _features()
    regressor = BertClassifier(BertEncoder(CONFIG), num_classes=1)
    labels = np.linspace(0, 5, 8).astype("float32")
    parts = task_loop.classification_loss_fn(regressor, dict(features, label_ids=labels), False)
    scores = regressor(features).numpy()[:, 0]
    np.testing.assert_allclose(parts["loss"], ((scores - labels) ** 2).mean(), rtol=1e-5)

    span = BertSpanLabeler(BertEncoder(CONFIG))
    starts, ends = np.arange(8, dtype="int32") % 8, (np.arange(8, dtype="int32") + 1) % 8
    parts = task_loop.span_loss_fn(
        span, dict(features, start_positions=starts, end_positions=ends), False)
    out = span(features)
    expected = 0.5 * (_np_ce(out["start_logits"].numpy(), starts).mean()
                      + _np_ce(out["end_logits"].numpy(), ends).mean())
    np.testing.assert_allclose(parts["loss"], expected, rtol=1e-5)

    tagger = BertTokenClassifier(BertEncoder(CONFIG), num_classes=3)
    tags = features["input_word_ids"] % 3
    weights = np.zeros((8, 8), "float32")
    weights[:, :5] = 1.0
    parts = task_loop.tagging_loss_fn(tagger, dict(features, label_ids=tags,
                                                  label_weights=weights), False)
    ce = _np_ce(tagger(features).numpy(), tags)
    np.testing.assert_allclose(parts["loss"], (ce * weights).sum() / weights.sum(), rtol=1e-5)
    assert float(parts["count"]) == 40.0


def test_predict_concatenates_dict_outputs_over_a_ragged_last_batch():
    span = BertSpanLabeler(BertEncoder(CONFIG))
    features = _features(n=7)
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(3)
    out = task_loop.predict(span, dataset)
    assert out["start_logits"].shape == (7, 8) and out["end_logits"].shape == (7, 8)
    np.testing.assert_allclose(out["start_logits"], span(features)["start_logits"], atol=1e-5)
    with pytest.raises(ValueError, match="prediction input is empty"):
        task_loop.predict(span, dataset.take(0))


def test_best_model_keeper_keeps_only_improvements_and_survives_a_restart(tmp_path):
    model = BertClassifier(BertEncoder(CONFIG), num_classes=2)
    keeper = task_loop.BestModelKeeper(model, str(tmp_path), "f1")
    first = [w.copy() for w in model.get_weights()]
    assert keeper.update(10, {"f1": 0.5, "accuracy": 0.6})
    model.set_weights([w + 1.0 for w in first])
    assert not keeper.update(20, {"f1": 0.4})
    assert sorted(os.listdir(tmp_path)) == ["best"]
    with open(tmp_path / "best" / "metrics.json") as f:
        # The newest step evaluated, best or not: a resume knows what it must evaluate; and
        # every evaluation, which a resumed run's results list with its own.
        assert json.load(f) == {"step": 10, "metric": "f1", "evaluated_step": 20,
                                "metrics": {"f1": 0.5, "accuracy": 0.6},
                                "evaluations": [{"step": 10, "f1": 0.5, "accuracy": 0.6},
                                                {"step": 20, "f1": 0.4}]}
    # A new keeper (a resumed run) remembers the best and restores its weights.
    again = task_loop.BestModelKeeper(model, str(tmp_path), "f1")
    assert again.restore()["step"] == 10
    for restored, original in zip(model.get_weights(), first):
        np.testing.assert_array_equal(restored, original)
    with pytest.raises(KeyError, match="best-model metric 'f1' is not among the evaluation "
                                       "metrics accuracy"):
        again.update(30, {"accuracy": 1.0})
    loss_keeper = task_loop.BestModelKeeper(model, str(tmp_path / "l"), "loss",
                                           higher_is_better=False)
    assert loss_keeper.update(1, {"loss": 2.0}) and loss_keeper.update(2, {"loss": 1.0})
    assert not loss_keeper.update(3, {"loss": 1.5})


def test_fine_tune_learns_evaluates_each_checkpoint_and_restores_the_best(tmp_path):
    keras.utils.set_random_seed(3)
    features = _features(n=64, seed=1)
    labels = (features["input_word_ids"][:, 0] >= 28).astype("int32")
    dev = _features(n=32, seed=2)
    dev_labels = (dev["input_word_ids"][:, 0] >= 28).astype("int32")
    strategy = get_strategy("one_device")
    with strategy.scope():
        model = BertClassifier(BertEncoder(CONFIG), num_classes=2)
        optimizer = create_optimizer(3e-3, 120, 10)

    def dataset_fn(context):
        data = tf.data.Dataset.from_tensor_slices(dict(features, label_ids=labels))
        return data.shuffle(64, seed=0).repeat().batch(16, drop_remainder=True)

    def evaluate():
        logits = task_loop.predict(model, tf.data.Dataset.from_tensor_slices(dev).batch(8))
        return {"accuracy": float((logits.argmax(-1) == dev_labels).mean())}

    results = task_loop.fine_tune(
        model=model, optimizer=optimizer, loss_fn=task_loop.classification_loss_fn,
        train_dataset_fn=dataset_fn, runtime=on_tensorflow(strategy), output_dir=str(tmp_path),
        loop_config=TrainLoopConfig(120, global_batch_size=16, steps_per_loop=20,
                                    save_checkpoints_steps=40),
        evaluate_fn=evaluate, best_metric="accuracy")
    assert [e["step"] for e in results["evaluations"]] == [40, 80, 120]
    best = results["best"]
    assert best["metrics"]["accuracy"] == max(e["accuracy"] for e in results["evaluations"])
    assert best["metrics"]["accuracy"] >= 0.8
    # The model now holds the best weights.
    assert evaluate()["accuracy"] == best["metrics"]["accuracy"]
    assert results["train"]["accuracy"] > 0.8
    assert os.path.isdir(tmp_path / "summaries" / "eval")


def test_a_run_killed_between_a_save_and_its_best_update_evaluates_it_on_resume(
        tmp_path, monkeypatch):
    """kill -9 between ckpt-N and best/ lost step N's evaluation: the resume restored ckpt-N,
    never evaluated it and could keep and export a worse model. A kill between the best's two
    renames left no best/ at all (the previous one as best.old-<pid>, which nothing read)."""
    import toy_problem as toy
    from bert_tf import run_directory

    strategy = get_strategy("one_device")
    scores = {40: 0.5, 80: 0.9}

    def run():
        model, optimizer = toy.tf_build(strategy, num_train_steps=80)
        return task_loop.fine_tune(
            model=model, optimizer=optimizer, loss_fn=toy.loss_fn,
            train_dataset_fn=toy.dataset_fn, runtime=on_tensorflow(strategy),
            output_dir=str(tmp_path), evaluate_fn=lambda: {
                "accuracy": scores[int(optimizer.iterations.numpy())]},
            loop_config=TrainLoopConfig(80, global_batch_size=toy.GLOBAL_BATCH,
                                        steps_per_loop=40, save_checkpoints_steps=40),
            best_metric="accuracy")

    replace = os.replace

    def killed(source, target):
        # The "kill": step 80's new best is written, the old one moved aside, then nothing.
        if source.endswith(f"best.tmp-{os.getpid()}") and os.path.exists(
                tmp_path / f"best.old-{os.getpid()}"):
            raise SystemExit(137)
        replace(source, target)

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(SystemExit):
        run()
    monkeypatch.undo()
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("best")) == [
        f"best.old-{os.getpid()}", f"best.tmp-{os.getpid()}"]
    # The next run's owner puts the previous best back and removes the rest.
    assert run_directory.remove_stale_temp_files(str(tmp_path)) == [
        str(tmp_path / f"best.tmp-{os.getpid()}")]
    with open(tmp_path / "best" / "metrics.json") as f:
        assert json.load(f)["evaluated_step"] == 40
    results = run()
    # The run's evaluations, the earlier part's (step 40) with the resumed one's.
    assert [(e["step"], e["accuracy"]) for e in results["evaluations"]] == [(40, 0.5),
                                                                            (80, 0.9)]
    assert results["best"]["step"] == 80 and results["train"]["steps_this_run"] == 0
    # Once recorded it is not evaluated again.
    scores[80] = 0.1
    assert [(e["step"], e["accuracy"]) for e in run()["evaluations"]] == [(40, 0.5), (80, 0.9)]


def test_every_worker_follows_the_chief_on_a_missed_evaluation():
    """Each worker decided alone, from the best/metrics.json it had read (before the chief put
    best/ back, or none of its own), whether to evaluate the restored checkpoint first: one
    that disagreed entered a collective evaluation while the others trained, and the run hung.
    The chief's answer, agreed through the runtime's mean, is every worker's."""
    import threading

    from bert_tf.training import controller

    class Worker:
        """One of three processes; mean() a collective over them."""

        barrier = threading.Barrier(3)
        sums = None

        def __init__(self, chief):
            self.chief = chief

        def mean(self, values):
            if self.chief:
                Worker.sums = [0.0] * len(values)
            Worker.barrier.wait()
            with lock:
                Worker.sums = [s + v for s, v in zip(Worker.sums, values)]
            Worker.barrier.wait()
            return [s / 3 for s in Worker.sums]

    lock = threading.Lock()
    for chief_says in (True, False):
        asked, decided = [], {}

        def work(index):
            def decide():
                asked.append(index)
                return chief_says

            decided[index] = controller._chief_decides(Worker(index == 0), decide)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert asked == [0] and decided == {0: chief_says, 1: chief_says, 2: chief_says}
