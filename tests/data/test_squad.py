"""SQuAD reading, answer alignment, sliding-window features and the tf.data pipeline."""

import json

import numpy as np
import pytest

from bert_tf.data.tasks import squad
from bert_tf.text import WordpieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "leader", "was", "john", "smith",
         "(", ")", "-", ".", "18", "##95", "19", "##43", "who", "when", "born", "?", "a", "b",
         "c", "d", "e", "f", "g", "h", "i", "j", "japan", "##ese"]


@pytest.fixture
def tokenizer():
    return WordpieceTokenizer(VOCAB, do_lower_case=True)


def _data(context, *qas):
    return [{"title": "t", "paragraphs": [{"context": context, "qas": list(qas)}]}]


def _qa(qid, question, text=None, start=None, **extra):
    qa = {"id": qid, "question": question,
          "answers": [] if text is None else [{"text": text, "answer_start": start}]}
    qa.update(extra)
    return qa


def test_whitespace_split_maps_every_character_to_its_word():
    words, char_to_word = squad.whitespace_split(" ab  c\td\u202fe\u00a0f")
    # U+202F separates words as in the original; U+00A0 does not.
    assert words == ["ab", "c", "d", "e\u00a0f"]
    assert char_to_word == [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3]


def test_answers_align_to_words_and_mismatches_are_skipped_and_counted(caplog):
    context = "The leader was John Smith (1895-1943)."
    data = _data(context,
                 _qa("born", "When was John Smith born?", "1895", context.index("1895")),
                 _qa("who", "Who was the leader?", "John Smith", context.index("John")),
                 _qa("off", "Who?", "John Smith", context.index("leader")),
                 _qa("outside", "Who?", "Smith", len(context) + 3))
    examples, skipped = squad.read_squad_examples(data, "train.json", is_training=True,
                                                  version_2_with_negative=False)
    assert [e.qas_id for e in examples] == ["born", "who"]
    assert skipped == 2
    assert (examples[0].start_position, examples[0].end_position) == (5, 5)
    assert examples[0].doc_tokens[5] == "(1895-1943)."
    assert (examples[1].start_position, examples[1].end_position) == (3, 4)
    assert examples[0].doc_tokens is examples[1].doc_tokens
    assert "does not match the context at answer_start=4" in caplog.text
    assert "is outside the context" in caplog.text

    # Prediction reads every question, answers or not.
    examples, skipped = squad.read_squad_examples(data, "dev.json", is_training=False,
                                                  version_2_with_negative=False)
    assert len(examples) == 4 and skipped == 0 and examples[2].start_position == -1


def test_version_2_unanswerable_and_version_1_missing_answer():
    data = _data("a b c", _qa("q", "who?", is_impossible=True))
    examples, _ = squad.read_squad_examples(data, "train.json", is_training=True,
                                            version_2_with_negative=True)
    assert examples[0].is_impossible and examples[0].start_position == -1
    with pytest.raises(squad.SquadFormatError) as error:
        squad.read_squad_examples(data, "train.json", is_training=True,
                                  version_2_with_negative=False)
    assert str(error.value) == (
        "train.json: data[0].paragraphs[0].qas[0] (id q): no answer; every training question "
        "needs one (or pass --version_2_with_negative for unanswerable questions)")


