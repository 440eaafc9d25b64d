"""A tiny "pre-trained" model directory and generated task data for the fine-tuning tests."""

import os
import random

FILLER = ["the", "a", "new", "movie", "film", "was", "is", "plot", "actor", "story", "scene", "and",
          "it", "this", "that", "very", "quite", "really", "of", "in", "on"]
POSITIVE = ["good", "great", "fine", "superb"]
NEGATIVE = ["bad", "awful", "poor", "dull"]
PERSONS = ["alice", "bob", "carol", "dave", "erin"]
PLACES = ["paris", "rome", "oslo", "lima"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "##s", "york"]
         + FILLER + POSITIVE + NEGATIVE + PERSONS + PLACES)


def tiny_config_dict(**overrides):
    values = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1,
                  num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return values


def make_pretrained_dir(directory):
    """A run_pretraining-style directory: ckpt-<n> of tf.train.Checkpoint(model=BertPretrainer,
    optimizer=...) kept by a CheckpointManager, bert_config.json and vocab.txt beside it."""
    import keras
    import tensorflow as tf

    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertEncoder, BertPretrainer
    from bert_tf.training.optimization import create_optimizer

    os.makedirs(directory, exist_ok=True)
    config = BertConfig(**tiny_config_dict())
    config.to_json_file(os.path.join(directory, "bert_config.json"))
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    # Seeded: the frozen-encoder tests train a head on these very features.
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(config))
    optimizer = create_optimizer(1e-4, 10, 1)
    optimizer.build(model.trainable_variables)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer),
                                         str(directory), max_to_keep=1)
    manager.save(checkpoint_number=7)
    return model


def encoder_weights(model):
    """Copies of a task model's encoder weights."""
    return [w.numpy().copy() for w in model.encoder.weights]


def pretrained_encoder_weights(pretrained_dir):
    """The encoder weights stored in make_pretrained_dir's checkpoint."""
    import tensorflow as tf

    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertEncoder

    encoder = BertEncoder(BertConfig.from_json_file(os.path.join(pretrained_dir,
                                                                 "bert_config.json")))
    holder = tf.Module()
    holder.encoder = encoder
    tf.train.Checkpoint(model=holder).read(
        tf.train.latest_checkpoint(str(pretrained_dir))).expect_partial()
    return [w.numpy().copy() for w in encoder.weights]


def sentiment_sentence(rng, positive):
    words = [rng.choice(FILLER) for _ in range(rng.randint(3, 8))]
    words.insert(rng.randint(0, len(words)), rng.choice(POSITIVE if positive else NEGATIVE))
    return " ".join(words) + " ."


def write_sst2(directory, num_train=256, num_dev=64, num_test=20, seed=0):
    """SST-2's files as GLUE ships them: train/dev 'sentence<TAB>label', test
    'index<TAB>sentence'."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for name, count in (("train", num_train), ("dev", num_dev)):
        lines = ["sentence\tlabel"]
        for i in range(count):
            label = i % 2
            lines.append(f"{sentiment_sentence(rng, label)}\t{label}")
        with open(os.path.join(directory, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    lines = ["index\tsentence"]
    for i in range(num_test):
        lines.append(f"{i}\t{sentiment_sentence(rng, i % 2)}")
    with open(os.path.join(directory, "test.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def tagged_sentence(rng, long=False):
    """(words, tags): filler words tagged O, a person (B-PER), maybe a place, either one word
    (B-LOC) or 'new york' (B-LOC I-LOC)."""
    words = [(rng.choice(FILLER), "O") for _ in range(rng.randint(2, 5) + (12 if long else 0))]
    words.insert(rng.randint(0, len(words)), (rng.choice(PERSONS), "B-PER"))
    if rng.random() < 0.5:
        position = rng.randint(0, len(words))
        words[position:position] = [("new", "B-LOC"), ("york", "I-LOC")]
    elif rng.random() < 0.8:
        words.insert(rng.randint(0, len(words)), (rng.choice(PLACES), "B-LOC"))
    return words


def write_conll(directory, num_train=160, num_dev=40, num_test=20, seed=0):
    """train.txt / dev.txt / test.txt as CoNLL-2003 writes them: 'token POS chunk tag' lines,
    -DOCSTART- lines, a blank line after each sentence; every tenth sentence is long."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for name, count in (("train", num_train), ("dev", num_dev), ("test", num_test)):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for i in range(count):
            for word, tag in tagged_sentence(rng, long=i % 10 == 9):
                lines.append(f"{word} NN I-NP {tag}")
            lines.append("")
        with open(os.path.join(directory, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
