"""End to end: python -m bert_tf.run_squad on generated SQuAD-format data with a tiny model.

The generated task is learnable: the answer is always the word after the marker word "key"
(sometimes capitalised or followed by punctuation, which the answer leaves out), in contexts
long enough to need several windows; in v2.0 data a third of the contexts have no marker and
the question is unanswerable.
"""

import json
import os
import random

import pytest
import tensorflow as tf
from absl import flags

import bert_tf
from bert_tf.config import BertConfig
from bert_tf.modeling import BertEncoder, BertPretrainer
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import squad as squad_cli
from bert_tf.jobs.squad import FlagValueError, run_squad
from bert_tf.jobs.finetuning_config import SquadConfig
from command_batch import run_commands

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("run_squad")

FLAGS = squad_cli.define_flags(flags.FlagValues())
FILLER = ("river stone cloud green table window paper music light garden city road winter "
          "summer horse bread silver market story bridge forest lamp chair glass train field "
          "ocean valley tower letter").split()
ANSWERS = ["apple", "bluebird", "copper", "dolphin", "ember", "falcon", "granite", "harbor",
           "indigo", "jasmine", "kettle", "lantern"]
QUESTIONS = ["what comes after the key ?", "which word follows key ?", "name the word after key"]
# "bluebird" is two pieces (blue ##bird).
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",", ".", "?", "key", "blue", "##bird"]
         + sorted({w for q in QUESTIONS for w in q.split()} - {"?", "key"}) + FILLER
         + [a for a in ANSWERS if a != "bluebird"])
SEQ, STRIDE, QUERY = 64, 16, 16


def make_squad(num_questions, seed, version_2):
    """A SQuAD-format dict: one question per paragraph of 20-70 filler words."""
    rng = random.Random(seed)
    paragraphs = []
    for i in range(num_questions):
        words = [rng.choice(FILLER) for _ in range(rng.randint(20, 70))]
        qa = {"id": f"q{seed}-{i}", "question": rng.choice(QUESTIONS)}
        if version_2 and rng.random() < 1 / 3:
            qa.update(answers=[], is_impossible=True)
        else:
            answer = rng.choice(ANSWERS)
            if rng.random() < 0.3:
                answer = answer.capitalize()
            at = rng.randint(0, len(words))
            words[at:at] = [rng.choice(["key", "Key"]), answer + rng.choice(["", "", ",", "."])]
            start = len(" ".join(words[:at + 1])) + 1
            qa["answers"] = [{"text": answer, "answer_start": start}]
            if version_2:
                qa["is_impossible"] = False
        paragraphs.append({"context": " ".join(words), "qas": [qa]})
    return {"version": "v2.0" if version_2 else "1.1",
            "data": [{"title": "generated", "paragraphs": paragraphs}]}


def _write_files(directory):
    """Config, vocabulary and v1.1/v2.0 train and dev files in `directory`; returns it."""
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=SEQ,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.to_json_file(str(directory / "bert_config.json"))
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    for version_2 in (False, True):
        suffix = "v2" if version_2 else "v1"
        for name, count, seed in (("train", 400, 1), ("dev", 80, 2)):
            (directory / f"{name}-{suffix}.json").write_text(
                json.dumps(make_squad(count, seed, version_2)))
    return directory


@pytest.fixture
def files(tmp_path):
    return _write_files(tmp_path)


