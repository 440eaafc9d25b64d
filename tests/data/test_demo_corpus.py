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
