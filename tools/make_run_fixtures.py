r"""Writes tests/fixtures/runs_v0_1/: run directories as bert_tf 0.1.0 writes them.

    python tools/make_run_fixtures.py [--output_dir=tests/fixtures/runs_v0_1]

The tests resume and fine-tune these with the current code, so a run directory of the 0.1.0
release keeps working. Regenerate only with the release whose directories they stand for
(they are committed precisely so that newer code cannot rewrite them). Tiny and deterministic
inputs (inputs/: a 108-token vocabulary, a corpus, a 2-layer hidden-32 BERT config, a
sentiment TSV, topic pairs); every command runs from the fixture directory with relative
paths, so the flagfiles the runs record hold paths that resolve from a copy of it:

  pretrain_text/     bert-tf-pretrain from raw text (--input_text_file), default casing
  records.tfrecord   create_pretraining_data --do_lower_case=false (cased records)
  pretrain_records/  bert-tf-pretrain from those records with --do_lower_case=false
  classifier/        bert-tf-classify on pretrain_text (own TSV data, two labels)
  embed/             bert-tf-embed contrastive training on pretrain_text (mean pooling)
"""

import argparse
import json
import os
import random
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
PLACES = ["paris", "rome", "oslo", "lima", "york", "kyoto", "cairo", "quito"]
WORDS = ["the", "a", "new", "old", "movie", "film", "was", "is", "plot", "actor", "story",
         "scene", "and", "it", "this", "that", "very", "quite", "really", "of", "in", "on",
         "went", "to", "saw", "met", "with", "from", "city", "day", "night", "walked", "read",
         "book", "wrote", "letter", "train", "river", "bridge", "house", "garden", "music",
         "played", "song", "friend", "long", "short", "red", "blue", "green", "small", "big",
         "then", "later", "home", "back", "morning", "evening", "rain", "sun"]
POSITIVE = ["good", "great", "fine", "superb"]
NEGATIVE = ["bad", "awful", "poor", "dull"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "##s"]
# Cased copies of the names, so the cased runs tokenize "Alice" as a token of its own.
VOCAB = (SPECIAL + WORDS + POSITIVE + NEGATIVE + NAMES + PLACES
         + [name.capitalize() for name in NAMES + PLACES])

CONFIG = {"vocab_size": len(VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32,
          "type_vocab_size": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}

# Flags every command shares: few steps, one thread's worth of work, reproducible.
TINY = ["--seed=1", "--steps_per_loop=1", "--jit_compile=false"]


def sentence(rng, cased):
    names = [rng.choice(NAMES + PLACES) for _ in range(2)]
    if cased:
        names = [name.capitalize() for name in names]
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 9))]
    for name in names:
        words.insert(rng.randint(0, len(words)), name)
    return " ".join(words) + " ."


def write_inputs(directory):
    """inputs/: vocab.txt, bert_config.json, corpus.txt (cased documents), train.tsv,
    dev.tsv (sentiment, labels pos/neg) and pairs.tsv (anchor, positive of one topic)."""
    os.makedirs(directory, exist_ok=True)
    assert len(VOCAB) <= CONFIG["vocab_size"], len(VOCAB)
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    with open(os.path.join(directory, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(CONFIG, f, indent=2, sort_keys=True)
        f.write("\n")
    rng = random.Random(0)
    documents = ["\n".join(sentence(rng, cased=True) for _ in range(rng.randint(3, 6)))
                 for _ in range(24)]
    with open(os.path.join(directory, "corpus.txt"), "w", encoding="utf-8") as f:
        f.write("\n\n".join(documents) + "\n")
    for split, count in (("train", 48), ("dev", 16)):
        rows = ["sentence\tlabel"]
        for i in range(count):
            positive = i % 2 == 0
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 7))]
            words.insert(rng.randint(0, len(words)),
                         rng.choice(POSITIVE if positive else NEGATIVE))
            rows.append(" ".join(words) + f" .\t{'pos' if positive else 'neg'}")
        with open(os.path.join(directory, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
    rows = ["anchor\tpositive"]
    for i in range(32):
        topic = (NAMES + PLACES)[i % 16]
        pair = []
        for _ in range(2):
            words = [rng.choice(WORDS) for _ in range(rng.randint(2, 5))]
            words.insert(rng.randint(0, len(words)), topic)
            pair.append(" ".join(words))
        rows.append("\t".join(pair))
    with open(os.path.join(directory, "pairs.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


def run(root, module, *args):
    command = [sys.executable, "-m", f"bert_tf.cli.{module}", *args]
    print("+", " ".join(command[2:]), flush=True)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    subprocess.run(command, cwd=root, env=env, check=True)


def make(root):
    write_inputs(os.path.join(root, "inputs"))
    pretraining = ["--bert_config_file=inputs/bert_config.json", "--vocab_file=inputs/vocab.txt",
                   "--do_train", "--max_seq_length=32", "--max_predictions_per_seq=5",
                   "--train_batch_size=4", "--num_train_steps=2", "--num_warmup_steps=1",
                   "--save_checkpoints_steps=2", "--learning_rate=1e-3", *TINY]
    run(root, "pretrain", "--input_text_file=inputs/corpus.txt", "--output_dir=pretrain_text",
        *pretraining)
    run(root, "create_pretraining_data", "--input_file=inputs/corpus.txt",
        "--output_file=records.tfrecord", "--vocab_file=inputs/vocab.txt",
        "--do_lower_case=false", "--max_seq_length=32", "--max_predictions_per_seq=5",
        "--dupe_factor=1", "--random_seed=1", "--num_workers=1")
    run(root, "pretrain", "--input_file=records.tfrecord", "--output_dir=pretrain_records",
        "--do_lower_case=false", *pretraining)
    run(root, "classify", "--task_name=fixture", "--text_a_column=sentence",
        "--label_column=label", "--train_file=inputs/train.tsv", "--dev_file=inputs/dev.tsv",
        "--init_checkpoint=pretrain_text", "--output_dir=classifier", "--do_train",
        "--do_eval", "--max_seq_length=32", "--train_batch_size=8", "--num_train_epochs=1",
        "--learning_rate=1e-3", "--length_buckets=off", *TINY)
    run(root, "embed", "--init_checkpoint=pretrain_text", "--train_file=inputs/pairs.tsv",
        "--output_dir=embed", "--sentence_transformers_dir=-", "--max_seq_length=32",
        "--train_batch_size=8", "--num_train_epochs=1", "--learning_rate=1e-3",
        "--save_checkpoints_steps=4", *TINY)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir",
                        default=os.path.join(REPO_ROOT, "tests", "fixtures", "runs_v0_1"))
    args = parser.parse_args()
    if os.path.exists(args.output_dir):
        sys.exit(f"--output_dir={args.output_dir} exists; remove it to regenerate")
    make(args.output_dir)
    with open(os.path.join(args.output_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write("Run directories as bert_tf 0.1.0 wrote them, made by "
                "`python tools/make_run_fixtures.py` (see its docstring); the tests resume and "
                "fine-tune them with the current code. Do not regenerate with newer code.\n")


if __name__ == "__main__":
    main()
