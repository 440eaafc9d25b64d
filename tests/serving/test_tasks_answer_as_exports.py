"""bert_tf.tasks (Python tokenization, length buckets, Keras) answer raw text as the exported
text signatures of the same models do (tokenization in the graph, served by TensorFlow alone):
the shared session exports of conftest.serving_run, on the serving cases' awkward texts."""

import numpy as np
import pytest

import bert_tf
import serving_cases as cases
from bert_tf import tasks
from serving_cases import text_inputs

S = cases.SEQ_LENGTH


def _pairs(got, *names):
    """Rows of an export's padded outputs: per text, the list of (name values) tuples."""
    return [list(zip(*(got[name][b] for name in names))) for b in range(len(got[names[0]]))]


@pytest.mark.parametrize("call", ["text", "text_short"])
def test_classifier(serving_run, python_tok, call):
    inputs = text_inputs("classifier", call)
    task = tasks.TextClassifier(serving_run.model("classifier"), python_tok, cases.CLASS_LABELS,
                                max_seq_length=S, text_pair=True)
    answers = task.predict(inputs["text"], inputs["text_pair"])
    got = serving_run.output("classifier", call)
    assert [a["label"] for a in answers] == got["predicted_label"].tolist()
    np.testing.assert_allclose([[a["scores"][n] for n in cases.CLASS_LABELS] for a in answers],
                               got["probabilities"], atol=2e-5)


@pytest.mark.parametrize("call", ["text", "text_short", "text_unicode"])
def test_question_answerer(serving_run, python_tok, call):
    inputs = text_inputs("squad", call)
    task = tasks.QuestionAnswerer(serving_run.model("squad"), python_tok, max_seq_length=S,
                                  max_query_length=cases.MAX_QUERY_LENGTH,
                                  doc_stride=cases.DOC_STRIDE,
                                  max_answer_length=cases.MAX_ANSWER_LENGTH)
    answers = task.predict(inputs["question"], inputs["context"])
    got = serving_run.output("squad", call)
    assert [(a["answer"], a["start"], a["end"]) for a in answers] == list(zip(
        got["answer_text"].tolist(), got["answer_start"].tolist(), got["answer_end"].tolist()))


@pytest.mark.parametrize("call", ["text", "text_short", "text_unicode"])
def test_token_tagger_on_texts_that_fit(serving_run, python_tok, call):
    texts = text_inputs("tagging", call)["text"]
    task = tasks.TokenTagger(serving_run.model("tagging"), python_tok, cases.TAGS,
                             max_seq_length=S)
    answers = task.predict(texts)
    got = serving_run.output("tagging", call)
    exported = _pairs(got, "tokens", "labels", "scores", "start_offsets", "end_offsets")
    compared = 0
    for b, words in enumerate(answers):
        count = int(got["num_tokens"][b])
        if len(words) != count:
            # The export reads one window and leaves out words past it (the long text, every
            # word a piece); the task reads every word, as bert-tf-tag does.
            assert len(words) > count == S - 2
            continue
        compared += 1
        assert [(w["word"], w["tag"], w["start"], w["end"]) for w in words] == [
            (t, label, start, end) for t, label, _, start, end in exported[b][:count]]
        np.testing.assert_allclose([w["score"] for w in words],
                                   [score for _, _, score, _, _ in exported[b][:count]],
                                   atol=2e-5)
    assert compared >= len(texts) - 1


@pytest.mark.parametrize("call", ["text", "text_short"])
def test_fill_mask_from_the_pretraining_run(serving_run, call):
    # The run directory the export tool read: casing and length from its flagfile.
    task = bert_tf.load_task(serving_run.pretraining_run)
    assert isinstance(task, tasks.FillMask) and task.max_seq_length == S
    answers = task.predict(text_inputs("fill_mask", call)["text"], top_k=cases.TOP_K)
    got = serving_run.output("fill_mask", call)
    for b, masks in enumerate(answers):
        assert len(masks) == int((got["mask_positions"][b] >= 0).sum())
        for k, guesses in enumerate(masks):
            assert [g["id"] for g in guesses] == got["top_k_ids"][b, k].tolist()
            assert [g["token"] for g in guesses] == got["top_k_tokens"][b, k].tolist()
            np.testing.assert_allclose([g["score"] for g in guesses],
                                       got["top_k_probabilities"][b, k], atol=2e-5)
