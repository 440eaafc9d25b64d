r"""One scorer of pre-trained encoders, the same for every stack: held-out masked-LM loss on fixed
masks, a linear probe and a short fine-tune on a topic classification set.

Every model is scored from a Hugging Face BERT (or ModernBERT) directory (config.json,
model.safetensors, vocab.txt): bert_tf runs are converted with bert-tf-convert-checkpoint
--to=huggingface, transformers' save_pretrained writes the layout itself, keras-hub presets are
converted through bert_tf.interop. The scoring runs on bert_tf (TensorFlow), so it needs no
PyTorch (CI has none).

The data (write_scoring_data), all from text that CPython ships:
  heldout_masks.npz  rows of --max_seq_length tokens of held-out corpus text (concatenated and
                     cut, [CLS] piece [SEP], one segment), 15% of the positions masked once
                     with a fixed seed (80% [MASK], 10% a random token, 10% kept): every model
                     is scored on the same masked positions with the same inputs.
  classify/          train.csv, dev.csv (text,label): the first paragraph of a stdlib
                     docstring, labelled by the topic of its module (TOPIC_MODULES: text,
                     files, network, numbers, concurrency). The texts are short (5-60 words,
                     like AG News' title + description) and the label is a real property of
                     the text (where it was written), not a planted word; no text is in the
                     pre-training corpus (corpus_documents leaves them out).

Scores (score()):
  mlm_loss, mlm_accuracy    mean cross-entropy and accuracy at the fixed masked positions
                            (needs the MLM head: BertForMaskedLM / BertForPreTraining /
                            ModernBertForMaskedLM directories).
  probe_mean, probe_cls     dev accuracy of a multinomial logistic regression trained on the
                            frozen encoder's mean-pooled / [CLS] last-layer vectors of the
                            training texts (standardised; L2 chosen on a held-out quarter).
  finetune_accuracy         dev accuracy after bert-tf-classify (run_classifier) fine-tunes the
                            whole encoder from the directory: FINETUNE hyperparameters.
  diagnostics               of the mean-pooled and [CLS] vectors of the dev texts: the mean
                            cosine similarity of pairs of different texts, the effective rank
                            (exp of the entropy of the normalised singular values of the
                            centred vectors), of the pooler's tanh output too, and the fraction
                            of its saturated units (|x| > 0.99).

    python tools/bench_scoring.py --data_dir=DIR MODEL_DIR [MODEL_DIR ...]

prints one JSON line per model. Nothing here imports TensorFlow at module level (the case
module imports it under interpreters without TensorFlow).
"""

import contextlib
import csv
import importlib
import inspect
import io
import json
import os
import random
import sys
import time
import warnings

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The topic of a stdlib module: the label of its docstrings. Submodules are named where the
# package imports nothing by itself (http, urllib, xml, email...).
TOPIC_MODULES = {
    "text": ("string", "re", "textwrap", "difflib", "unicodedata", "codecs", "html",
             "html.parser", "json", "csv", "xml.dom.minidom", "xml.etree.ElementTree", "xml.sax",
             "gettext", "locale", "shlex", "tomllib", "pprint", "reprlib", "stringprep",
             "encodings"),
    "files": ("os", "shutil", "pathlib", "tempfile", "glob", "fnmatch", "io", "stat", "tarfile",
              "zipfile", "gzip", "bz2", "lzma", "filecmp", "fileinput", "zlib", "mmap",
              "linecache", "posixpath", "dbm", "shelve"),
    "network": ("socket", "ssl", "http.client", "http.server", "http.cookiejar",
                "urllib.request", "urllib.parse", "ftplib", "smtplib", "imaplib", "poplib",
                "telnetlib", "xmlrpc.client", "xmlrpc.server", "socketserver", "ipaddress",
                "email.message", "email.utils", "email.headerregistry", "mailbox", "nntplib",
                "select", "selectors"),
    "numbers": ("math", "cmath", "decimal", "fractions", "statistics", "random", "numbers",
                "operator", "array", "struct", "itertools", "bisect", "heapq"),
    "concurrency": ("threading", "multiprocessing", "multiprocessing.pool", "asyncio",
                    "concurrent.futures", "queue", "subprocess", "signal", "sched", "_thread",
                    "contextvars"),
}
LABELS = tuple(TOPIC_MODULES)
MASKED_LM_PROB = 0.15
# What a model is scored on, in the order tables show them (loss: lower is better).
SCORES = ("mlm_loss", "probe_mean", "probe_cls", "finetune_accuracy")
# The fine-tune every model gets (bert-tf-classify flags): short texts, a few epochs.
FINETUNE = dict(max_seq_length=64, train_batch_size=32, learning_rate=1e-4,
                num_train_epochs=3.0, seed=1)
