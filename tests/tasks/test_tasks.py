"""bert_tf.tasks: models that carry their tokenizer and labels, answering raw text.

Predictions are checked against the model on full-length inputs packed by hand (bucketing cuts
only padding), against bert_tf's own commands in tests/finetuning, test_run_squad and
tests/cli/test_embed (the run's predictions files), and against the SavedModel text signatures
in tests/serving/test_tasks_answer_as_exports.py.
"""

import json
import os
import random

import keras
import numpy as np
import pytest

import bert_tf
import serving_cases as cases
from bert_tf import tasks
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSentenceEmbedder,
                              BertSpanLabeler, BertTokenClassifier)
from bert_tf.text.input_packing import pack_inputs
from finetuning_helpers import sentiment_sentence
from no_tensorflow import run_without_tensorflow
from task_cases import answer, same_answers

S = cases.SEQ_LENGTH
HERE = os.path.dirname(os.path.abspath(__file__))


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
    gives every label above 0.5, save / load_task keep the head's kind; bad label lists are
    refused naming the text."""
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
    classifier.save(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "task_info.json").read_text())["task"] == (
        "multi_label")
    loaded = bert_tf.load_task(tmp_path / "saved")
    assert loaded.multi_label and same_answers(loaded.predict(texts), answers)
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