def _flags(files, output_dir, version):
    return [f"--train_file={files}/train-{version}.json",
            f"--predict_file={files}/dev-{version}.json",
            f"--vocab_file={files}/vocab.txt", f"--bert_config_file={files}/bert_config.json",
            f"--output_dir={output_dir}", "--do_train", "--do_predict",
            f"--max_seq_length={SEQ}", f"--doc_stride={STRIDE}", f"--max_query_length={QUERY}",
            "--train_batch_size=32", "--predict_batch_size=32", "--learning_rate=2e-3",
            "--num_train_epochs=4", "--save_checkpoints_steps=25", "--steps_per_loop=25",
            "--seed=1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The v1.1 and the v2.0 run of python -m bert_tf.run_squad, one after the other in one
    process (one TensorFlow start-up; each run starts from the command's defaults):
    (files, {"v1": result, "v2": result}); outputs in files/out-v1 and files/out-v2."""
    files = _write_files(tmp_path_factory.mktemp("squad"))
    # v2 starts from a (randomly initialised) pre-training checkpoint: the encoder is loaded,
    # the span head is new.
    config = BertConfig.from_json_file(str(files / "bert_config.json"))
    tf.train.Checkpoint(model=BertPretrainer(BertEncoder(config))).write(
        str(files / "pretrained" / "ckpt-1"))
    runs = {"v1": _flags(files, files / "out-v1", "v1") + [f"--export_dir={files}/export/1"],
            "v2": _flags(files, files / "out-v2", "v2") + [
                "--version_2_with_negative", f"--init_checkpoint={files}/pretrained/ckpt-1"]}
    for version, args in runs.items():
        (files / f"{version}.flags").write_text("\n".join(args) + "\n")
    results = run_commands([("bert_tf.run_squad", [f"--flagfile={files}/{version}.flags"])
                            for version in runs])
    return files, dict(zip(runs, results))


def _job(files, **overrides):
    """The SquadConfig run_squad() takes: the flags' defaults plus a small valid v1.1 run."""
    values = dict(train_file=f"{files}/train-v1.json", predict_file=f"{files}/dev-v1.json",
                  vocab_file=f"{files}/vocab.txt", bert_config_file=f"{files}/bert_config.json",
                  output_dir=str(files / "out"), do_train=True, do_predict=True, do_eval=False,
                  max_seq_length=SEQ, doc_stride=STRIDE, max_query_length=QUERY,
                  version_2_with_negative=False, init_checkpoint=None, do_lower_case=True)
    values.update(overrides)
    return cli_flags.to_config(SquadConfig, FLAGS, **values)


@pytest.mark.slow
def test_squad_v1_learns_keeps_the_best_and_predicts_again(trained):
    files, runs = trained
    out = files / "out-v1"
    proc = runs["v1"]
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    # 400 questions / 32 x 4 epochs = 50 steps, evaluated at 25 and 50.
    assert results["global_step"] == 50 and results["num_train_steps"] == 50
    assert [e["step"] for e in results["evaluations"]] == [25, 50]
    assert results["num_train_examples"] == 400 and results["num_skipped_train_examples"] == 0
    # Contexts of up to ~75 pieces need several 45-piece windows.
    assert results["num_predict_features"] > results["num_predict_examples"] == 80
    best = results["best"]
    assert best["metrics"]["f1"] == max(e["f1"] for e in results["evaluations"])
    assert results["predict_step"] == best["step"]
    assert results["eval"] == pytest.approx(best["metrics"])
    # A random span would almost never be exactly the answer word.
    assert results["eval"]["exact_match"] > 80 and results["eval"]["f1"] > 80, results["eval"]
    assert results["train"]["examples_per_second"] > 0
    assert results["predict_examples_per_second"] > 0

    predictions = json.loads((out / "predictions.json").read_text())
    dev = json.loads((files / "dev-v1.json").read_text())["data"][0]["paragraphs"]
    golds = {p["qas"][0]["id"]: p["qas"][0]["answers"][0]["text"] for p in dev}
    assert set(predictions) == set(golds)
    # Answers keep the context's spelling ("Falcon") without the trailing punctuation.
    capitalised = [q for q, g in golds.items() if g[0].isupper() and predictions[q] == g]
    assert capitalised
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert nbest[capitalised[0]][0]["text"] == golds[capitalised[0]]
    assert not (out / "null_odds.json").exists()
    # In Python the run answers raw questions as it answered dev-v1.json, with the spans.
    answers = bert_tf.load_task(out).predict([p["qas"][0]["question"] for p in dev],
                                             [p["context"] for p in dev])
    assert [a["answer"] for a in answers] == [predictions[p["qas"][0]["id"]] for p in dev]
    assert all(p["context"][a["start"]:a["end"]] == a["answer"] for a, p in zip(answers, dev))
    assert json.loads((out / "task_info.json").read_text()) == {
        "task": "squad", "do_lower_case": True, "max_seq_length": SEQ, "doc_stride": STRIDE,
        "max_query_length": QUERY, "max_answer_length": 30, "version_2_with_negative": False,
        "null_score_diff_threshold": 0.0, "n_best_size": 20}
    for name in ("model.keras", "bert_config.json", "vocab.txt", "run_squad.flags",
                 "best/metrics.json", "ckpt-50.index"):
        assert (out / name).exists(), name
    assert os.listdir(out / "summaries" / "eval")

    # The SavedModel answers raw text as the run did, reading long contexts in the run's
    # windows (--doc_stride, recorded in task_info.json).
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of serve_text)

    served = tf.saved_model.load(str(files / "export" / "1")).signatures["serve_text"]
    answers = served(question=tf.constant([p["qas"][0]["question"] for p in dev]),
                     context=tf.constant([p["context"] for p in dev]))
    got = [a.decode() for a in answers["answer_text"].numpy()]
    expected = [predictions[p["qas"][0]["id"]] for p in dev]
    agree = [g == e for g, e in zip(got, expected)]
    assert sum(agree) >= 0.9 * len(dev), (got, expected)
    # Answers after 45 words, past any first window (45 pieces at most), are found as the run
    # found them.
    late = [a for a, p in zip(agree, dev)
            if len(p["context"][:p["qas"][0]["answers"][0]["answer_start"]].split()) > 45]
    assert len(late) == 8 and sum(late) >= 7, late
    # bert-tf-export takes the run's stride; one past a window's 45 pieces is refused.
    refused, exported = run_commands([("bert_tf.cli.export_saved_model", [
        f"--model_dir={out}", f"--export_dir={files}/cli_export/1", "--signatures=text",
        *stride]) for stride in (["--doc_stride=46"], [])])
    assert refused.returncode == 1 and (
        "export: doc_stride=46 must be in [1, 45]: a window holds 45 context tokens "
        "(max_seq_length=64 minus max_query_length=16 minus 3)") in refused.stderr
    assert exported.returncode == 0, exported.stderr[-3000:]
    info = json.loads((files / "cli_export" / "1" / "assets.extra" /
                       "bert_tf_export.json").read_text())
    assert (info["doc_stride"], info["max_query_length"], info["max_answer_length"]) == (
        STRIDE, QUERY, 30)

    # Predicting again without training uses the kept best weights: the same answers. The
    # window settings left unset are the run's (its record and task_info.json), not the
    # defaults (384 would exceed the model's 64 positions). The training run's answers are
    # kept: the new ones take the next numbered names.
    again = run_squad(_job(files, do_train=False, output_dir=str(out), max_seq_length=None,
                           doc_stride=None, max_query_length=None))
    assert again["predict_step"] == best["step"]
    assert again["eval"] == pytest.approx(results["eval"])
    assert again["prediction_files"] == {
        "predictions": f"{out}/predictions-2.json",
        "nbest_predictions": f"{out}/nbest_predictions-2.json"}
    assert json.loads((out / "predictions-2.json").read_text()) == predictions
    assert json.loads((out / "predictions.json").read_text()) == predictions


@pytest.mark.slow
def test_squad_v2_learns_answers_and_no_answers(trained):
    files, runs = trained
    pretrained = str(files / "pretrained" / "ckpt-1")
    out = files / "out-v2"
    proc = runs["v2"]
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"Warm start from {pretrained} (bert_tf_checkpoint)" in proc.stderr
    assert "newly initialized: span_logits/kernel, span_logits/bias" in proc.stderr
    metrics = json.loads((out / "results.json").read_text())["eval"]
    assert metrics["HasAns_total"] + metrics["NoAns_total"] == metrics["total"] == 80
    assert metrics["NoAns_total"] > 10
    assert metrics["HasAns_f1"] > 70 and metrics["NoAns_exact"] > 70, metrics
    assert metrics["f1"] > 70 and "best_f1_thresh" in metrics
    predictions = json.loads((out / "predictions.json").read_text())
    odds = json.loads((out / "null_odds.json").read_text())
    assert set(odds) == set(predictions)
    # The default threshold 0: "" exactly where the null score beats the best span.
    assert all((predictions[q] == "") == (odds[q] > 0.0) for q in odds)
    # In Python too (task_info.json records version_2_with_negative).
    dev = [qa | {"context": p["context"]}
           for article in json.loads((files / "dev-v2.json").read_text())["data"]
           for p in article["paragraphs"] for qa in p["qas"]]
    answers = bert_tf.load_task(out).predict([qa["question"] for qa in dev],
                                             [qa["context"] for qa in dev])
    assert [a["answer"] for a in answers] == [predictions[qa["id"]] for qa in dev]
    # Predicting again without --version_2_with_negative: the run's SQuAD 2.0, null odds and
    # no-answers included; --overwrite replaces the run's files.
    (out / "null_odds.json").write_text("{}")
    again = run_squad(_job(files, do_train=False, output_dir=str(out), overwrite=True,
                           predict_file=f"{files}/dev-v2.json", version_2_with_negative=None))
    assert again["eval"] == pytest.approx(metrics)
    assert json.loads((out / "null_odds.json").read_text()) == pytest.approx(odds)
    assert not (out / "predictions-2.json").exists()


@pytest.mark.parametrize("overrides, message", [
    (dict(max_seq_length=128),
     "--max_seq_length=128 exceeds max_position_embeddings=64 in {files}/bert_config.json"),
    (dict(max_query_length=61),
     "--max_seq_length=64 leaves no room for the context after a question of "
     "--max_query_length=61 pieces plus [CLS] and two [SEP]; it must be at least 65"),
    (dict(doc_stride=46), "--doc_stride=46 must be in [1, 45]"),
    (dict(do_train=False, do_predict=False), "at least one of --do_train, --do_eval or "
                                             "--do_predict must be set"),
    (dict(train_file=None), "--do_train needs --train_file"),
    (dict(train_file="{files}/bad.json"),
     "--train_file: {files}/bad.json: data[0].paragraphs[1].qas[0]: missing field 'question'"),
    (dict(predict_file="{files}/broken.json"), "--predict_file: {files}/broken.json: not valid "
                                               "JSON: "),
    (dict(do_eval=True, predict_file="{files}/hidden.json"),
     "--do_eval: --predict_file={files}/hidden.json has questions without gold answers"),
    (dict(init_checkpoint="/ckpts/cased_L-12_H-768_A-12/bert_model.ckpt"),
     "cased_L-12_H-768_A-12"),
    (dict(warmup_proportion=1.5), "--warmup_proportion=1.5 must be in [0, 1]"),
    (dict(predict_batch_size=0), "--predict_batch_size=0 must be >= 1"),
    (dict(gradient_accumulation_steps=0), "--gradient_accumulation_steps=0 must be >= 1"),
])
def test_bad_inputs_fail_with_named_flag(files, overrides, message, tmp_path):
    good = {"context": "a key b", "qas": [{"id": "x", "question": "q",
                                           "answers": [{"text": "b", "answer_start": 6}]}]}
    (files / "bad.json").write_text(json.dumps({"data": [{"paragraphs": [
        good, {"context": "c", "qas": [{"id": "y", "answers": []}]}]}]}))
    (files / "broken.json").write_text('{"data": [')
    (files / "hidden.json").write_text(json.dumps({"data": [{"paragraphs": [
        {"context": "a key b", "qas": [{"id": "x", "question": "q"}]}]}]}))
    overrides = {k: v.format(files=files) if isinstance(v, str) else v
                 for k, v in overrides.items()}
    with pytest.raises(FlagValueError) as error:
        run_squad(_job(files, output_dir=str(tmp_path / "out"), **overrides))
    assert message.format(files=files) in str(error.value)
    # Some are read once the run owns --output_dir (the training file's windows): a refused
    # run leaves nothing.
    assert not (tmp_path / "out").exists()


def test_a_failure_writing_predictions_keeps_the_trained_model(files, monkeypatch):
    """Case 8: predictions.json failed after training (a lone surrogate then), and the run had
    not yet saved model.keras: the model files now come first."""
    import errno

    from bert_tf.jobs import squad as squad_job

    def fail(answers, output_dir, names=None):
        raise OSError(errno.ENOSPC, "No space left on device", f"{output_dir}/predictions.json")

    monkeypatch.setattr(squad_job.squad_postprocess, "write_predictions", fail)
    out = files / "out"
    with pytest.raises(OSError, match="No space left on device"):
        run_squad(_job(files, num_train_epochs=0.2, train_batch_size=32,
                           predict_batch_size=32))
    assert {"model.keras", "task_info.json", "bert_config.json", "vocab.txt"} <= set(
        os.listdir(out))
