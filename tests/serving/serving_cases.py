"""Inputs, tiny models and Python reference paths shared by the bert_tf.serving tests.

The references compute every serving output without TensorFlow's text ops: the Python
WordpieceTokenizer, `pack_inputs`, the Keras model on numpy ids, and numpy post-processing
(softmax, the SQuAD span search, top-k). Character offsets come from a plain-Python
alignment of the tokenizer's per-character rules to the input (`piece_spans`).
"""

import numpy as np

from bert_tf.config import BertConfig
from bert_tf.data.tasks import squad
from bert_tf.text import tokenization
from bert_tf.text.input_packing import pack_inputs

SEQ_LENGTH = 32
MAX_QUERY_LENGTH = 8
MAX_ANSWER_LENGTH = 5
# The SQuAD export's windows start 8 tokens apart: a long context is read in overlapping windows.
DOC_STRIDE = 8
TOP_K = 3
CLASS_LABELS = ["negative", "neutral", "positive"]
TAGS = ["O", "B-LOC", "I-LOC", "B-PER"]

VOCAB = list(tokenization.SPECIAL_TOKENS) + (
    "the cat sat on mat . , ! ? : ; - — hello world un ##aff ##able is was in of a an "
    "paris france capital city river seine flows through dog ran away big small "
    "unicode ##s ##ed ##ing cafe e ##e ##t 北 京 is ' what where who which does "
    "x ##x long text very end marie curie born warsaw 1867 in ##n ##o ##d ##r").split()
# Tokens appear once.
VOCAB = list(dict.fromkeys(VOCAB))

LONG_TEXT = "A very long text: " + "the dog ran away from the big city . " * 120
TEXTS = [
    "The cat sat on the mat.",
    "",
    "Hello, unaffable world!",
    "Ünïcödé café in Paris — 北京 \u00a0 🙂 ΣΑΣ",
    LONG_TEXT,
    "   ",
    "x" * 250 + " end",
    "Paris is the capital of France.",
]
PAIRS = ["Where does the Seine flow?", "the cat", "", "北京", "small", LONG_TEXT, "", "x"]
MASKED_TEXTS = [
    "[MASK] is the capital of [MASK].",
    "The cat sat on the [MASK]",
    "",
    "no mask here",
    LONG_TEXT + " [MASK]",
    "[MASK][MASK] café [MASK]",
    "[mask] is not a mask; [MASK] is.",
]
QUESTIONS = ["Where does the Seine flow?", "Who was born in Warsaw?", "", "What?",
             "which " * 20, "Ünïcödé?", "What is the capital?"]
CONTEXTS = [
    "The river Seine flows through Paris, the capital of France.",
    "Marie Curie was born in Warsaw in 1867.",
    "The cat sat on the mat.",
    "",
    LONG_TEXT,
    "Café in Paris — 北京 is a big city.",
    "   ",
]


# Regression (BertClassifier with one output) is exported in test_export_args.py.
KINDS = ("classifier", "squad", "tagging", "fill_mask", "embedding")
IDS_SEQ_LENGTH = 20  # The id signature takes any length, not only the text signatures' S.


def _text_inputs(kind):
    """The batch each kind's text signature is called with: dict name -> list of str."""
    if kind == "classifier":
        return {"text": TEXTS, "text_pair": PAIRS}
    if kind == "squad":
        return {"question": QUESTIONS, "context": CONTEXTS}
    if kind == "fill_mask":
        return {"text": MASKED_TEXTS}
    return {"text": TEXTS}


# Batches whose packed inputs all fit a short length bucket (16 of the default (4, ..., 32); 12
# of the tagging export's (8, 12, 16, 24, 32)): the text signatures run the encoder at that
# length, and must answer as the full-length path does.
SHORT_INPUTS = {
    "classifier": {"text": ["The cat sat on the mat.", "Paris is the capital of France."],
                   "text_pair": ["Where is the cat?", ""]},
    "squad": {"question": ["Where is the cat?", "Who?"],
              "context": ["The cat sat on the mat.", "Marie Curie was born in Warsaw."]},
    "tagging": {"text": ["Marie Curie was born in Warsaw.", "The cat sat on the mat.", ""]},
    "fill_mask": {"text": ["[MASK] is the capital of [MASK].", "The cat sat on the [MASK]"]},
    "embedding": {"text": ["The cat sat on the mat.", "Café in Paris", ""]},
}
TAGGING_LENGTH_BUCKETS = (8, 12, 16, 24)  # tagging's export option (32 is added).
TOOL_LENGTH_BUCKETS = "8,16"  # --length_buckets of the fill-mask export by the tool.