PROBE_L2 = (1e-3, 1e-2, 1e-1)


# ----------------------------------------------------------------------------- data

def _quiet_import(name):
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(name)


def module_docstrings(name):
    """[(object name, docstring)] of a module, its public members and their own attributes
    (not inherited ones), in a stable order; members re-exported from elsewhere included."""
    module = _quiet_import(name)
    members = [("", module)]
    for attr, value in inspect.getmembers(module):
        if attr.startswith("_") or inspect.ismodule(value):
            continue
        members.append((attr, value))
        if inspect.isclass(value):
            members += [(f"{attr}.{a}", v) for a, v in sorted(vars(value).items())
                        if not a.startswith("_")]
    docs = []
    for attr, value in members:
        if isinstance(value, (int, float, str, bytes, tuple, list, dict, frozenset, set)):
            continue  # constants carry their type's docstring
        doc = inspect.getdoc(value)
        if doc:
            docs.append((attr, doc))
    return docs


def first_paragraph(doc):
    return " ".join(doc.split("\n\n")[0].split())


def topic_texts(min_words=5, max_words=60):
    """[(text, label)]: the first paragraph of each docstring of TOPIC_MODULES' modules.

    A text is kept once; one that appears under two topics (an inherited or shared docstring)
    is dropped from both.
    """
    labels = {}
    for label, modules in TOPIC_MODULES.items():
        for name in modules:
            for _, doc in module_docstrings(name):
                text = first_paragraph(doc)
                if min_words <= len(text.split()) <= max_words:
                    labels.setdefault(text, set()).add(label)
    return sorted((text, next(iter(found))) for text, found in labels.items() if len(found) == 1)


