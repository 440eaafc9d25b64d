"""SQuAD exact match and F1, computed exactly as the official v1.1 and v2.0 evaluation scripts.

Pure Python (no TensorFlow). The official scripts differ in a few places this module keeps:

- Both normalise an answer the same way: lower-case, drop ASCII punctuation
  (`string.punctuation`), replace the words a/an/the by a space, collapse whitespace.
- v1.1 scores a question against every gold answer text as given (max over them). Its F1 is
  0 whenever the normalised prediction and gold share no token, even when both are empty.
  Questions without a prediction count as 0 (and in the total).
- v2.0 drops gold answers that normalise to "" and uses [""] when none is left (unanswerable
  questions); its F1 is 1 when both sides are empty and 0 when only one is. A question "has an
  answer" when its `answers` list is non-empty (HasAns_/NoAns_ breakdown). With no-answer odds
  (`null_odds.json`, the script's --na-prob-file) a question whose odds exceed
  `na_prob_thresh` (1.0) is scored as a no-answer prediction, and best_exact / best_f1 report
  the scores at the best odds threshold with that threshold.

Missing predictions: v1.1 scores them 0 as the official script does; the official v2.0 script
fails on them (KeyError in the HasAns/NoAns breakdown), so `evaluate_v2` raises a ValueError
naming the first missing id instead.
"""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower-cases, removes ASCII punctuation, the articles a/an/the and extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction, gold):
    """1 if the normalised texts are equal, else 0 (both versions)."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction, gold, version_2=False):
    """Bag-of-normalised-tokens F1 between one prediction and one gold answer.

    Args:
      prediction, gold: answer texts.
      version_2: the v2.0 rule for empty answers (1 if both are empty, 0 if one is); v1.1
        returns 0 whenever no token is shared, including when both are empty.
    """
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if version_2 and (not pred_tokens or not gold_tokens):
        return int(pred_tokens == gold_tokens)
    num_same = sum((collections.Counter(pred_tokens)
                    & collections.Counter(gold_tokens)).values())
    if num_same == 0:
        return 0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    """(id, qa dict) of every question of a SQuAD `data` list, in file order."""
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield str(qa["id"]), qa


def evaluate_v1(dataset, predictions):
    """The official SQuAD v1.1 evaluation.

    Args:
      dataset: the `data` list of a SQuAD JSON file (with answers).
      predictions: dict question id -> predicted text.

    Returns:
      {"exact_match": %, "f1": %}.
    """
    em_sum = f1_sum = 0.0
    total = 0
    for qid, qa in _questions(dataset):
        total += 1
        if qid not in predictions:
            continue
        golds = [answer["text"] for answer in qa["answers"]]
        prediction = predictions[qid]
        em_sum += max(exact_match(prediction, g) for g in golds)
        f1_sum += max(f1_score(prediction, g) for g in golds)
    if not total:
        raise ValueError("the evaluation data holds no question")
    return {"exact_match": 100.0 * em_sum / total, "f1": 100.0 * f1_sum / total}


def _best_threshold(predictions, scores, na_probs, has_answer):
    """Score and odds threshold maximising the total when questions above it answer ""."""
    current = sum(1 for v in has_answer.values() if not v)
    best, best_threshold = current, 0.0
    # Raising the threshold past a question's odds makes it answer with its prediction.
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > best:
            best, best_threshold = current, na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """The official SQuAD v2.0 evaluation (evaluate-v2.0.py without the plots).

    Args:
      dataset: the `data` list of a SQuAD v2.0 JSON file (with answers, [] if unanswerable).
      predictions: dict question id -> predicted text ("" for no answer).
      na_probs: optional dict question id -> no-answer odds (null_odds.json); adds best_*.
      na_prob_thresh: odds above which a question counts as answered "" (script default 1.0).

    Returns:
      dict with exact, f1, total, HasAns_exact/_f1/_total, NoAns_exact/_f1/_total (when such
      questions exist) and, with na_probs, best_exact, best_exact_thresh, best_f1,
      best_f1_thresh. Scores are percentages.

    Raises:
      ValueError: a question has no prediction (or no odds, with na_probs).
    """
    has_answer, exact_raw, f1_raw = {}, {}, {}
    for qid, qa in _questions(dataset):
        has_answer[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            raise ValueError(f"no prediction for question id {qid!r}")
        prediction = predictions[qid]
        exact_raw[qid] = max(exact_match(prediction, g) for g in golds)
        f1_raw[qid] = max(f1_score(prediction, g, version_2=True) for g in golds)
    if not has_answer:
        raise ValueError("the evaluation data holds no question")
    if na_probs is not None:
        missing = [qid for qid in has_answer if qid not in na_probs]
        if missing:
            raise ValueError(f"no no-answer odds for question id {missing[0]!r}")
    odds = na_probs if na_probs is not None else {qid: 0.0 for qid in has_answer}

    def thresholded(raw):
        return {qid: float(not has_answer[qid]) if odds[qid] > na_prob_thresh else score
                for qid, score in raw.items()}

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids):
        return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
                "f1": 100.0 * sum(f1[q] for q in qids) / len(qids),
                "total": len(qids)}

    results = summary(list(has_answer))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, v in has_answer.items() if v == wanted]
        if qids:
            results.update({f"{prefix}_{k}": v for k, v in summary(qids).items()})
    if na_probs is not None:
        results["best_exact"], results["best_exact_thresh"] = _best_threshold(
            predictions, exact_raw, na_probs, has_answer)
        results["best_f1"], results["best_f1_thresh"] = _best_threshold(
            predictions, f1_raw, na_probs, has_answer)
    return results


def evaluate(dataset, predictions, version_2_with_negative, na_probs=None):
    """evaluate_v2 (with the no-answer odds) or evaluate_v1, as the data's version asks."""
    if version_2_with_negative:
        return evaluate_v2(dataset, predictions, na_probs=na_probs)
    return evaluate_v1(dataset, predictions)