# Contexts whose answers the original's get_final_text misplaces: unspaced CJK (one context
# word; 北 and 京 are in VOCAB, the other ideographs are [UNK]), uncased Hangul and Greek
# ([UNK] words), accents; answers are cut at the characters of their pieces.
UNICODE_SQUAD = {
    "question": ["北京?", "Where?", "What is big?", "Who?", "Which city?"],
    "context": ["北京是大城市北京北京城市", "大学北京北京。北京大学。京北",
                "한국어 문장 the cat 北京", "ΟΔΟΣ café Zürich 北京市 the cat", "京北京北京北京北"],
}


# Texts whose tagger's words (bert_tf.tasks.token_tagger.split_words, CoNLL words) hold
# characters the tokenizer deletes or splits at: a decomposed accent, controls and a byte-order
# mark at a word's edges or alone, U+2028 and "\u2260" (NFD "=") inside a word. No word ends
# in NUL: the outputs come back as numpy str, which drops trailing NULs.
UNICODE_TAGGING = {
    "text": ["Café naïve Cafe\u0301 résumé", "\x00null\x01 word", "\ufeff Paris is a city .",
             "the cat \u200b sat\u2028on the mat \u2260 x", "北\x01京 x.\u0301 y"],
}


def text_inputs(kind, call="text"):
    """The batch of a text call ("text", "text_short", squad's and tagging's "text_unicode"):
    dict name -> list of str."""
    if call == "text_unicode":
        return UNICODE_SQUAD if kind == "squad" else UNICODE_TAGGING
    return SHORT_INPUTS[kind] if call == "text_short" else _text_inputs(kind)


def _ids_row(length, **values):
    """One id-signature request of `length` tokens; values override the zero/one defaults."""
    row = {"input_word_ids": [[2] + [5] * (length - 1)], "input_mask": [[1] * length],
           "input_type_ids": [[0] * length]}
    row.update(values)
    return row


# Bad requests to the exported signatures: key -> (kind, signature, inputs, the message the
# InvalidArgumentError carries). VOCAB has 73 tokens (the tiny model's vocab_size), the
# position table 64 rows.
BAD_CALLS = {
    "negative_id": ("classifier", "serving_default",
                    _ids_row(4, input_word_ids=[[2, -1, 6, 3]]),
                    "assertion failed: [serving_default: input_word_ids must be in [0, "
                    "vocab_size=73); got values from] [-1] [to] [6]"),
    "id_past_vocab": ("embedding", "serving_default",
                      _ids_row(4, input_word_ids=[[2, 73, 6, 3]]),
                      "assertion failed: [serving_default: input_word_ids must be in [0, "
                      "vocab_size=73); got values from] [2] [to] [73]"),
    "type_id_past_table": ("squad", "serving_default",
                           _ids_row(3, input_type_ids=[[0, 1, 2]]),
                           "assertion failed: [serving_default: input_type_ids must be in [0, "
                           "type_vocab_size=2); got values from] [0] [to] [2]"),
    "longer_than_positions": ("tagging", "serving_default", _ids_row(65),
                              "assertion failed: [serving_default: input_word_ids may have at "
                              "most max_position_embeddings=64 tokens; got] [65]"),
    "mask_shape": ("classifier", "serving_default", _ids_row(4, input_mask=[[1, 1, 1]]),
                   "assertion failed: [serving_default: input_mask must have the shape of "
                   "input_word_ids; got] [1 3] [and] [1 4]"),
    "mask_value": ("classifier", "serving_default", _ids_row(3, input_mask=[[1, 1, 2]]),
                   "assertion failed: [serving_default: input_mask must be 0 (padding) or 1 "
                   "(token); got values from] [1] [to] [2]"),
    "no_token": ("embedding", "serving_default",
                 {"input_word_ids": [[], []], "input_mask": [[], []], "input_type_ids": [[], []]},
                 "assertion failed: [serving_default: input_word_ids must hold at least one "
                 "token ([CLS]) per row; got shape] [2 0]"),
    "mask_position_past_ids": ("fill_mask", "serving_default",
                               dict(_ids_row(4), masked_lm_positions=[[1, 4]]),
                               "assertion failed: [serving_default: masked_lm_positions must be "
                               "in [0, the number of tokens); got values from] [1] [to] [4]"),
    "scalar_text": ("embedding", "serve_text", {"text": "The cat sat on the mat."},
                    "assertion failed: [serve_text: text must be a vector of texts [batch]; "
                    "got shape] []"),
    "scalar_example": ("tagging", "serve_examples", {"examples": ""},
                       "assertion failed: [serve_examples: examples must be a vector of "
                       "serialized tf.Examples [batch]; got shape] []"),
    "squad_batch_sizes": ("squad", "serve_text",
                          {"question": ["Who?", "Where?"], "context": ["Marie Curie was born."]},
                          "assertion failed: [serve_text: context and question must have the "
                          "same batch size; got] [1] [and] [2]"),
    "pair_batch_sizes": ("classifier", "serve_text",
                         {"text": ["a", "b", "c"], "text_pair": ["x", "y"]},
                         "assertion failed: [serve_text: text_pair and text must have the same "
                         "batch size; got] [2] [and] [3]"),
}


