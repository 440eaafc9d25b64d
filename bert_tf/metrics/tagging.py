"""Entity-level precision, recall and F1 of tag sequences, as seqeval (conlleval mode) scores.

Chunks are read off IOB1, IOB2 (BIO), IOE and IOBES tags with the conlleval rules that seqeval
applies by default: a tag is a prefix letter (B, I, E, S, or O for outside) and an entity type
after a hyphen (`B-PER`). A chunk ends before a tag when the previous chunk was closed (E, S),
when a B/I chunk meets B, S or O, or when the type changes; a chunk starts at B or S, at I or E
after O, E or S, and at any change of type. So a lone `I-PER` after `O` opens a PER chunk (IOB1)
and `B-PER I-LOC` is two chunks. A predicted entity counts as correct only with the same type,
start and end as a gold one.
"""

import collections

_OUTSIDE = "O"


def _split_tag(tag):
    """('B', 'PER') from 'B-PER'; ('O', '') from 'O'. Tags without a type get type '_'."""
    if tag == _OUTSIDE:
        return _OUTSIDE, ""
    prefix, _, entity_type = tag.partition("-")
    return prefix[:1], entity_type or "_"


def _ends_chunk(prev_prefix, prefix, prev_type, entity_type):
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", _OUTSIDE):
        return True
    return prev_prefix != _OUTSIDE and prev_type != entity_type


def _starts_chunk(prev_prefix, prefix, prev_type, entity_type):
    if prefix in ("B", "S"):
        return True
    if prefix in ("I", "E") and prev_prefix in ("E", "S", _OUTSIDE):
        return True
    return prefix != _OUTSIDE and prev_type != entity_type


def get_entities(tags):
    """Chunks of one tag sequence (or a list of sentences' sequences, scored as one stream with
    an O between sentences).

    Args:
      tags: list of str tags, or list of lists of them.

    Returns:
      list of (entity_type, start, end) with inclusive token offsets in the (joined) stream.
    """
    if tags and isinstance(tags[0], (list, tuple)):
        tags = [tag for sentence in tags for tag in list(sentence) + [_OUTSIDE]]
    chunks = []
    prev_prefix, prev_type, start = _OUTSIDE, "", 0
    for i, tag in enumerate(list(tags) + [_OUTSIDE]):
        prefix, entity_type = _split_tag(tag)
        if _ends_chunk(prev_prefix, prefix, prev_type, entity_type):
            chunks.append((prev_type, start, i - 1))
        if _starts_chunk(prev_prefix, prefix, prev_type, entity_type):
            start = i
        prev_prefix, prev_type = prefix, entity_type
    return chunks


def _prf(correct, predicted, true):
    precision = correct / predicted if predicted else 0.0
    recall = correct / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_scores(true_tags, predicted_tags):
    """seqeval's entity precision / recall / F1, micro-averaged and per entity type.

    Args:
      true_tags, predicted_tags: lists of sentences, each a list of str tags; every predicted
        sentence as long as its gold one.

    Returns:
      dict: `precision`, `recall`, `f1` (micro, over all entities), `accuracy` (token tags
      equal), `per_type` {type: {precision, recall, f1, support}} sorted by type.
    """
    if len(true_tags) != len(predicted_tags):
        raise ValueError(f"{len(true_tags)} gold sentences but {len(predicted_tags)} predicted")
    for i, (gold, guess) in enumerate(zip(true_tags, predicted_tags)):
        if len(gold) != len(guess):
            raise ValueError(f"sentence {i}: {len(gold)} gold tags but {len(guess)} predicted")
    true_chunks = set(get_entities(true_tags))
    predicted_chunks = set(get_entities(predicted_tags))
    correct = true_chunks & predicted_chunks
    scores = _prf(len(correct), len(predicted_chunks), len(true_chunks))
    num_tags = sum(len(s) for s in true_tags)
    equal = sum(g == p for gold, guess in zip(true_tags, predicted_tags)
                for g, p in zip(gold, guess))
    scores["accuracy"] = equal / num_tags if num_tags else 0.0

    counts = collections.defaultdict(lambda: [0, 0, 0])  # correct, predicted, true
    for chunk in correct:
        counts[chunk[0]][0] += 1
    for chunk in predicted_chunks:
        counts[chunk[0]][1] += 1
    for chunk in true_chunks:
        counts[chunk[0]][2] += 1
    scores["per_type"] = {
        entity_type: dict(_prf(*counts[entity_type]), support=counts[entity_type][2])
        for entity_type in sorted(counts)}
    return scores
