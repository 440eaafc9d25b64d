"""SQuAD answers from start/end logits: n-best spans, original-text answers, no-answer odds.

Follows the original run_squad.py `write_predictions`:

- Per window, the `n_best_size` highest start logits and end logits of its tokens are paired
  (the original ranks the padding positions too, which then crowd out spans; bucketed batches
  pad with zeros, so a rank among padding would vary with the batch); a pair is a
  candidate when both ends are context pieces, the window is the max-context window of the
  start piece, end >= start and the span has at most `max_answer_length` pieces.
- Candidates of all windows are ranked by start + end logit; their text is the original
  context from the first character of the start piece to the last of the end piece (the
  WordPiece features' `token_to_char_span`, the characters the exported model cuts at), the
  context words joined by single spaces; duplicates are dropped, and the first `n_best_size`
  texts make the n-best list with softmax probabilities. The original projects the
  de-tokenized pieces back instead (`get_final_text`, used for features without spans): the
  same text for spaced, accent-free or cased text, but it takes the first match inside a
  word, so an unspaced CJK paragraph's answer can come from the wrong place, and gives the
  whole words when the pieces do not spell them ([UNK], uncased Hangul).
  With a byte-level BPE tokenizer (`whole_words`) a candidate's text is instead the original
  context words its first and last pieces belong to, joined by single spaces:
  `get_final_text` aligns BERT's basic tokenization with the context, which BPE pieces do not
  follow.
- v2.0: the null score is the smallest [CLS] start + end logit over the windows; the answer is
  "" when null score - best non-null span score > `null_score_diff_threshold`, and that
  difference is the question's no-answer odds (null_odds.json).
"""

import dataclasses
import json
import math
import os
import re

import numpy as np
from absl import logging

from bert_tf.fileio import write_text_atomic
from bert_tf.text import basic_tokenize


@dataclasses.dataclass
class SquadPredictions:
    """Answers of one prediction run.

    Attributes:
      predictions: question id -> answer text ("" for no answer in v2.0).
      nbest: question id -> list of {"text", "probability", "start_logit", "end_logit"}.
      null_odds: question id -> null score - best span score (v2.0), else None.
    """

    predictions: dict
    nbest: dict
    null_odds: dict = None


def _strip_spaces(text):
    """(text without " ", map from its indices to indices in `text`)."""
    kept, index_map = [], []
    for i, char in enumerate(text):
        if char != " ":
            index_map.append(i)
            kept.append(char)
    return "".join(kept), index_map


def get_final_text(pred_text, orig_text, do_lower_case):
    """Projects a de-tokenized prediction back onto the original words it came from.

    `pred_text` is normalised (lower-cased, accents stripped, punctuation split off), while
    `orig_text` (the original words of the span, space-joined) may carry extra characters:
    pred "steve smith" in orig "Steve Smith's" gives "Steve Smith". The original words are
    basic-tokenized; when that text, spaces removed, has as many characters as `orig_text`
    without spaces, the characters are aligned one to one and the prediction's first and last
    characters are mapped back. When any step fails, `orig_text` is returned whole.

    Args:
      pred_text: the predicted pieces joined with "##" removed, single-spaced.
      orig_text: the span's original context words joined by single spaces.
      do_lower_case: the tokenizer's setting.

    Returns:
      The substring of `orig_text` matching `pred_text` (or `orig_text`).
    """
    start, end = final_text_span(pred_text, orig_text, do_lower_case)
    return orig_text[start:end]


def final_text_span(pred_text, orig_text, do_lower_case):
    """(start, end): where get_final_text's answer lies in `orig_text` (end exclusive)."""
    tok_text = " ".join(basic_tokenize(orig_text, do_lower_case))
    start = tok_text.find(pred_text)
    whole = (0, len(orig_text))
    if start == -1:
        logging.debug("Unable to find %r in %r", pred_text, orig_text)
        return whole
    end = start + len(pred_text) - 1

    orig_ns, orig_ns_to_s = _strip_spaces(orig_text)
    tok_ns, tok_ns_to_s = _strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        logging.debug("Lengths differ without spaces: %r vs %r", orig_ns, tok_ns)
        return whole
    tok_s_to_ns = {s: ns for ns, s in enumerate(tok_ns_to_s)}
    if start not in tok_s_to_ns or end not in tok_s_to_ns:
        logging.debug("Could not map %r back into %r", pred_text, orig_text)
        return whole
    return orig_ns_to_s[tok_s_to_ns[start]], orig_ns_to_s[tok_s_to_ns[end]] + 1