def ids_inputs(tok, kind):
    """The batch each kind's id signature is called with: dict name -> int32 array."""
    texts = TEXTS[:5]
    features = pack_batch(tok, [tok.encode(t) for t in texts], [tok.encode("the cat")] * 5,
                                seq_length=IDS_SEQ_LENGTH)
    if kind == "fill_mask":
        features["masked_lm_positions"] = np.array(
            [[1, 2, 0], [3, 1, 1], [5, 4, 3], [0, 0, 0], [19, 10, 2]], np.int32)
    return features


def tiny_config():
    return BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                      initializer_range=0.2)


def python_tokenizer():
    return tokenization.WordpieceTokenizer(VOCAB, do_lower_case=True)


def pack_batch(tok, segments_a, segments_b=None, seq_length=SEQ_LENGTH):
    """Python packing of lists of id lists -> dict of int32 [B, S] numpy arrays."""
    rows = [pack_inputs(a, b, max_seq_length=seq_length, cls_id=tok.cls_id,
                        sep_id=tok.sep_id, pad_id=tok.pad_id)
            for a, b in zip(segments_a, segments_b or [None] * len(segments_a))]
    return {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}


def softmax(logits, axis=-1):
    shifted = np.exp(logits - logits.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def piece_spans(tok, text):
    """Character spans of the WordPiece pieces of `text`: list of (start, end), in order.

    Each character is normalized on its own by the tokenizer's rules (cleanup, lower-case,
    accent stripping, punctuation and CJK spacing); words are the runs of non-space output,
    their pieces are laid over their characters. Checks its words against the tokenizer's.
    """
    stream = []  # (normalized char, index of the input char)
    for index, char in enumerate(text):
        cleaned = tokenization.clean_char(char)
        for out in "".join(tokenization.split_char(c, tok.do_lower_case) for c in cleaned):
            stream.append((out, index))
    words, current = [], []
    for out, index in stream + [(" ", len(text))]:
        if out.isspace():
            if current:
                words.append(current)
            current = []
        else:
            current.append((out, index))
    expected_words = tok.basic_tokenize(text)
    got_words = ["".join(c for c, _ in w) for w in words]
    assert [w.replace("ς", "σ") for w in got_words] == [w.replace("ς", "σ")
                                                        for w in expected_words]
    spans = []
    for word, pieces in zip(words, tok.tokenize_words(text)):
        if pieces == [tok.unk_token]:
            spans.append((word[0][1], word[-1][1] + 1))
            continue
        position = 0
        for piece in pieces:
            length = len(piece) - 2 if piece.startswith("##") else len(piece)
            spans.append((word[position][1], word[position + length - 1][1] + 1))
            position += length
    return spans


def best_spans(tok, model, questions_ids, contexts_ids, seq_length=SEQ_LENGTH,
               max_answer_length=MAX_ANSWER_LENGTH, doc_stride=DOC_STRIDE):
    """The original's span search on the Keras model: each context in bert-tf-squad's sliding
    windows (`squad.doc_windows`), a span's start scored only in the window that gives it the
    most context (`squad.max_context_windows`), the best span of all windows (the first on a
    tie), and the smallest [CLS] score of the windows.

    Args: questions_ids, contexts_ids: lists of id lists (questions already cut).
    Returns:
      (list per question of (score, window index, first, last context token) or None without
      context tokens, list of null scores per question, the packed windows' features).
    """
    rows = []  # (question, window start, window length, window index, owners of its pieces)
    for b, (q, c) in enumerate(zip(questions_ids, contexts_ids)):
        windows = squad.doc_windows(len(c), seq_length - 3 - len(q), doc_stride) or [(0, 0)]
        owners = squad.max_context_windows(windows, len(c))
        rows += [(b, start, length, index, owners) for index, (start, length)
                 in enumerate(windows)]
    features = pack_batch(tok, [questions_ids[b] for b, *_ in rows],
                          [contexts_ids[b][start:start + length] for b, start, length, *_ in rows],
                          seq_length)
    logits = model(features)
    start_logits, end_logits = logits["start_logits"].numpy(), logits["end_logits"].numpy()
    best, null = [None] * len(questions_ids), [np.inf] * len(questions_ids)
    for w, (b, start, length, index, owners) in enumerate(rows):
        null[b] = min(null[b], start_logits[w, 0] + end_logits[w, 0])
        first = len(questions_ids[b]) + 2
        for i in range(length):
            if owners[start + i] != index:
                continue
            for j in range(i, min(i + max_answer_length, length)):
                score = start_logits[w, first + i] + end_logits[w, first + j]
                if best[b] is None or score > best[b][0]:
                    best[b] = (score, index, start + i, start + j)
    return best, null, features


def squad_reference(tok, model, questions, contexts, seq_length=SEQ_LENGTH,
                    max_query_length=MAX_QUERY_LENGTH, max_answer_length=MAX_ANSWER_LENGTH,
                    doc_stride=DOC_STRIDE):
    """The serving answers by `best_spans` over WordPiece pieces, at the pieces' characters.

    Returns:
      dict of numpy arrays per question: answer_text (str), answer_start, answer_end, score,
      null_score, window_of_answer (-1 without context); and "features", the packed windows.
    """
    questions_ids = [tok.encode(q)[:max_query_length] for q in questions]
    best, null, features = best_spans(tok, model, questions_ids,
                                      [tok.encode(c) for c in contexts], seq_length,
                                      max_answer_length, doc_stride)
    out = {k: [] for k in ("answer_text", "answer_start", "answer_end", "score",
                           "window_of_answer")}
    for context, found in zip(contexts, best):
        if found is None:
            for key, value in zip(out, ("", 0, 0, 0.0, -1)):
                out[key].append(value)
            continue
        score, index, i, j = found
        spans = piece_spans(tok, context)
        char_start, char_end = spans[i][0], spans[j][1]
        for key, value in zip(out, (context[char_start:char_end], char_start, char_end, score,
                                    index)):
            out[key].append(value)
    result = {k: np.array(v) for k, v in out.items()}
    result.update(null_score=np.array(null), features=features)
    return result


def tagging_reference(tok, model, texts, labels=TAGS, seq_length=SEQ_LENGTH):
    """Per-word labels at each word's first piece; words whose first piece is cut are left out.

    Returns:
      list (per text) of lists of (word text, label, score, start, end).
    """
    words_of_texts = [tok.tokenize_words(t) for t in texts]
    features = pack_batch(tok, [tok.encode(t) for t in texts], seq_length=seq_length)
    probabilities = softmax(model(features).numpy())
    result = []
    for b, (text, words) in enumerate(zip(texts, words_of_texts)):
        spans = piece_spans(tok, text)
        rows, first = [], 0
        for pieces in words:
            if first < seq_length - 2:
                p = probabilities[b, first + 1]
                start, end = spans[first][0], spans[first + len(pieces) - 1][1]
                rows.append((text[start:end], labels[int(p.argmax())], float(p.max()), start,
                             end))
            first += len(pieces)
        result.append(rows)
    return result


def fill_mask_ids(tok, text):
    """The ids of `text` with the mask id at each literal "[MASK]"."""
    ids = []
    parts = text.split("[MASK]")
    for k, part in enumerate(parts):
        ids += tok.encode(part)
        if k < len(parts) - 1:
            ids.append(tok.mask_id)
    return ids


# The README's REST examples (TF Serving's row format), by key: (export kind, request body).
# test_rest.py feeds each through its signature and checks the response against the README.
REST_REQUESTS = {
    "classifier_ids": ("classifier", {
        "instances": [{"input_word_ids": [2, 5, 6, 7, 3, 0], "input_mask": [1, 1, 1, 1, 1, 0],
                       "input_type_ids": [0, 0, 0, 0, 0, 0]}]}),
    "classifier": ("classifier", {
        "signature_name": "serve_text",
        "instances": [{"text": "The cat sat on the mat.", "text_pair": "Where is the cat?"},
                      {"text": "Paris is the capital of France.", "text_pair": ""}]}),
    "squad": ("squad", {
        "signature_name": "serve_text",
        "instances": [{"question": "Where was Marie Curie born?",
                       "context": "Marie Curie was born in Warsaw in 1867."}]}),
    "tagging": ("tagging", {
        "signature_name": "serve_text",
        "instances": [{"text": "Marie Curie was born in Warsaw."}]}),
    "fill_mask": ("fill_mask", {
        "signature_name": "serve_text",
        "instances": [{"text": "Paris is the [MASK] of France."}]}),
    # One input: the instances may be bare values.
    "embedding": ("embedding", {
        "signature_name": "serve_text",
        "instances": ["The cat sat on the mat.", "Café in Paris"]}),
}
