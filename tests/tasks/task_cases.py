"""What the tasks of tests/tasks answer on the serving cases' awkward texts, and how two sets of
answers compare; imported by the tests and by their JAX subprocess."""

import serving_cases as cases
from bert_tf import tasks


def answer(task):
    """What `task` answers on the serving cases' texts, as JSON-able values."""
    if isinstance(task, tasks.TextClassifier):
        return task.predict(cases.TEXTS, cases.PAIRS)
    if isinstance(task, tasks.QuestionAnswerer):
        return task.predict(cases.QUESTIONS, cases.CONTEXTS)
    if isinstance(task, tasks.FillMask):
        return task.predict(cases.MASKED_TEXTS, top_k=3)
    if isinstance(task, tasks.TextEmbedder):
        return task.predict(cases.TEXTS).tolist()
    return task.predict(cases.TEXTS)


def same_answers(got, expected, atol=1e-4):
    """Equal labels, spans, tags and tokens; scores (floats) within atol."""
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            same_answers(got[k], expected[k], atol) for k in expected)
    if isinstance(expected, list):
        return len(got) == len(expected) and all(
            same_answers(g, e, atol) for g, e in zip(got, expected))
    if isinstance(expected, float):
        return abs(got - expected) <= atol
    return got == expected