def _best_indexes(logits, n_best_size):
    """Indices of the n_best_size largest logits, largest first (ties: lower index first)."""
    return np.argsort(-np.asarray(logits), kind="stable")[:n_best_size].tolist()


def _softmax(scores):
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _span_text(feature, example, start, end, do_lower_case, whole_words=False):
    """The answer text of pieces [start, end] of a window, in the original's spelling, and
    where it lies: (text, first word, offset of the text in the words joined by spaces).

    whole_words (byte-level BPE): the original words the pieces belong to, joined by single
    spaces, punctuation attached to them included ("Broncos." where WordPiece can give
    "Broncos"; the official evaluation drops punctuation before comparing). No character
    projection as for WordPiece: a BPE span may end inside a word, or a UTF-8 character.
    """
    first, last = feature.token_to_orig_map[start], feature.token_to_orig_map[end]
    orig_text = " ".join(example.doc_tokens[first:last + 1])
    if whole_words:
        return orig_text, first, 0
    spans = feature.token_to_char_span
    if spans is not None:
        # From the first piece's first character to the last piece's last, as the exported
        # model cuts answers; get_final_text finds the first match of the piece text instead
        # (the wrong place in an unspaced CJK paragraph) and gives the whole words up when
        # the tokens do not spell them (uncased Hangul, [UNK]).
        begin = spans[start][0]
        finish = len(orig_text) - len(example.doc_tokens[last]) + spans[end][1]
        return orig_text[begin:finish], first, begin
    pieces = " ".join(feature.tokens[start:end + 1])
    pred_text = " ".join(pieces.replace(" ##", "").replace("##", "").split())
    begin, finish = final_text_span(pred_text, orig_text, do_lower_case)
    return orig_text[begin:finish], first, begin


def _candidates(features, start_logits, end_logits, n_best_size, max_answer_length):
    """(score, feature, start, end, start_logit, end_logit) span candidates of one example."""
    found = []
    for feature, starts_s, ends_s in zip(features, start_logits, end_logits):
        # Only the window's tokens compete: padding (zeros where a length-bucketed batch was
        # cut short) would otherwise take top-n places, so the answers would change with
        # --predict_batch_size.
        num_tokens = len(feature.tokens)
        for start in _best_indexes(starts_s[:num_tokens], n_best_size):
            if start not in feature.token_to_orig_map:
                continue
            if not feature.token_is_max_context.get(start, False):
                continue
            for end in _best_indexes(ends_s[:num_tokens], n_best_size):
                if end not in feature.token_to_orig_map:
                    continue
                if end < start or end - start + 1 > max_answer_length:
                    continue
                found.append((float(starts_s[start]), float(ends_s[end]), feature, start, end))
    return found


def predict_example(example, features, start_logits, end_logits, *, n_best_size,
                    max_answer_length, do_lower_case, version_2_with_negative,
                    null_score_diff_threshold=0.0, whole_words=False, spans=False):
    """Answer, n-best list and no-answer odds of one example from its windows' logits.

    Args:
      example: the SquadExample.
      features: its SquadFeatures (windows), in order.
      start_logits, end_logits: float arrays [num_windows, S] of those windows.
      n_best_size: start / end indices considered per window, and n-best entries kept.
      max_answer_length: longest answer in tokens (pieces).
      do_lower_case: the tokenizer's setting (for get_final_text).
      version_2_with_negative: consider the null answer.
      null_score_diff_threshold: v2.0 answers "" when null - best span score exceeds it.
      whole_words: answers are the whole context words a span covers (byte-level BPE
        features), not the WordPiece projection of get_final_text.
      spans: each n-best entry also says where its text lies: "word" (its first context
        word, -1 for "") and "offset" (where the text starts in the context words from
        "word" on, joined by single spaces).

    Returns:
      (answer text, n-best list of dicts, null odds or None for v1.1).
    """
    # (start_logit, end_logit, feature, start, end); start == 0 is the null answer.
    prelim = _candidates(features, start_logits, end_logits, n_best_size, max_answer_length)
    null = None
    if version_2_with_negative and features:
        null_scores = [float(s[0]) + float(e[0]) for s, e in zip(start_logits, end_logits)]
        i = int(np.argmin(null_scores))
        null = (float(start_logits[i][0]), float(end_logits[i][0]), features[i], 0, 0)
        prelim.append(null)
    prelim.sort(key=lambda c: c[0] + c[1], reverse=True)

    nbest, seen = [], set()
    for start_logit, end_logit, feature, start, end in prelim:
        if len(nbest) >= n_best_size:
            break
        text, word, offset = (_span_text(feature, example, start, end, do_lower_case,
                                         whole_words) if start > 0 else ("", -1, 0))
        if text in seen:
            continue
        seen.add(text)
        nbest.append({"text": text, "start_logit": start_logit, "end_logit": end_logit,
                      "word": word, "offset": offset})
    if null is not None and "" not in seen:
        nbest.append({"text": "", "start_logit": null[0], "end_logit": null[1], "word": -1,
                      "offset": 0})
    if not nbest:
        # No window, or no valid span: the original's placeholder answer.
        nbest.append({"text": "" if version_2_with_negative else "empty",
                      "start_logit": 0.0, "end_logit": 0.0, "word": -1, "offset": 0})
    probabilities = _softmax([e["start_logit"] + e["end_logit"] for e in nbest])
    keys = ("word", "offset") if spans else ()
    nbest = [dict({"text": e["text"], "probability": p, "start_logit": e["start_logit"],
                   "end_logit": e["end_logit"]}, **{k: e[k] for k in keys})
             for e, p in zip(nbest, probabilities)]

    if not version_2_with_negative:
        return nbest[0]["text"], nbest, None
    best_span = next((e for e in nbest if e["text"]), None)
    null_score = null[0] + null[1] if null is not None else 0.0
    # With no valid span the answer is "" and the odds compare the null score with a zero
    # span score (the original would fail here).
    span_score = best_span["start_logit"] + best_span["end_logit"] if best_span else 0.0
    odds = null_score - span_score
    if best_span is None or odds > null_score_diff_threshold:
        return "", nbest, odds
    return best_span["text"], nbest, odds


