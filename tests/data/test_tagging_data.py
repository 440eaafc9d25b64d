"""Tagging data: CoNLL reading, first-piece labels, windows, predictions back to words."""

import numpy as np
import pytest

from bert_tf.data.tasks import tagging_data
from bert_tf.data.tasks.task_errors import DataError
from bert_tf.text import WordpieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "rejects", "german", "call",
         "to", "boy", "##cott", "lamb", ".", "peter", "black", "##burn"]

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

"""


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def test_read_conll_2003(tmp_path):
    path = _write(tmp_path / "train.txt", CONLL)
    sentences = tagging_data.read_conll(path)
    assert [s.words for s in sentences] == [
        ("EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."),
        ("Peter", "Blackburn")]
    assert sentences[0].tags[:3] == ("B-ORG", "O", "B-MISC")
    assert (sentences[0].line, sentences[1].line) == (3, 13)
    assert tagging_data.infer_tags(sentences) == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    # Two-column files, another tag column, and unlabelled test files.
    two = _write(tmp_path / "two.txt", "Peter\tB-PER\nran\tO\n")
    assert tagging_data.read_conll(two)[0].tags == ("B-PER", "O")
    pos = tagging_data.read_conll(path, tag_column=1)
    assert pos[1].tags == ("NNP", "NNP")
    bare = _write(tmp_path / "test.txt", "Peter\nran\n\nHe\n")
    sentences = tagging_data.read_conll(bare, require_tags=False)
    assert [(s.words, s.tags) for s in sentences] == [(("Peter", "ran"), None), (("He",), None)]


def test_conll_errors_name_file_and_line(tmp_path):
    path = _write(tmp_path / "bad.txt", "Peter B-PER\nran\n")
    with pytest.raises(DataError, match=r"bad.txt:2: no tag column -1 in 'ran'; expected "
                                        r"'token \.\.\. tag'"):
        tagging_data.read_conll(path)
    with pytest.raises(DataError, match=r"bad.txt:1: this sentence has tags on only 1 of its 2 "
                                        "lines"):
        tagging_data.read_conll(path, require_tags=False)
    sentences = tagging_data.read_conll(_write(tmp_path / "dev.txt", CONLL))
    with pytest.raises(DataError, match=r"dev.txt:5: tag 'B-MISC' of the dev data is not among "
                                        "the labels O, B-ORG"):
        tagging_data.check_tags(sentences, ["O", "B-ORG"], "dev")
    with pytest.raises(DataError, match="missing.txt: no such file"):
        tagging_data.read_conll(str(tmp_path / "missing.txt"))


def test_first_piece_labels_and_windows():
    tokenizer = WordpieceTokenizer(VOCAB)
    sentence = tagging_data.Sentence(("Peter", "Blackburn", "boycott", "\u200b", "EU"),
                                     ("B-PER", "I-PER", "O", "O", "B-ORG"))
    labels = ["O", "B-ORG", "B-PER", "I-PER"]
    stats = {}
    # 7 positions leave 5 pieces per window: peter black ##burn boy ##cott | [UNK] eu.
    windows = tagging_data.make_windows([sentence], tokenizer, 7, stats)
    assert [(w.first_word, w.piece_ids, w.word_positions) for w in windows] == [
        (0, (14, 15, 16, 10, 11), (1, 2, 4)), (3, (1, 5), (1, 2))]
    assert stats == {"split_sentences": 1, "truncated_words": 0, "empty_words": 1}
    features = list(tagging_data.tagging_features(windows, [sentence], tokenizer, 7, labels))
    assert features[0]["input_word_ids"] == [2, 14, 15, 16, 10, 11, 3]
    assert features[0]["label_ids"] == [0, 2, 3, 0, 0, 0, 0]
    # Only the first piece of each word is scored.
    assert features[0]["label_weights"] == [0, 1, 1, 0, 1, 0, 0]
    assert features[1] == {"input_word_ids": [2, 1, 5, 3, 0, 0, 0],
                           "input_mask": [1, 1, 1, 1, 0, 0, 0],
                           "input_type_ids": [0] * 7, "label_ids": [0, 0, 1, 0, 0, 0, 0],
                           "label_weights": [0, 1, 1, 0, 0, 0, 0]}
    # A word longer than a whole window keeps the pieces that fit.
    stats = {}
    (window,) = tagging_data.make_windows(
        [tagging_data.Sentence(("blackburn",), None)], tokenizer, 3, stats)
    assert window.piece_ids == (15,) and stats["truncated_words"] == 1


def test_predictions_go_back_to_words_and_conll_text():
    tokenizer = WordpieceTokenizer(VOCAB)
    sentences = [tagging_data.Sentence(("Peter", "Blackburn", "boycott", "EU"),
                                       ("B-PER", "I-PER", "O", "B-ORG")),
                 tagging_data.Sentence(("eu",), None)]
    windows = tagging_data.make_windows(sentences, tokenizer, 6, {})
    assert [(w.sentence, w.first_word) for w in windows] == [(0, 0), (0, 2), (1, 0)]
    labels = ["O", "B-ORG", "B-PER", "I-PER"]
    ids = np.zeros((4, 6), np.int64)  # one padding row, as evaluation batches have
    ids[0, [1, 2]] = [2, 3]
    ids[1, [1, 3]] = [0, 1]
    ids[2, 1] = 1
    predicted = tagging_data.word_predictions(windows, sentences, ids, labels)
    assert predicted == [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG"]]
    assert tagging_data.conll_text(sentences, predicted) == (
        "Peter B-PER B-PER\nBlackburn I-PER I-PER\nboycott O O\nEU B-ORG B-ORG\n\neu B-ORG\n\n")