@pytest.mark.parametrize("content, message", [
    ("{not json", "bad.json: not valid JSON: "),
    ('{"version": "1.1"}', "bad.json: expected a JSON object with a 'data' list of articles"),
    ('{"data": [{"title": "t"}]}', "bad.json: data[0]: missing field 'paragraphs'"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "q"}]}]}]}',
     "bad.json: data[0].paragraphs[0].qas[0]: missing field 'question'"),
    ('{"data": [{"paragraphs": [{"context": 3, "qas": []}]}]}',
     "bad.json: data[0].paragraphs[0].context: expected str, got int"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "q", "question": "?", '
     '"answers": [{"text": "x", "answer_start": "0"}]}]}]}]}',
     "bad.json: data[0].paragraphs[0].qas[0].answers[0].answer_start: expected int, got str"),
])
def test_malformed_files_name_the_file_and_field(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(squad.SquadFormatError) as error:
        data = squad.load_squad_json(str(path))
        squad.read_squad_examples(data, "bad.json", is_training=True,
                                  version_2_with_negative=False)
    assert message in str(error.value).replace(str(tmp_path) + "/", "")


def test_gold_answers_detection():
    with_gold = _data("a", _qa("q", "?", "a", 0))
    assert squad.check_squad_data(with_gold, "f", version_2_with_negative=False)
    unanswerable = _data("a", _qa("q", "?"))
    assert not squad.check_squad_data(unanswerable, "f", version_2_with_negative=False)
    assert squad.check_squad_data(unanswerable, "f", version_2_with_negative=True)
    hidden = _data("a", {"id": "q", "question": "?"})
    assert not squad.check_squad_data(hidden, "f", version_2_with_negative=True)


def test_windows_and_max_context_by_hand():
    # 10 pieces, 4 per window, stride 2: [0-3] [2-5] [4-7] [6-9].
    windows = squad.doc_windows(10, 4, 2)
    assert windows == [(0, 4), (2, 4), (4, 4), (6, 4)]
    # Piece 3: min(left, right) is 0 in window 0 and 1 in window 1 -> window 1.
    assert squad.max_context_windows(windows, 10) == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    # The last window is shorter when the stride does not divide the rest.
    assert squad.doc_windows(7, 4, 2) == [(0, 4), (2, 4), (4, 3)]
    assert squad.doc_windows(3, 4, 2) == [(0, 3)]
    # Equal min(left, right): the longer window wins; a full tie (piece 2), the first.
    assert squad.max_context_windows([(0, 3), (0, 4)], 4) == [1, 1, 1, 1]
    assert squad.max_context_windows([(0, 4), (1, 4)], 5) == [0, 0, 0, 1, 1]


def test_features_positions_windows_and_maps(tokenizer):
    context = "a b c d e f g h i j"
    data = _data(context, _qa("q", "who", "f", context.index("f")))
    examples, _ = squad.read_squad_examples(data, "t", is_training=True,
                                            version_2_with_negative=False)
    # Query "who" -> [CLS] who [SEP]: 3 + 1 final [SEP] leaves 4 pieces per window at S=8.
    features = list(squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=8, doc_stride=2, max_query_length=1,
        is_training=True))
    assert [f.window_index for f in features] == [0, 1, 2, 3]
    assert features[1].tokens == ["[CLS]", "who", "[SEP]", "c", "d", "e", "f", "[SEP]"]
    assert features[1].token_to_orig_map == {3: 2, 4: 3, 5: 4, 6: 5}
    assert features[1].token_is_max_context == {3: False, 4: True, 5: True, 6: False}
    assert features[1].segment_a_length == 3
    # "f" is piece 5: at position 6 in window 1 ([2-5]) and 4 in window 2 ([4-7]); windows
    # without it point at [CLS].
    assert [(f.start_position, f.end_position) for f in features] == [(0, 0), (6, 6), (4, 4),
                                                                      (0, 0)]
    assert features[2].input_word_ids == tokenizer.convert_tokens_to_ids(features[2].tokens)


def test_answer_span_narrows_to_matching_pieces(tokenizer):
    context = "The leader was John Smith (1895-1943)."
    data = [{"paragraphs": [
        {"context": context, "qas": [_qa("q", "when born?", "1895", context.index("1895"))]},
        {"context": "Japanese leader", "qas": [_qa("r", "who?", "Japan", 0),
                                               _qa("s", "who?", "Jap", 0)]}]}]
    examples, _ = squad.read_squad_examples(data, "t", is_training=True,
                                            version_2_with_negative=False)
    born, japan, jap = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=32, doc_stride=8, max_query_length=8,
        is_training=True)

    def answer(feature):
        return feature.tokens[feature.start_position:feature.end_position + 1]

    # "(1895-1943)." -> ( 18 ##95 - 19 ##43 ) . and the answer is just "18 ##95".
    assert answer(born) == ["18", "##95"]
    # "Japanese" -> japan ##ese: the answer "Japan" is the first piece.
    assert answer(japan) == ["japan"]
    # No piece sequence spells "jap" ([UNK]): the whole word is the answer.
    assert answer(jap) == ["japan", "##ese"]


def test_unanswerable_training_windows_point_at_cls(tokenizer):
    data = _data("a b c d e f", _qa("q", "who", is_impossible=True))
    examples, _ = squad.read_squad_examples(data, "t", is_training=True,
                                            version_2_with_negative=True)
    features = list(squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=7, doc_stride=1, max_query_length=2,
        is_training=True))
    assert len(features) == 4
    assert all(f.is_impossible and f.start_position == f.end_position == 0 for f in features)


def test_query_is_cut_and_window_sizes_are_checked(tokenizer):
    data = _data("a b", _qa("q", "a b c d e f g h"))
    examples, _ = squad.read_squad_examples(data, "t", is_training=False,
                                            version_2_with_negative=False)
    (feature,) = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=16, doc_stride=4, max_query_length=3,
        is_training=False)
    assert feature.tokens == ["[CLS]", "a", "b", "c", "[SEP]", "a", "b", "[SEP]"]
    assert feature.start_position == -1
    with pytest.raises(ValueError) as error:
        squad.check_window_sizes(64, 64, 128)
    assert str(error.value) == (
        "--max_seq_length=64 leaves no room for the context after a question of "
        "--max_query_length=64 pieces plus [CLS] and two [SEP]; it must be at least 68")
    with pytest.raises(ValueError, match=r"--doc_stride=318 must be in \[1, 317\]"):
        squad.check_window_sizes(384, 64, 318)
    squad.check_window_sizes(384, 64, 128)


