"""bert_tf.tasks: models that carry their tokenizer and labels, answering raw text.

Predictions are checked against the model on full-length inputs packed by hand (bucketing cuts
only padding), against bert_tf's own commands in tests/finetuning, test_run_squad and
tests/cli/test_embed (the run's predictions files), and against the SavedModel text signatures
in tests/serving/test_tasks_answer_as_exports.py.
"""

import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

import bert_tf
import serving_cases as cases
from bert_tf import tasks
from bert_tf.data.tasks import length_buckets
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSentenceEmbedder,
                              BertSpanLabeler, BertTokenClassifier)
from bert_tf.text.input_packing import pack_inputs
from finetuning_helpers import sentiment_sentence
from no_tensorflow import jax_env, run_without_tensorflow
from task_cases import answer, same_answers

S = cases.SEQ_LENGTH
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(scope="module")
def tok():
    return cases.python_tokenizer()


@pytest.fixture(scope="module")
def saved_tasks(tmp_path_factory, tok):
    """A task of every kind on tiny random models, saved; and what each answered here."""
    root = tmp_path_factory.mktemp("tasks")
    keras.utils.set_random_seed(3)
    config = cases.tiny_config()
    made = {
        "classifier": tasks.TextClassifier(BertClassifier(BertEncoder(config), num_classes=3),
                                           tok, cases.CLASS_LABELS, max_seq_length=S,
                                           text_pair=True),
        "squad": tasks.QuestionAnswerer(BertSpanLabeler(BertEncoder(config)), tok,
                                        max_seq_length=S, max_query_length=8, doc_stride=8,
                                        max_answer_length=5),
        "tagging": tasks.TokenTagger(BertTokenClassifier(BertEncoder(config), num_classes=4),
                                     tok, cases.TAGS, max_seq_length=S),
        "fill_mask": tasks.FillMask(BertPretrainer(BertEncoder(config)), tok,
                                    max_seq_length=S, top_k=3),
        "embedding": tasks.TextEmbedder(BertSentenceEmbedder(BertEncoder(config)), tok,
                                        max_seq_length=S),
    }
    answers = {kind: answer(task) for kind, task in made.items()}
    for kind, task in made.items():
        task.save(root / kind)
    (root / "answers.json").write_text(json.dumps(answers))
    return root, made, answers


def test_classifier_answers_as_the_model_on_full_length_inputs(saved_tasks, tok):
    _, made, answers = saved_tasks
    task = made["classifier"]
    rows = [pack_inputs(tok.encode(a), tok.encode(b), max_seq_length=S, cls_id=tok.cls_id,
                        sep_id=tok.sep_id) for a, b in zip(cases.TEXTS, cases.PAIRS)]
    features = {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}
    expected = tasks.base.softmax(keras.ops.convert_to_numpy(task.model(features)))
    got = np.array([[a["scores"][name] for name in cases.CLASS_LABELS]
                    for a in answers["classifier"]])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert [a["label"] for a in answers["classifier"]] == [
        cases.CLASS_LABELS[i] for i in expected.argmax(-1)]
    # One text gives one answer, the same as in a batch.
    one = task.predict(cases.TEXTS[0], cases.PAIRS[0])
    assert one["label"] == answers["classifier"][0]["label"]
    assert one["score"] == pytest.approx(answers["classifier"][0]["score"], abs=1e-5)


