"""The embedded default corpus: the stdlib's reference manual in pre-training text format."""

from bert_tf.data.pretraining import demo_corpus


def test_split_sentences_keeps_abbreviations_inside_sentences():
    text = "The value is 3.5 here. It is fine! Really? \"Quoted\" text (x) ends."
    assert demo_corpus.split_sentences(text) == [
        "The value is 3.5 here.", "It is fine!", "Really?", "\"Quoted\" text (x) ends."]


def test_headings_start_new_documents_and_are_dropped():
    text = "Title\n*****\n\nFirst one. Second one.\n\nSub\n===\n\nThird one. Fourth one.\n"
    paragraphs = list(demo_corpus._paragraphs(text))
    assert paragraphs == [(True, "Title"), (False, "First one. Second one."),
                          (True, "Sub"), (False, "Third one. Fourth one.")]


def test_pydoc_documents_are_real_multi_sentence_prose():
    documents = demo_corpus.pydoc_documents()
    assert len(documents) > 150
    assert all(len(doc) >= 2 for doc in documents)
    sentences = [s for doc in documents for s in doc]
    assert len(sentences) > 3000
    assert all(s == s.strip() and "\n" not in s and s for s in sentences)


def test_write_demo_corpus_holds_out_every_tenth_document(tmp_path):
    train, held_out = tmp_path / "train.txt", tmp_path / "eval.txt"
    num_train, num_eval = demo_corpus.write_demo_corpus(str(train), str(held_out))
    documents = demo_corpus.pydoc_documents()
    assert num_train + num_eval == len(documents)
    assert num_eval == len(documents) // 10
    train_docs = train.read_text(encoding="utf-8").strip().split("\n\n")
    eval_docs = held_out.read_text(encoding="utf-8").strip().split("\n\n")
    assert len(train_docs) == num_train and len(eval_docs) == num_eval
    assert eval_docs[0].split("\n") == documents[9]
    assert not set(eval_docs) & set(train_docs)


def test_classification_data_labels_reference_sentences_by_topic_kind(tmp_path):
    import csv

    counts = demo_corpus.write_classification_data(str(tmp_path / "classify"))
    rows = {name: list(csv.DictReader(open(tmp_path / "classify" / name, encoding="utf-8")))
            for name in ("train.csv", "dev.csv", "test.csv")}
    assert {name: len(r) for name, r in rows.items()} == counts
    assert counts["train.csv"] > 1200 and 150 < counts["dev.csv"] == counts["test.csv"]
    everything = [row for r in rows.values() for row in r]
    assert {row["label"] for row in everything} == {"statement", "type"}
    texts = [row["text"] for row in everything]
    assert len(set(texts)) == len(texts)  # no sentence in two splits
    # The labels follow the topics: the assert statement's first sentence is a "statement".
    first = rows["dev.csv"][0]
    assert first == {"text": "Assert statements are a convenient way to insert debugging "
                             "assertions into a program:", "label": "statement"}
    train_labels = [row["label"] for row in rows["train.csv"]]
    assert 0.3 < train_labels.count("statement") / len(train_labels) < 0.5


def test_table_borders_are_no_prose():
    text = "Title\n*****\n\n+-----+-----+\n| a   | b   |\n|=====|=====|\n| one | two |\n+-----+\n"
    assert list(demo_corpus._paragraphs(text)) == [(True, "Title"),
                                                    (False, "| a   | b   | | one | two |")]


def test_long_sentences_are_cut_between_words_at_the_piece_budget():
    from bert_tf.text import WordpieceTokenizer

    tokenizer = WordpieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b",
                                    "long", "##er", "."])
    sentences = ["a b .", "a longer b a longer b .", "longerlonger"]
    # "a longer b a longer b ." is 9 pieces; at most 4 per part, words kept whole; a single
    # word over the budget stays as it is (create_pretraining_data truncates it).
    assert demo_corpus.cut_long_sentences(sentences, tokenizer, 4) == [
        "a b .", "a longer b", "a longer b", ".", "longerlonger"]


def test_embedding_data_pairs_a_sentence_with_the_rest_of_its_paragraph(tmp_path):
    from bert_tf.data.tasks.pairs import read_pairs

    counts = demo_corpus.write_embedding_data(str(tmp_path))
    assert counts["pairs.tsv"] > 600 and counts["dev_pairs.tsv"] == counts["corpus.txt"] > 60
    train = read_pairs(str(tmp_path / "pairs.tsv"))
    dev = read_pairs(str(tmp_path / "dev_pairs.tsv"))
    assert (len(train), len(dev)) == (counts["pairs.tsv"], counts["dev_pairs.tsv"])
    corpus = (tmp_path / "corpus.txt").read_text(encoding="utf-8").splitlines()
    assert corpus == dev.positives
    # The query is one sentence of the paragraph, the passage the others: never inside it.
    documents = {" ".join(d) for d in demo_corpus.short_documents(2, 5)}
    assert all(query not in passage for query, passage in zip(train.anchors, train.positives))
    assert sum(any(train.anchors[i] in d and train.positives[i].split(". ")[0] in d
                   for d in documents) for i in range(50)) >= 45