def compute_predictions(examples, features, start_logits, end_logits, *, n_best_size=20,
                        max_answer_length=30, do_lower_case=True,
                        version_2_with_negative=False, null_score_diff_threshold=0.0,
                        whole_words=False):
    """Answers for every example from the logits of all windows.

    Args:
      examples: list of SquadExample.
      features: list of SquadFeature of those examples (any order), each with example_index.
      start_logits, end_logits: float arrays [len(features), S], row i for features[i].
      n_best_size, max_answer_length, do_lower_case, version_2_with_negative,
        null_score_diff_threshold, whole_words: see predict_example.

    Returns:
      SquadPredictions keyed by question id, in example order.
    """
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(f"{len(features)} features but {len(start_logits)} start and "
                         f"{len(end_logits)} end logit rows")
    by_example = [[] for _ in examples]
    for row, feature in enumerate(features):
        by_example[feature.example_index].append(row)
    result = SquadPredictions({}, {}, {} if version_2_with_negative else None)
    no_window = 0
    for example, rows in zip(examples, by_example):
        no_window += not rows
        text, nbest, odds = predict_example(
            example, [features[r] for r in rows], [start_logits[r] for r in rows],
            [end_logits[r] for r in rows], n_best_size=n_best_size,
            max_answer_length=max_answer_length, do_lower_case=do_lower_case,
            version_2_with_negative=version_2_with_negative,
            null_score_diff_threshold=null_score_diff_threshold, whole_words=whole_words)
        result.predictions[example.qas_id] = text
        result.nbest[example.qas_id] = nbest
        if version_2_with_negative:
            result.null_odds[example.qas_id] = odds
    if no_window:
        logging.warning("%d questions have a context without any WordPiece token; they get "
                        "a placeholder answer", no_window)
    return result


# The files of a prediction, by kind (null_odds: SQuAD 2.0 only).
PREDICTION_FILES = {"predictions": "predictions.json",
                    "nbest_predictions": "nbest_predictions.json",
                    "null_odds": "null_odds.json"}


def prediction_files(result):
    """The kinds of file `result` (compute_predictions') writes, in PREDICTION_FILES' order."""
    return [kind for kind in PREDICTION_FILES if kind != "null_odds"
            or result.null_odds is not None]


def write_predictions(result, output_dir, names=None):
    """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json atomically.

    Args:
      names: dict kind -> file name to write instead (default PREDICTION_FILES').

    Returns:
      dict file kind -> path written.
    """
    contents = {"predictions": result.predictions, "nbest_predictions": result.nbest,
                "null_odds": result.null_odds}
    paths = {}
    for kind in prediction_files(result):
        paths[kind] = os.path.join(output_dir, (names or PREDICTION_FILES)[kind])
        write_text_atomic(paths[kind], json_text(contents[kind]))
    return paths


# A lone UTF-16 surrogate (from a "\ud800" escape in the input JSON) has no UTF-8 encoding.
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(content):
    """JSON of `content` as readable UTF-8 text; lone surrogates (which have no UTF-8 form)
    are written as \\uXXXX escapes, which json.load reads back as they were."""
    text = json.dumps(content, indent=4, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