def test_span_tag_and_mask_answers_point_into_their_text(saved_tasks):
    _, made, answers = saved_tasks
    for span, context in zip(answers["squad"], cases.CONTEXTS):
        assert context[span["start"]:span["end"]] == span["answer"]
        assert 0.0 <= span["score"] <= 1.0
    assert answers["squad"][3] == {"answer": "", "start": 0, "end": 0, "score": 0.0}  # no context
    for words, text in zip(answers["tagging"], cases.TEXTS):
        assert [text[w["start"]:w["end"]] for w in words] == [w["word"] for w in words]
        assert all(w["tag"] in cases.TAGS for w in words)
    # Every word of the long text is tagged: it is read in windows of whole words.
    assert len(answers["tagging"][4]) == len(tasks.split_words(cases.LONG_TEXT)[0]) > S
    assert [w["word"] for w in answers["tagging"][2]] == ["Hello", ",", "unaffable", "world",
                                                          "!"]
    masks = answers["fill_mask"]
    # Masks per text: "[mask]" is not one; the long text's mask is cut off by truncation.
    assert [len(m) for m in masks] == [2, 1, 0, 0, 0, 3, 1]
    assert all(len(guesses) == 3 and guesses[0]["score"] >= guesses[-1]["score"]
               for m in masks for guesses in m)
    vectors = np.array(answers["embedding"])
    assert vectors.shape == (len(cases.TEXTS), 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_bad_input_is_answered_or_refused_in_one_line(saved_tasks):
    _, made, _ = saved_tasks
    classifier = made["classifier"]
    # Empty, very long and undecodable texts are answered (the long one truncated to S).
    answers = classifier.predict(["", "word " * 20000, b"caf\xc3\xa9 \xff\xfe"])
    assert [a["label"] in cases.CLASS_LABELS for a in answers] == [True] * 3
    assert classifier.predict([b"caf\xc3\xa9 \xff\xfe"])[0]["scores"] == pytest.approx(
        classifier.predict(["caf\u00e9 \ufffd\ufffd"])[0]["scores"], abs=1e-6)
    with pytest.raises(tasks.TaskError, match=r"^texts\[1\] is NoneType, not text \(str or "
                       r"UTF-8 bytes\)$"):
        classifier.predict(["fine", None])
    with pytest.raises(tasks.TaskError, match="^text_pairs has 1 texts for 2 texts$"):
        classifier.predict(["a", "b"], ["c"])
    with pytest.raises(tasks.TaskError, match=r"^TextClassifier: 2 label names for a head of 3 "
                       "classes; give one name per class"):
        tasks.TextClassifier(classifier.model, classifier.tokenizer, ["a", "b"],
                             max_seq_length=S)
    with pytest.raises(tasks.TaskError, match=r"^labels\[1\]='maybe' is not among the model's "
                       "labels negative, neutral, positive$"):
        classifier.fit(["a", "b"], ["positive", "maybe"])
    # The Keras model alone takes token ids: text is refused, naming what answers it.
    with pytest.raises(TypeError, match=r"^BertClassifier.predict takes token ids \(a dict of "
                       r"input_word_ids, input_mask, input_type_ids\), not text; "
                       r"bert_tf.load_task\(RUN_DIR\)"):
        classifier.model.predict(["a text"])


def test_load_task_reads_what_save_wrote_and_refuses_an_encoder(saved_tasks, tmp_path):
    root, made, answers = saved_tasks
    for kind, task in made.items():
        loaded = bert_tf.load_task(root / kind)
        assert type(loaded) is type(task) and loaded.max_seq_length == S
        assert same_answers(answer(loaded), answers[kind]), kind
    assert bert_tf.load_task(root / "classifier").labels == tuple(cases.CLASS_LABELS)
    assert bert_tf.load_task(root / "squad").doc_stride == 8
    encoder_dir = tmp_path / "encoder"
    encoder_dir.mkdir()
    made["embedding"].encoder.save(encoder_dir / "encoder.keras")
    (encoder_dir / "vocab.txt").write_text("".join(t + "\n" for t in cases.VOCAB))
    with pytest.raises(tasks.TaskError, match="holds a BertEncoder without a task head; build "
                       r"one on it: bert_tf.tasks.TextClassifier.from_pretrained\("):
        bert_tf.load_task(encoder_dir)
    # The encoder's text refusal names the directory it came from.
    with pytest.raises(TypeError, match=rf"bert_tf.load_task\('{encoder_dir}'\) loads it"):
        bert_tf.load_model(encoder_dir).predict("a text")


def test_answers_on_jax_without_tensorflow_equal_tensorflows(saved_tasks):
    root, _, answers = saved_tasks
    script = root / "answer_on_jax.py"
    script.write_text(
        "import json, sys\n"
        "import bert_tf\n"
        "from task_cases import answer\n"
        f"root = {str(root)!r}\n"
        "answers = {kind: answer(bert_tf.load_task(f'{root}/{kind}')) for kind in\n"
        "           ('classifier', 'squad', 'tagging', 'fill_mask', 'embedding')}\n"
        "print(json.dumps([answers, 'tensorflow' in sys.modules]))\n")
    done = run_without_tensorflow(str(script), extra_path=[HERE, os.path.join(HERE, "..",
                                                                                "serving")])
    assert done.returncode == 0, done.stderr[-3000:]
    jax_answers, tensorflow_loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert tensorflow_loaded is False
    for kind in answers:
        assert same_answers(jax_answers[kind], answers[kind]), kind


def test_a_classifier_from_a_pretrained_run_learns_from_texts(pretrained_dir, tmp_path):
    rng = random.Random(4)
    labels = ["negative", "positive"]
    train = [(sentiment_sentence(rng, i % 2), labels[i % 2]) for i in range(256)]
    dev = [(sentiment_sentence(rng, i % 2), labels[i % 2]) for i in range(32)]
    keras.utils.set_random_seed(2)
    classifier = tasks.TextClassifier.from_pretrained(pretrained_dir, labels=labels,
                                                      max_seq_length=16)
    history = classifier.fit([t for t, _ in train], [l for _, l in train],
                             validation_data=([t for t, _ in dev], [l for _, l in dev]),
                             epochs=4, batch_size=16, learning_rate=3e-3)
    assert history.history["val_accuracy"][-1] >= 0.85, history.history
    answers = classifier.predict([t for t, _ in dev])
    accuracy = np.mean([a["label"] == l for a, (_, l) in zip(answers, dev)])
    assert accuracy == pytest.approx(history.history["val_accuracy"][-1], abs=1e-6)
    # The run's casing (recorded by its checkpoint's directory) and vocabulary came along.
    assert classifier.tokenizer.do_lower_case and classifier.tokenizer.vocab_size > 10
    with pytest.raises(tasks.TaskError, match="give labels, the class names"):
        tasks.TextClassifier.from_pretrained(pretrained_dir)


def test_a_multi_label_classifier_fits_label_lists_and_loads_back(pretrained_dir, tmp_path):
    """multi_label=True: fit takes a list of names per text (empty: none applies), predict
    gives every label above 0.5 (or multi_label_threshold), save / load_task keep the head's
    kind and threshold; bad label lists and thresholds are refused naming them."""
    labels = ["negative", "positive"]
    texts = ["a good film .", "a bad plot .", "good and bad .", "the actor ."]
    targets = [["positive"], ["negative"], ["negative", "positive"], []]
    keras.utils.set_random_seed(2)
    classifier = tasks.TextClassifier.from_pretrained(pretrained_dir, labels=labels,
                                                      multi_label=True, max_seq_length=16)
    assert classifier.task_name == "multi_label" and classifier.model.multi_label
    history = classifier.fit(texts * 4, targets * 4, epochs=2, batch_size=8,
                             learning_rate=1e-3, verbose=0)
    assert set(history.history) == {"loss", "accuracy"} and len(history.history["loss"]) == 2
    answers = classifier.predict(texts)
    for answer_ in answers:
        probabilities = answer_["scores"]
        assert set(probabilities) == set(labels) and all(0 < p < 1 for p in
                                                         probabilities.values())
        assert answer_["labels"] == sorted((n for n, p in probabilities.items() if p > 0.5),
                                           key=lambda n: -probabilities[n])
    # A threshold between two of the probabilities: the labels above it, and it travels.
    assert classifier.multi_label_threshold == 0.5
    probabilities = sorted(p for a in answers for p in a["scores"].values())
    threshold = (probabilities[2] + probabilities[3]) / 2
    classifier.multi_label_threshold = threshold
    raised = classifier.predict(texts)
    assert sum(len(a["labels"]) for a in raised) == 5
    for answer_ in raised:
        assert answer_["labels"] == sorted((n for n, p in answer_["scores"].items()
                                            if p > threshold),
                                           key=lambda n: -answer_["scores"][n])
    classifier.save(tmp_path / "saved")
    info = json.loads((tmp_path / "saved" / "task_info.json").read_text())
    assert (info["task"], info["multi_label_threshold"]) == ("multi_label", threshold)
    loaded = bert_tf.load_task(tmp_path / "saved")
    assert loaded.multi_label and loaded.multi_label_threshold == threshold
    assert same_answers(loaded.predict(texts), raised)
    for bad in (0, 1.0, "0.5"):
        with pytest.raises(tasks.TaskError) as error:
            loaded.multi_label_threshold = bad
        assert str(error.value) == (f"TextClassifier: multi_label_threshold={bad!r} must be a "
                                    "number in (0, 1) (a probability a label must exceed)")
    single = tasks.TextClassifier(BertClassifier(classifier.encoder, 2), classifier.tokenizer,
                                  labels, max_seq_length=16)
    assert single.multi_label_threshold is None
    refused = (r"^TextClassifier: multi_label_threshold=0.3 applies to a multi-label head; this "
               "one is classification$")
    with pytest.raises(tasks.TaskError, match=refused):
        single.multi_label_threshold = 0.3
    with pytest.raises(tasks.TaskError, match=refused):
        tasks.TextClassifier(single.model, classifier.tokenizer, labels, max_seq_length=16,
                             multi_label_threshold=0.3)
    with pytest.raises(tasks.TaskError, match=r"labels\[0\]='positive': a multi-label "
                                              "classifier takes a list of label names"):
        classifier.fit(texts, ["positive", [], [], []], epochs=1)
    with pytest.raises(tasks.TaskError, match=r"labels\[1\]: 'neutral' is not among the "
                                              "model's labels negative, positive"):
        classifier.fit(texts, [[], ["neutral"], [], []], epochs=1)
    with pytest.raises(tasks.TaskError, match="regression and multi_label exclude each other"):
        tasks.TextClassifier.from_pretrained(pretrained_dir, regression=True, multi_label=True)


def test_tasks_build_from_a_hugging_face_directory_and_a_label_list():
    hf = os.path.join(HERE, "..", "interop", "fixtures", "hf_bert_gelu")
    classifier = tasks.TextClassifier.from_pretrained(hf, labels=["no", "yes"], max_seq_length=32)
    # The directory's encoder, vocab.txt and the casing its tokenizer_config.json records.
    encoder = bert_tf.load_model(hf).encoder
    for built, loaded in zip(classifier.encoder.weights, encoder.weights):
        np.testing.assert_array_equal(built.numpy(), loaded.numpy())
    assert classifier.tokenizer.vocab_size == 100 and classifier.do_lower_case
    answers = classifier.predict(["some words", ""])
    assert [a["label"] in ("no", "yes") for a in answers] == [True, True]
    # Its masked-LM head answers masks as it is.
    assert len(tasks.FillMask.from_pretrained(hf, max_seq_length=32).predict("[MASK]")) == 1


def test_regression_labels_and_squad_settings_must_be_finite_numbers(saved_tasks, tok):
    """NaN (a missing pandas or NumPy cell) or inf as a score would make every weight NaN: refused
    before training, in the training and the validation labels."""
    regressor = tasks.TextClassifier(
        BertClassifier(BertEncoder(cases.tiny_config()), num_classes=1), tok, max_seq_length=S)
    weights = regressor.model.get_weights()
    texts = ["the cat", "a dog", "the mat", "a big city"]
    for labels, message in (
            ([float("nan"), 1.0, 2.0, 3.0], r"^labels\[0\]=nan is not a finite number"),
            (np.array([1.0, 2.0, np.inf, 0.5]), r"^labels\[2\]=inf is not a finite number"),
            ([1.0, "-inf", 0, 1], r"^labels\[1\]='-inf' is not a finite number")):
        with pytest.raises(tasks.TaskError, match=message + r" \(a regression score\)$"):
            regressor.fit(texts, labels, epochs=1, verbose=0)
    with pytest.raises(tasks.TaskError, match=r"^labels\[1\]=nan is not a finite number"):
        regressor.fit(texts, [0.5] * 4, validation_data=(texts[:2], [1.0, float("nan")]),
                      epochs=1, verbose=0)
    for before, after in zip(weights, regressor.model.get_weights()):
        np.testing.assert_array_equal(before, after)
    model = saved_tasks[1]["squad"].model
    for setting, message in (
            (dict(null_score_diff_threshold=float("nan")),
             "null_score_diff_threshold=nan must be a finite number"),
            (dict(null_score_diff_threshold="5"),
             "null_score_diff_threshold='5' must be a finite number"),
            (dict(n_best_size=0), "n_best_size=0 must be an integer >= 1"),
            (dict(max_answer_length=2.5), "max_answer_length=2.5 must be an integer >= 1")):
        with pytest.raises(tasks.TaskError, match=rf"^QuestionAnswerer: {re.escape(message)}$"):
            tasks.QuestionAnswerer(model, tok, max_seq_length=S, max_query_length=8,
                                   doc_stride=8, **setting)


def test_question_answerer_settings_survive_save_and_older_files_load(saved_tasks, tok,
                                                                       tmp_path):
    settings = dict(max_query_length=8, doc_stride=8, max_answer_length=7,
                    version_2_with_negative=True, null_score_diff_threshold=5.0, n_best_size=7)
    reader = tasks.QuestionAnswerer(saved_tasks[1]["squad"].model, tok, max_seq_length=S,
                                    **settings)
    reader.save(tmp_path / "qa")
    info_file = tmp_path / "qa" / "task_info.json"
    info = json.loads(info_file.read_text())
    assert {name: info[name] for name in settings} == settings
    loaded = bert_tf.load_task(tmp_path / "qa")
    assert {name: getattr(loaded, name) for name in settings} == settings
    assert same_answers(loaded.predict(cases.QUESTIONS, cases.CONTEXTS),
                        reader.predict(cases.QUESTIONS, cases.CONTEXTS))
    # A task_info.json written before the two were recorded: their defaults.
    del info["null_score_diff_threshold"], info["n_best_size"]
    info_file.write_text(json.dumps(info))
    older = bert_tf.load_task(tmp_path / "qa")
    assert (older.null_score_diff_threshold, older.n_best_size, older.max_answer_length,
            older.version_2_with_negative) == (0.0, 20, 7, True)


def test_int_labels_name_their_class_and_one_str_is_refused(saved_tasks, tok, pretrained_dir):
    """An int class id i is the label "i" (the default names): in the label names, fit's
    labels and tags; a bool is not an id. One str is no list of names. A multi-label text's
    list holds names: a multi-hot matrix as nested lists is refused, not read as class ids."""
    _, made, _ = saved_tasks
    model = made["classifier"].model
    classifier = tasks.TextClassifier(model, tok, max_seq_length=S)
    assert classifier.labels == ("0", "1", "2")
    assert tasks.TextClassifier(model, tok, [0, 1, 2], max_seq_length=S).labels == (
        "0", "1", "2")
    assert tasks.TextClassifier(model, tok, np.arange(3), max_seq_length=S).labels == (
        "0", "1", "2")
    np.testing.assert_array_equal(
        classifier._targets([2, np.int64(0), "1", 2], 4), [2, 0, 1, 2])
    with pytest.raises(tasks.TaskError, match=r"^labels\[0\]=True is not among the model's "
                       "labels 0, 1, 2$"):
        classifier._targets([True, 0], 2)
    multi = tasks.TextClassifier(BertClassifier(model.encoder, 2, multi_label=True), tok,
                                 max_seq_length=S)
    np.testing.assert_array_equal(multi._targets([["0", "1"], ["1"], []], 3),
                                  [[1, 1], [0, 1], [0, 0]])
    hot = np.array([[1, 0], [0, 1]])
    np.testing.assert_array_equal(multi._targets(hot, 2), hot)
    with pytest.raises(tasks.TaskError, match=r"^labels\[0\]=\[1, 0\]: a multi-label row lists "
                       r"label names \(str\), not int; a multi-hot matrix \[N, C\] goes as an "
                       "np.ndarray$"):
        multi._targets(hot.tolist(), 2)
    tagger = tasks.TokenTagger(made["tagging"].model, tok, range(4), max_seq_length=S)
    assert tagger.labels == ("0", "1", "2", "3")
    assert tagger._sentences([["the", "cat"]], [[0, "3"]], "sentences")[0].tags == ("0", "3")
    for call, message in (
            (lambda: tasks.TextClassifier(model, tok, "abc", max_seq_length=S),
             "TextClassifier: labels must be a list of names, not the str 'abc'"),
            (lambda: tasks.TextClassifier.from_pretrained(pretrained_dir, labels="ab"),
             "TextClassifier.from_pretrained: labels must be a list of names, not the str 'ab'"),
            (lambda: tasks.TokenTagger.from_pretrained(pretrained_dir, "BIO"),
             "TokenTagger.from_pretrained: labels must be a list of names, not the str 'BIO'")):
        with pytest.raises(tasks.TaskError, match=f"^{re.escape(message)}$"):
            call()


def test_no_texts_and_bad_batch_sizes_are_refused_in_one_line(saved_tasks):
    _, made, _ = saved_tasks
    classifier, tagger, reader = made["classifier"], made["tagging"], made["squad"]
    for call, message in (
            (lambda: classifier.fit([], []), "texts: no texts to train on"),
            (lambda: classifier.fit(["a"], ["positive"], validation_data=([], [])),
             "validation_data: no texts to evaluate on"),
            (lambda: tagger.fit([], []), "sentences: no sentences to train on"),
            (lambda: tagger.fit([["a"]], [["O"]], validation_data=([], [])),
             "validation_data: no sentences to evaluate on"),
            (lambda: reader.fit([], [], []), "questions: no questions to train on"),
            (lambda: classifier.fit(["a"], ["positive"], batch_size=0),
             "batch_size=0 must be an integer >= 1"),
            (lambda: tagger.fit([["a"]], [["O"]], batch_size=0),
             "batch_size=0 must be an integer >= 1"),
            (lambda: reader.fit(["q"], ["the cat"], [("cat", 4)], batch_size=0),
             "batch_size=0 must be an integer >= 1"),
            (lambda: classifier.predict(["a"], batch_size=0),
             "batch_size=0 must be an integer >= 1"),
            (lambda: tagger.predict("a", batch_size=-1), "batch_size=-1 must be an integer >= 1"),
            (lambda: reader.predict("q", "the cat", batch_size=2.5),
             "batch_size=2.5 must be an integer >= 1"),
            (lambda: made["fill_mask"].predict("[MASK]", top_k=0),
             "top_k=0 must be an integer >= 1"),
            (lambda: reader.fit(["q"], ["the cat"], None), "answers must be a list of (answer "
             "text, start character) or None, got NoneType")):
        with pytest.raises(tasks.TaskError, match=f"^{re.escape(message)}$"):
            call()
    # An answer's start as NumPy gives it (a pandas column) is a start.
    batches = reader._training_batches(["Where is it?"], ["the cat sat"], [("cat", np.int64(4))],
                                       2, False)
    assert int(batches.cardinality()) == 1
    empty = {name: np.zeros((0, S), np.int32) for name in ("input_word_ids", "input_mask",
                                                             "input_type_ids")}
    with pytest.raises(ValueError, match="^keras_dataset: features hold no examples; give at "
                       "least one$"):
        length_buckets.keras_dataset(empty, np.zeros(0), batch_size=2, buckets=[S],
                                     shuffle=True)
    one = {name: np.ones((1, S), np.int32) for name in empty}
    with pytest.raises(ValueError, match=r"^keras_dataset: batch_size=0 must be an integer >= "
                       "1$"):
        length_buckets.keras_dataset(one, np.zeros(1), batch_size=0, buckets=[S])


def test_fit_takes_int_labels_shuffle_and_validation_split(pretrained_dir, tmp_path, caplog,
                                                           monkeypatch):
    """Keras' shuffle and validation_split, done before batching: the last quarter of the texts
    validates; fit's shuffle is the batches' (False: the same batches in the same order every
    epoch). A new head warns once that it is untrained, until fit trains it."""
    caplog.set_level(logging.WARNING, logger="absl")
    rng = random.Random(5)
    # The last quarter, all positive, validates.
    labels = [i % 2 for i in range(30)] + [1] * 10
    texts = [sentiment_sentence(rng, label) for label in labels]
    keras.utils.set_random_seed(2)
    classifier = tasks.TextClassifier.from_pretrained(pretrained_dir, labels=[0, 1],
                                                      max_seq_length=16)
    assert classifier.labels == ("0", "1")
    classifier.predict(texts[:2])
    classifier.predict(texts[:2])
    untrained = [m for m in caplog.messages if "untrained head" in m]
    assert untrained == ["TextClassifier predicts with the untrained head from_pretrained put on "
                         "the encoder (random weights, random answers); fit it first"]
    for split, message in ((1.5, "validation_split=1.5 must be a fraction in (0, 1)"),
                           (0.25, "give validation_data or validation_split, not both")):
        with pytest.raises(tasks.TaskError, match=f"^{re.escape(message)}$"):
            classifier.fit(texts, labels, validation_split=split,
                           validation_data=(texts[:2], labels[:2]))
    with pytest.raises(tasks.TaskError, match=r"^validation_split=0.5 of 1 texts leaves none to "
                       "train on$"):
        classifier.fit(texts[:1], labels[:1], validation_split=0.5)
    made = []  # (rows, shuffle) of each dataset fit makes
    keras_batches = classifier.keras_batches

    def recorded(rows, targets, batch_size, shuffle, **options):
        made.append((len(rows), shuffle))
        return keras_batches(rows, targets, batch_size, shuffle, **options)

    monkeypatch.setattr(classifier, "keras_batches", recorded)
    history = classifier.fit(texts, labels, validation_split=0.25, shuffle=True, epochs=1,
                             batch_size=8, learning_rate=3e-3, verbose=0)
    assert made == [(10, False), (30, True)]  # the validation quarter is never shuffled
    answers = classifier.predict(texts[30:])
    accuracy = np.mean([a["label"] == "1" for a in answers])
    loss = np.mean([-np.log(a["scores"]["1"]) for a in answers])
    assert history.history["val_accuracy"] == [pytest.approx(accuracy, abs=1e-6)]
    assert history.history["val_loss"] == [pytest.approx(loss, abs=1e-5)]
    # Trained: no more warnings, on predict or save.
    classifier.save(tmp_path / "saved")
    assert [m for m in caplog.messages if "untrained head" in m] == untrained
    # fit(shuffle=False) batches unshuffled: the same batches in the same order every epoch.
    classifier.fit(texts, labels, shuffle=False, epochs=1, steps_per_epoch=1, batch_size=4,
                   verbose=0)
    assert made[2:] == [(40, False)]
    rows, _ = classifier._rows(texts, None)
    batches = keras_batches(rows, np.array(labels), 4, shuffle=False)
    first, second = ([b[0]["input_word_ids"].numpy().tolist() for b in batches]
                     for _ in range(2))
    assert first == second and len(first) == 10


def test_save_refuses_another_models_directory(saved_tasks, pretrained_dir, tmp_path):
    """A task is saved into a new or empty directory or over an earlier save of a task of its
    class, never into a run's (its run markers, as the commands' output rule reads them), another
    model's or another class's save, nor inside a model directory (a run's best/)."""
    _, made, _ = saved_tasks
    classifier = made["classifier"]
    run = tmp_path / "run"
    shutil.copytree(pretrained_dir, run)
    names = sorted(os.listdir(run))
    with pytest.raises(tasks.TaskError, match=rf"^save: {re.escape(str(run))} holds a training "
                       r"run \(checkpoint, ckpt-7\.index\); a task is saved into a new or "
                       "empty directory, or over an earlier save: choose another directory$"):
        classifier.save(run)
    assert sorted(os.listdir(run)) == names
    finetuned = tmp_path / "finetuned"
    finetuned.mkdir()
    (finetuned / "bert_tf_run.json").write_text("{}")
    with pytest.raises(tasks.TaskError, match=r"holds a training run \(bert_tf_run.json\)"):
        classifier.save(finetuned)
    converted = tmp_path / "converted"
    converted.mkdir()
    (converted / "pretrainer.keras").write_text("")
    with pytest.raises(tasks.TaskError, match=r"holds a bert_tf model \(pretrainer.keras\)"):
        classifier.save(converted)
    saved = tmp_path / "saved"
    classifier.save(saved)
    classifier.save(saved)  # over its earlier save
    assert bert_tf.load_task(saved).labels == tuple(cases.CLASS_LABELS)
    for task, kind in ((made["fill_mask"], "FillMask ('fill_mask')"),
                       (made["tagging"], "TokenTagger ('tagging')")):
        with pytest.raises(tasks.TaskError, match=rf"^save: {re.escape(str(saved))} holds the "
                           r"save of a 'classification' task \(task_info.json\), which a "
                           rf"{re.escape(kind)} does not replace: choose another directory$"):
            task.save(saved)
    # A TextClassifier replaces any classifier's save: a regression head's too.
    tasks.TextClassifier(BertClassifier(classifier.encoder, 1), classifier.tokenizer,
                         max_seq_length=S).save(saved)
    assert bert_tf.load_task(saved).regression
    for inside, model_dir in ((run / "best", run), (saved / "sub", saved)):
        with pytest.raises(tasks.TaskError, match=rf"^save: {re.escape(str(inside))} is inside "
                           rf"{re.escape(str(model_dir))}, which holds a training run \(.*\); a "
                           "task is never saved inside a model directory: choose another "
                           "location$"):
            classifier.save(inside)
    assert not (run / "best").exists() and not (saved / "sub").exists()


def test_the_classifier_notebook_classifies_on_jax(tmp_path):
    """notebooks/fine_tune_classifier.ipynb's classify cell on KERAS_BACKEND=jax, whose arrays
    have no .numpy(): its set-up cells and classify, untrained (tests/test_notebooks.py runs the
    whole notebook, on TensorFlow)."""
    script = tmp_path / "classify.py"
    script.write_text(
        "import json, sys\n"
        "cells = [''.join(c['source']) for c in json.load(open(sys.argv[1]))['cells']\n"
        "         if c['cell_type'] == 'code']\n"
        "setup = cells[:next(i for i, c in enumerate(cells) if '.fit(' in c)]\n"
        "namespace = {}\n"
        "for cell in setup + [c for c in cells if 'def classify' in c]:\n"
        "    exec(cell, namespace)\n"
        "print(json.dumps([namespace['keras'].backend.backend(),\n"
        "                  namespace['classify'](['a superb film .'])]))\n")
    done = subprocess.run(
        [sys.executable, str(script), os.path.join(REPO, "notebooks",
                                                   "fine_tune_classifier.ipynb")],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=300,
        env=jax_env(PYTHONPATH=REPO, MPLBACKEND="Agg"))
    assert done.returncode == 0, done.stderr[-3000:]
    backend, [(sentence, label, probability)] = json.loads(done.stdout.strip().splitlines()[-1])
    assert backend == "jax" and sentence == "a superb film ." and label in ("negative",
                                                                            "positive")
    assert 0.5 <= probability <= 1
