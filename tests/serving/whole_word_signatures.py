"""Checks of the classifier, tagging, SQuAD and fill-mask text signatures of exports whose
tokenizer maps pieces back to whole words only (byte-level BPE, SentencePiece), against Python:
the words found with Python's `re`, each encoded as bert-tf-tag and bert-tf-squad encode words
(`encode_word`), the Keras model on the packed ids."""

import re

import numpy as np
import tensorflow as tf

from bert_tf.text import bpe

import serving_cases as cases

# SQuAD's whitespace (bert_tf.data.tasks.squad.whitespace_split).
SQUAD_WORDS = "[^ \t\r\n\u202f]+"


def words_of(text, pattern):
    """(word, start, end) of the words `pattern` finds (Python `re`)."""
    return [(m.group(), m.start(), m.end()) for m in re.finditer(pattern, text)]


def pieces_pattern():
    """The words the tagging signature labels: the GPT-2 pattern's words without their space,
    marks joined to their letters (bert_tf.text.word_offsets)."""
    letters, numbers, space = (bpe._python_class(c) for c in bpe.character_classes())
    letters += bpe._python_class(bpe.mark_class())
    return "|".join([re.escape(c) for c in bpe.CONTRACTIONS] + [
        f"[{letters}]+", f"[{numbers}]+", f"[^{space}{letters}{numbers}]+"])


def word_ids(tokenizer, words):
    """Ids of each word as bert-tf-tag and bert-tf-squad encode them, and each id's word."""
    ids, owner = [], []
    for w, (word, _, _) in enumerate(words):
        pieces = tokenizer.encode_word(word, first=w == 0)
        ids += pieces
        owner += [w] * len(pieces)
    return ids, owner


def check_classifier(model, tokenizer, export_dir, texts, pairs):
    """The classifier's serve_text probabilities for (text, text_pair) are the Keras model's on
    the pairs Python packs, [CLS] first."""
    served = tf.saved_model.load(export_dir).signatures["serve_text"]
    got = served(text=tf.constant(texts), text_pair=tf.constant(pairs))
    features = cases.pack_batch(tokenizer, [tokenizer.encode(t) for t in texts],
                                [tokenizer.encode(t) for t in pairs])
    assert (features["input_word_ids"][:, 0] == tokenizer.cls_id).all()
    np.testing.assert_allclose(got["probabilities"].numpy(),
                               cases.softmax(model(features).numpy()), rtol=0, atol=1e-5)


def check_tagging(tagger, tokenizer, export_dir, texts, truncated):
    """Labels at each word's first piece, scores and whole-word offsets as Python finds them;
    `truncated`: the index of the one text too long for the signature. Returns the words."""
    got = tf.saved_model.load(export_dir).signatures["serve_text"](text=tf.constant(texts))
    words = [words_of(t, pieces_pattern()) for t in texts]
    encoded = [word_ids(tokenizer, w) for w in words]
    features = cases.pack_batch(tokenizer, [ids for ids, _ in encoded])
    probabilities = cases.softmax(tagger(features).numpy())
    for b, (text_words, (_, owner)) in enumerate(zip(words, encoded)):
        first = {w: owner.index(w) for w in range(len(text_words))}
        kept = [w for w in range(len(text_words)) if first[w] < cases.SEQ_LENGTH - 2]
        n = int(got["num_tokens"][b])
        assert n == len(kept) and (n < len(text_words)) == (b == truncated)
        p = probabilities[b, [first[w] + 1 for w in kept]]
        assert [t.decode("utf-8") for t in got["tokens"][b, :n].numpy()] == [
            text_words[w][0] for w in kept]
        assert [label.decode() for label in got["labels"][b, :n].numpy()] == [
            cases.TAGS[i] for i in p.argmax(-1)]
        np.testing.assert_allclose(got["scores"][b, :n].numpy(), p.max(-1), atol=1e-5)
        assert got["start_offsets"][b, :n].numpy().tolist() == [text_words[w][1] for w in kept]
        assert got["end_offsets"][b, :n].numpy().tolist() == [text_words[w][2] for w in kept]
    return words


def check_squad(labeler, tokenizer, export_dir, questions, contexts):
    """The question encoded as a text, the context's SQuAD-whitespace words as bert-tf-squad
    encodes them; the best span over context pieces (the max-context rule over overlapping
    windows), widened to whole words, cut from the context as written. Returns the number of
    questions answered and the context words' ids."""
    got = tf.saved_model.load(export_dir).signatures["serve_text"](
        question=tf.constant(questions), context=tf.constant(contexts))
    q_ids = [tokenizer.encode(q)[:cases.MAX_QUERY_LENGTH] for q in questions]
    words = [words_of(c, SQUAD_WORDS) for c in contexts]
    encoded = [word_ids(tokenizer, w) for w in words]
    best, _, _ = cases.best_spans(tokenizer, labeler, q_ids, [ids for ids, _ in encoded])
    answered = 0
    for b, found in enumerate(best):
        if found is None:
            assert got["answer_text"][b].numpy() == b"" and got["score"][b] == 0
            continue
        answered += 1
        score, _, i, j = found
        owner = encoded[b][1]
        answer_start, answer_end = words[b][owner[i]][1], words[b][owner[j]][2]
        assert (int(got["answer_start"][b]), int(got["answer_end"][b])) == (answer_start,
                                                                            answer_end)
        assert got["answer_text"][b].numpy().decode() == contexts[b][answer_start:answer_end]
        np.testing.assert_allclose(got["score"][b].numpy(), score, atol=1e-4)
    return answered, encoded


def check_fill_mask(model, tokenizer, layer, export_dir, texts):
    """Mask positions and top-k ids and tokens of the served texts as Python finds them (the
    masks as the Python tokenizer finds them in the text). Returns the texts' ids."""
    got = tf.saved_model.load(export_dir).signatures["serve_text"](text=tf.constant(texts))
    ids = [tokenizer.encode(t) for t in texts]
    features = cases.pack_batch(tokenizer, ids)
    positions = [[i for i, t in enumerate(row) if t == tokenizer.mask_id] for row in
                 features["input_word_ids"]]
    padded = np.array([p + [-1] * (2 - len(p)) for p in positions], np.int32)
    np.testing.assert_array_equal(got["mask_positions"].numpy(), padded)
    logits = model(dict(features, masked_lm_positions=np.maximum(padded, 0)),
                   training=False)["mlm_logits"].numpy()[:, :, :tokenizer.vocab_size]
    top = np.argsort(-logits, axis=-1)[:, :, :3]
    top = np.where(padded[:, :, None] >= 0, top, -1)
    np.testing.assert_array_equal(got["top_k_ids"].numpy(), top)
    texts_of = layer.token_texts()
    assert [[t.decode("utf-8") for t in row] for row in got["top_k_tokens"].numpy()[0]] == [
        [texts_of[i] if i >= 0 else "" for i in row] for row in top[0]]
    return ids