def split_classification(rows, dev_fraction=0.3, seed=0, limit=None):
    """(train, dev): a seeded shuffle of `rows` (at most `limit` of them), stratified by label."""
    rng = random.Random(seed)
    train, dev = [], []
    for label in LABELS:
        group = [r for r in rows if r[1] == label]
        rng.shuffle(group)
        if limit:
            group = group[:max(4, limit // len(LABELS))]
        cut = round(len(group) * dev_fraction)
        dev += group[:cut]
        train += group[cut:]
    rng.shuffle(train)
    rng.shuffle(dev)
    return train, dev


def _write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["text", "label"])
        writer.writerows(rows)


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return [(row["text"], row["label"]) for row in csv.DictReader(f)]


def fixed_masks(token_ids, tokenizer, max_seq_length, max_rows, seed=0):
    """The held-out rows and their masks, the same for every model.

    Args:
      token_ids: list of int, the held-out text's WordPiece ids in order.
      tokenizer: the WordpieceTokenizer (special ids, vocabulary size).
      max_seq_length: S, the row length.
      max_rows: at most this many rows.

    Returns:
      dict of int32 arrays: input_word_ids [N, S] (masked), masked_lm_positions [N, P],
      masked_lm_ids [N, P] (the original ids), P = round(0.15 * (S - 2)).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    piece = max_seq_length - 2
    rows = min(max_rows, len(token_ids) // piece)
    predictions = max(1, round(MASKED_LM_PROB * piece))
    specials = {tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id,
                tokenizer.unk_id}
    ordinary = np.array([i for i in range(tokenizer.vocab_size) if i not in specials])
    inputs = np.zeros((rows, max_seq_length), np.int32)
    positions = np.zeros((rows, predictions), np.int32)
    originals = np.zeros((rows, predictions), np.int32)
    for r in range(rows):
        row = [tokenizer.cls_id] + token_ids[r * piece:(r + 1) * piece] + [tokenizer.sep_id]
        inputs[r] = row
        chosen = np.sort(rng.choice(np.arange(1, max_seq_length - 1), predictions,
                                    replace=False))
        positions[r] = chosen
        originals[r] = inputs[r, chosen]
        for p in chosen:
            draw = rng.random()
            if draw < 0.8:
                inputs[r, p] = tokenizer.mask_id
            elif draw < 0.9:
                inputs[r, p] = rng.choice(ordinary)
    return {"input_word_ids": inputs, "masked_lm_positions": positions,
            "masked_lm_ids": originals}


def write_scoring_data(directory, heldout_text_file, vocab_file, classification,
                       max_seq_length=128, max_rows=256):
    """Writes heldout_masks.npz and classify/{train,dev}.csv (see the module doc).

    Args:
      directory: created if needed.
      heldout_text_file: held-out corpus text (any line layout: it is concatenated).
      vocab_file: the WordPiece vocab.txt every model shares (uncased).
      classification: (train rows, dev rows) of (text, label), split_classification's.
    Returns:
      dict of sizes.
    """
    import numpy as np

    from bert_tf.text import WordpieceTokenizer

    os.makedirs(os.path.join(directory, "classify"), exist_ok=True)
    tokenizer = WordpieceTokenizer(vocab_file, do_lower_case=True)
    with open(heldout_text_file, encoding="utf-8") as f:
        ids = [i for line in f for i in tokenizer.encode(line)]
    masks = fixed_masks(ids, tokenizer, max_seq_length, max_rows)
    with open(os.path.join(directory, "heldout_masks.npz"), "wb") as f:
        np.savez(f, **masks)
    train, dev = classification
    _write_csv(os.path.join(directory, "classify", "train.csv"), train)
    _write_csv(os.path.join(directory, "classify", "dev.csv"), dev)
    return {"heldout_rows": int(masks["input_word_ids"].shape[0]),
            "heldout_predictions": int(masks["masked_lm_positions"].size),
            "classify_train": len(train), "classify_dev": len(dev)}


# ----------------------------------------------------------------------------- scoring

def _load(model_dir):
    """(BertPretrainer or None, encoder) of a Hugging Face directory."""
    from bert_tf import interop
    from bert_tf.modeling import BertPretrainer

    model, _, _ = interop.load_huggingface(model_dir)
    if isinstance(model, BertPretrainer):
        return model, model.encoder
    return None, model


def masked_lm_scores(pretrainer, masks, batch_size=32):
    """(mean cross-entropy, accuracy) at the fixed masked positions."""
    import numpy as np

    inputs = masks["input_word_ids"]
    total = correct = count = 0.0
    for start in range(0, len(inputs), batch_size):
        rows = slice(start, start + batch_size)
        ids = inputs[rows]
        real = len(ids)
        # One shape for every batch (the last one padded): one compiled function.
        pad = ((0, batch_size - real), (0, 0))
        padded = np.pad(ids, pad)
        features = {"input_word_ids": padded, "input_mask": np.ones_like(padded),
                    "input_type_ids": np.zeros_like(padded),
                    "masked_lm_positions": np.pad(masks["masked_lm_positions"][rows], pad)}
        logits = np.asarray(pretrainer.predict_on_batch(features)["mlm_logits"],
                            np.float64)[:real]
        labels = masks["masked_lm_ids"][rows]
        logits -= logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        total -= np.take_along_axis(log_probs, labels[..., None], -1).sum()
        correct += (logits.argmax(-1) == labels).sum()
        count += labels.size
    return total / count, correct / count


def token_ids(tokenizer, texts, max_seq_length, num_rows=None):
    """int32 [num_rows (default len(texts)), max_seq_length]: [CLS] text [SEP] a row, cut to
    the length, the rest (and rows past the texts) the pad id."""
    import numpy as np

    ids = np.full((num_rows or len(texts), max_seq_length), tokenizer.pad_id, np.int32)
    for i, text in enumerate(texts):
        row = [tokenizer.cls_id] + tokenizer.encode(text)[:max_seq_length - 2] + [
            tokenizer.sep_id]
        ids[i, :len(row)] = row
    return ids


def encode_texts(encoder, tokenizer, texts, max_seq_length=64, batch_size=64):
    """Vectors of `texts`: a dict of float64 [N, H] arrays: "mean" and "cls" (the last layer's
    mean over real tokens and [CLS] vector), "pooled" (the pooler's tanh output) and
    "mean_<l>", the mean of block l's output (1-based; the last is "mean")."""
    import numpy as np

    ids = token_ids(tokenizer, texts, max_seq_length, -(-len(texts) // batch_size) * batch_size)
    mask = (ids != tokenizer.pad_id).astype(np.int32)
    parts = {}
    for start in range(0, len(ids), batch_size):
        batch = slice(start, start + batch_size)
        outputs = encoder.predict_on_batch({"input_word_ids": ids[batch], "input_mask": mask[batch],
                                            "input_type_ids": np.zeros_like(ids[batch])})
        weights = mask[batch, :, None]
        found = {"pooled": outputs["pooled_output"],
                 "cls": np.asarray(outputs["sequence_output"])[:, 0]}
        for layer, sequence in enumerate(outputs["encoder_outputs"], 1):
            found[f"mean_{layer}"] = ((np.asarray(sequence, np.float64) * weights).sum(1)
                                      / np.maximum(weights.sum(1), 1))
        found["mean"] = found[f"mean_{layer}"]
        for name, value in found.items():
            parts.setdefault(name, []).append(np.asarray(value, np.float64))
    return {name: np.concatenate(value)[:len(texts)] for name, value in parts.items()}


def representation_stats(vectors):
    """Mean cosine similarity of pairs of different rows and the effective rank of [N, H]."""
    import numpy as np

    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    n = len(unit)
    cosine = (unit @ unit.T).sum() - n
    singular = np.linalg.svd(vectors - vectors.mean(0), compute_uv=False)
    p = singular / max(singular.sum(), 1e-12)
    p = p[p > 0]
    return {"mean_cosine": round(float(cosine / (n * (n - 1))), 4),
            "effective_rank": round(float(np.exp(-(p * np.log(p)).sum())), 2)}


def _fit_logistic(x, y, classes, l2):
    """Multinomial logistic regression by L-BFGS: weights [H + 1, C]."""
    import numpy as np
    from scipy.optimize import minimize

    n, h = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    onehot = np.eye(classes)[y]

    def loss_and_grad(flat):
        w = flat.reshape(h + 1, classes)
        logits = xb @ w
        logits -= logits.max(1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(1, keepdims=True)
        loss = -np.log(np.maximum((probs * onehot).sum(1), 1e-300)).mean()
        loss += 0.5 * l2 * (w[:-1] ** 2).sum()
        grad = xb.T @ (probs - onehot) / n
        grad[:-1] += l2 * w[:-1]
        return loss, grad.ravel()

    result = minimize(loss_and_grad, np.zeros((h + 1) * classes), jac=True, method="L-BFGS-B",
                      options={"maxiter": 500})
    return result.x.reshape(h + 1, classes)


def _predict(w, x):
    import numpy as np

    return (np.hstack([x, np.ones((len(x), 1))]) @ w).argmax(1)


def probe_accuracy(train_x, train_y, dev_x, dev_y):
    """Dev accuracy of a linear probe on frozen features.

    The features are standardised with the training part's mean and deviation; the L2
    strength is the one of PROBE_L2 that scores best on the last quarter of the training part
    when fit on the rest; the probe is then refit on the whole training part.

    Args:
      train_x, dev_x: float [N, H]; train_y, dev_y: int [N] in [0, C).
    Returns:
      accuracy on the dev part.
    """
    mean, std = train_x.mean(0), train_x.std(0) + 1e-8
    train_x, dev_x = (train_x - mean) / std, (dev_x - mean) / std
    classes = len(LABELS)
    cut = len(train_y) * 3 // 4
    best = max(PROBE_L2, key=lambda l2: (_predict(_fit_logistic(
        train_x[:cut], train_y[:cut], classes, l2), train_x[cut:]) == train_y[cut:]).mean())
    w = _fit_logistic(train_x, train_y, classes, best)
    return (_predict(w, dev_x) == dev_y).mean()


def finetune_accuracy(model_dir, data_dir, output_dir, seed=FINETUNE["seed"]):
    """Dev accuracy of bert-tf-classify's job fine-tuned from `model_dir` (FINETUNE settings),
    run in this process."""
    from bert_tf.jobs.classification import run_classifier
    from bert_tf.jobs.finetuning_config import ClassificationConfig
    from bert_tf.jobs.sections import from_flat

    results = run_classifier(from_flat(
        ClassificationConfig, init_checkpoint=model_dir, data_dir=data_dir,
        text_a_column="text", label_column="label", labels=list(LABELS),
        output_dir=output_dir, do_train=True, do_eval=True, do_lower_case=True,
        eval_batch_size=64, save_checkpoints_steps=100000, **dict(FINETUNE, seed=seed)))
    return results["eval"]["accuracy"]


def score(model_dir, data_dir, workdir, finetune=True, probe=True, by_layer=False,
          finetune_seeds=(FINETUNE["seed"],)):
    """Every score of one Hugging Face directory (see the module doc): a dict. by_layer: also
    probe_mean_<l>, the probe on the mean of block l's output. finetune_seeds: fine-tune once
    per seed (finetune_accuracy is their mean, finetune_accuracies each)."""
    import numpy as np

    from bert_tf.text import WordpieceTokenizer

    start = time.perf_counter()
    pretrainer, encoder = _load(model_dir)
    result = {"model_dir": model_dir}
    if pretrainer is not None:
        masks = dict(np.load(os.path.join(data_dir, "heldout_masks.npz")))
        loss, accuracy = masked_lm_scores(pretrainer, masks)
        result.update(mlm_loss=round(float(loss), 4), mlm_accuracy=round(float(accuracy), 4))
    if probe:
        tokenizer = WordpieceTokenizer(os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
        splits = [read_csv(os.path.join(data_dir, "classify", f"{name}.csv"))
                  for name in ("train", "dev")]
        labels = [np.array([LABELS.index(label) for _, label in rows]) for rows in splits]
        train, dev = (encode_texts(encoder, tokenizer, [t for t, _ in rows]) for rows in splits)
        probed = ([k for k in train if k.startswith("mean_")] if by_layer else []) + [
            "mean", "cls"]
        for name in probed:
            result[f"probe_{name}"] = round(float(probe_accuracy(
                train[name], labels[0], dev[name], labels[1])), 4)
        result["diagnostics"] = {name: representation_stats(dev[name]) for name in dev}
        result["diagnostics"]["pooler_saturated"] = round(
            float((np.abs(dev["pooled"]) > 0.99).mean()), 4)
    if finetune:
        accuracies = [float(finetune_accuracy(
            model_dir, os.path.join(data_dir, "classify"),
            os.path.join(workdir, f"finetune_{os.path.basename(os.path.normpath(model_dir))}"
                         f"_{seed}"), seed)) for seed in finetune_seeds]
        result["finetune_accuracy"] = round(sum(accuracies) / len(accuracies), 4)
        if len(accuracies) > 1:
            result["finetune_accuracies"] = [round(a, 4) for a in accuracies]
    result["score_s"] = round(time.perf_counter() - start, 1)
    return result


def main(argv):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dirs", nargs="+")
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--workdir", default=None, help="fine-tuning runs (default: a temp dir)")
    parser.add_argument("--no_finetune", action="store_true")
    parser.add_argument("--no_probe", action="store_true")
    parser.add_argument("--finetune_seeds", default=str(FINETUNE["seed"]),
                        help="comma list: fine-tune once per seed")
    parser.add_argument("--by_layer", action="store_true",
                        help="also probe the mean of every block's output")
    args = parser.parse_args(argv)
    import tempfile

    workdir = args.workdir or tempfile.mkdtemp(prefix="bert_tf_score_")
    for model_dir in args.model_dirs:
        print(json.dumps(score(model_dir, args.data_dir, workdir, not args.no_finetune,
                               not args.no_probe, args.by_layer,
                               [int(x) for x in args.finetune_seeds.split(",")])), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, _REPO)
    main(sys.argv[1:])