def test_dataset_shapes_masks_and_padding(tokenizer):
    context = "a b c d e f g h i j"
    data = _data(context, _qa("q", "who", "f", context.index("f")),
                 _qa("r", "when born", "b", context.index("b")))
    examples, _ = squad.read_squad_examples(data, "t", is_training=True,
                                            version_2_with_negative=False)
    features = list(squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=10, doc_stride=3, max_query_length=4,
        is_training=True))
    train = squad.features_to_arrays(features, 10, is_training=True)
    batch = next(iter(squad.squad_dataset(train, batch_size=3, is_training=True, seed=0)))
    assert {k: tuple(v.shape) for k, v in batch.items()} == {
        "input_word_ids": (3, 10), "input_mask": (3, 10), "input_type_ids": (3, 10),
        "start_positions": (3,), "end_positions": (3,)}

    eval_arrays = squad.features_to_arrays(features, 10, is_training=False)
    assert "start_positions" not in eval_arrays
    batches = list(squad.squad_dataset(eval_arrays, batch_size=4, is_training=False))
    n = len(features)
    assert len(batches) == -(-n // 4)
    weights = np.concatenate([b["example_weights"].numpy() for b in batches])
    assert weights.tolist() == [1.0] * n + [0.0] * (-n % 4)
    ids = np.concatenate([b["input_word_ids"].numpy() for b in batches])
    mask = np.concatenate([b["input_mask"].numpy() for b in batches])
    types = np.concatenate([b["input_type_ids"].numpy() for b in batches])
    for i, feature in enumerate(features):
        length = len(feature.tokens)
        assert ids[i, :length].tolist() == feature.input_word_ids and not ids[i, length:].any()
        assert mask[i].tolist() == [1] * length + [0] * (10 - length)
        a = feature.segment_a_length
        assert types[i].tolist() == [0] * a + [1] * (length - a) + [0] * (10 - length)
    assert not mask[n:].any()


def test_examples_from_a_file_round_trip(tmp_path):
    context = "The leader was John Smith."
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "1.1", "data": _data(
        context, _qa(7, "Who?", "John Smith", context.index("John")))}))
    data = squad.load_squad_json(str(path))
    examples, _ = squad.read_squad_examples(data, str(path), is_training=True,
                                            version_2_with_negative=False)
    # Integer ids become strings, as JSON prediction files key them.
    assert examples[0].qas_id == "7" and examples[0].orig_answer_text == "John Smith"
    with pytest.raises(squad.SquadFormatError, match="missing.json: no such file"):
        squad.load_squad_json(str(tmp_path / "missing.json"))


def test_bpe_features_hold_the_context_ids_and_answer_positions_give_the_answer_words():
    """Byte-level BPE (a ModernBERT tokenizer.json): each window holds the ids of the context
    as encoded whole, and the training positions cover exactly the answer's words, narrowed to
    the answer's pieces inside a word ("1895" in "(1895-1943).")."""
    from bpe_fixtures import BPE_TOKENIZER_JSON

    from bert_tf.text import load_tokenizer

    tokenizer = load_tokenizer(BPE_TOKENIZER_JSON)
    context = "Nikola Tesla (1895-1943). The Denver Broncos won in Santa Clara, California."
    data = _data(context, _qa("start", "Who?", "Nikola Tesla", 0),
                 _qa("team", "Which team won?", "Denver Broncos", context.index("Denver")),
                 _qa("year", "When?", "1895", context.index("1895")),
                 _qa("state", "Where?", "California", context.index("California")))
    examples, skipped = squad.read_squad_examples(data, "t", is_training=True,
                                                  version_2_with_negative=False)
    assert skipped == 0
    features = list(squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=40, doc_stride=8, max_query_length=10,
        is_training=True))
    context_ids = tokenizer.encode(context)
    answers = {}
    for feature in features:
        example = examples[feature.example_index]
        query_ids = tokenizer.encode(example.question_text)
        assert feature.input_word_ids[:len(query_ids) + 2] == tokenizer.with_special_tokens(
            query_ids)
        window = feature.input_word_ids[len(query_ids) + 2:-1]
        assert feature.input_word_ids[-1] == tokenizer.sep_id
        assert window and any(context_ids[i:i + len(window)] == window
                              for i in range(len(context_ids)))
        if feature.start_position > 0:
            start, end = feature.start_position, feature.end_position
            words = example.doc_tokens[feature.token_to_orig_map[start]:
                                       feature.token_to_orig_map[end] + 1]
            answers.setdefault(example.qas_id, set()).add(
                (" ".join(words), tokenizer.decode(feature.input_word_ids[start:end + 1])))
    assert answers == {"start": {("Nikola Tesla", "Nikola Tesla")},
                       "team": {("Denver Broncos", " Denver Broncos")},
                       "year": {("(1895-1943).", "1895")},
                       "state": {("California.", " California")}}
