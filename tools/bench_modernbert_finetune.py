"""The `modernbert_finetune` case of tools/benchmark.py: fine-tuning a small ModernBERT on the
`finetune` case's short phrases, bert_tf against Hugging Face on PyTorch.

No pre-trained ModernBERT is at hand (nothing may be downloaded), so the case builds one at
random initialisation and both sides start from it:

  tokenizer.json  a byte-level BPE trained with `tokenizers` on the English prose of CPython's
                  pydoc_data topics, laid out as ModernBERT's (NFC, ByteLevel without prefix
                  space, "[CLS] $A [SEP]"), [PAD] [CLS] [SEP] [MASK] [UNK] at ids 0-4;
                  tokenizer_config.json names their roles (transformers' AutoTokenizer and
                  bert_tf read it).
  the model       a ModernBertForSequenceClassification (2 labels) at random initialisation,
                  saved by transformers under --torch_python (config.json, model.safetensors);
                  FULL: hidden 256, 6 layers, 4 heads, intermediate 384, a 128-token local
                  window, a global layer every 3, mean pooling, vocabulary 8,000. Without
                  --torch_python (the --quick smoke run) bert_tf builds the same kind of model
                  at random and writes it in the same format (bert_tf.interop.save_huggingface).

The classifier head is in the checkpoint, so both sides start from identical weights, head
included. Rows, on the `finetune` case's data (tools/bench_finetune.py: SST-2-like phrases
from pydoc_data, each labelled by one sentiment word) with the same hyperparameters on both
sides (batch 32, learning rate LEARNING_RATE with 10% warmup and linear decay, EPOCHS epochs,
weight decay 0.01 except norms and biases, gradients clipped to global norm 1.0,
--max_seq_length 128, float32):
  bert_tf   `python -m bert_tf.run_classifier --init_checkpoint=<the Hugging Face directory>`
            (the directory converted on load; length buckets auto, the default);
  hf_torch  ModernBertForSequenceClassification (SDPA attention), each batch padded to its
            longest text (DataCollatorWithPadding), torch threads 2 with passive OpenMP
            waiting (see run_worker), under --torch_python.
Each reports the training wall time, dev accuracy and the wall time to predict the dev set;
the ratio row gives HF time / bert_tf time (> 1: bert_tf faster; target >= 1.0) and the
accuracy difference (target: within 0.015). --quick: 96 training phrases, a tiny model and
the bert_tf row only (with --torch_python also the HF row).

Workers run in fresh processes (`python bench_modernbert_finetune.py <worker> <json args>`);
the tokenizer and Hugging Face workers run under --torch_python, which need not have
TensorFlow, so nothing here imports TensorFlow at module level.
"""

import json
import os
import sys
import time

# Standard library and sibling modules only: the Hugging Face workers import this file too.
import bench_finetune
from bench_common import RESULT_PREFIX, run_command

LEARNING_RATE = 5e-4
EPOCHS = 3.0
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")

FULL = dict(bench_finetune.FULL, epochs=EPOCHS, learning_rate=LEARNING_RATE)
QUICK = dict(bench_finetune.QUICK, epochs=EPOCHS, learning_rate=LEARNING_RATE)
# transformers.ModernBertConfig fields of the model built at random (the rest: its defaults,
# which are ModernBERT-base's: no biases, exact GELU, dropout 0, rotary bases 160k / 10k).
FULL_MODEL = dict(vocab_size=8000, hidden_size=256, intermediate_size=384, num_hidden_layers=6,
                  num_attention_heads=4, local_attention=128, global_attn_every_n_layers=3)
QUICK_MODEL = dict(vocab_size=1000, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                   num_attention_heads=2, local_attention=16, global_attn_every_n_layers=3)
_FIXED = dict(max_position_embeddings=512, pad_token_id=0, cls_token_id=1, sep_token_id=2,
              bos_token_id=1, eos_token_id=2, classifier_pooling="mean", num_labels=2,
              architectures=["ModernBertForSequenceClassification"], model_type="modernbert")
SEED = 1


def model_values(quick):
    """The config.json values (transformers ModernBertConfig fields) of the model to build."""
    return dict(QUICK_MODEL if quick else FULL_MODEL, **_FIXED)


# ----------------------------------------------------------------------------- workers

def _emit(result):
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def worker_tokenizer(args):
    """Trains the byte-level BPE on the pydoc topics; writes tokenizer.json and
    tokenizer_config.json into args["output_dir"]."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers

    from pydoc_data.topics import topics

    # All of the topics' text (prose and examples), so the vocabulary reaches its size.
    lines = [line for name in sorted(topics) for line in topics[name].split("\n")
                 if line.strip()]
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args["vocab_size"], min_frequency=1,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    cls, sep = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    out = args["output_dir"]
    os.makedirs(out, exist_ok=True)
    tokenizer.save(os.path.join(out, "tokenizer.json"))
    roles = dict(zip(("pad_token", "cls_token", "sep_token", "mask_token", "unk_token"),
                     SPECIAL_TOKENS))
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(roles, tokenizer_class="PreTrainedTokenizerFast", model_max_length=512,
                       model_input_names=["input_ids", "attention_mask"]), f, indent=2)
    _emit({"vocab_size": tokenizer.get_vocab_size(),
           "special_ids": [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS],
           "lines": len(lines)})


def worker_hf_model(args):
    """transformers builds the ModernBertForSequenceClassification at random and saves it."""
    import torch
    import transformers

    torch.manual_seed(SEED)
    values = {k: v for k, v in args["values"].items() if k not in ("architectures",
                                                                    "model_type")}
    config = transformers.ModernBertConfig(**values)
    model = transformers.ModernBertForSequenceClassification(config)
    model.save_pretrained(args["output_dir"], safe_serialization=True)
    _emit({"built_by": f"transformers {transformers.__version__}",
           "parameters": sum(p.numel() for p in model.parameters())})


def worker_bert_tf_model(args):
    """bert_tf builds the same kind of classifier at random and writes it as a Hugging Face
    ModernBertForSequenceClassification (the --quick run without --torch_python)."""
    import keras

    from bert_tf.fileio import write_text_atomic
    from bert_tf.interop import modernbert
    from bert_tf.interop.huggingface import save_huggingface
    from bert_tf.modeling import BertClassifier, ModernBertEncoder

    keras.utils.set_random_seed(SEED)
    config = modernbert.config_from_hf(args["values"])
    model = BertClassifier(ModernBertEncoder(config), num_classes=args["values"]["num_labels"])
    save_huggingface(model, args["output_dir"])
    # bert_tf's config has no special-token ids; transformers reads them from config.json.
    path = os.path.join(args["output_dir"], "config.json")
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    values.update({k: v for k, v in args["values"].items() if k.endswith("_token_id")})
    write_text_atomic(path, json.dumps(values, indent=2, sort_keys=True) + "\n")
    _emit({"built_by": "bert_tf", "parameters": int(model.count_params())})


def worker_hf_torch(args):
    """ModernBertForSequenceClassification fine-tuned on PyTorch: bench_finetune's Hugging Face
    loop with the ModernBERT class, torch threads 2, norms and biases without weight decay,
    gradients clipped to 1.0 (as bert_tf's optimizer)."""
    bench_finetune.worker_hf_torch(dict(
        args, model_class="ModernBertForSequenceClassification", threads=2,
        no_decay=["bias", "norm.weight"], max_grad_norm=1.0))


def worker_bert_tf(args):
    bench_finetune.worker_bert_tf(args)


WORKERS = {"tokenizer": worker_tokenizer, "hf_model": worker_hf_model,
           "bert_tf_model": worker_bert_tf_model, "bert_tf": worker_bert_tf,
           "hf_torch": worker_hf_torch}


# ----------------------------------------------------------------------------- the case

def run_worker(name, args, python=None, timeout=3600):
    """Runs worker `name` in a fresh process of `python`; its result dict or {"error": ...}."""
    cmd = [python or sys.executable, os.path.abspath(__file__), name, json.dumps(args)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if python:
        # The other interpreter's own packages only (bert_tf's PYTHONPATH is not for it).
        env.pop("PYTHONPATH", None)
    if name == "hf_torch":
        # PyTorch's OpenMP threads spin at every parallel region waiting for each other; when
        # other work shares the 2 cores, one is descheduled and the other spins: measured on
        # this model under load 3, 1-6 s per training step with 2 threads against 0.3-0.7 s
        # with passive waiting (and 0.4 s with 1 thread). Passive waiting measures the library
        # rather than the scheduler.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return run_command(name, cmd, env, timeout)


def build_model_dir(directory, quick, torch_python):
    """Writes the tokenizer and the random-init model into `directory`; returns the model row
    (or an error row)."""
    values = model_values(quick)
    started = time.perf_counter()
    # `tokenizers` comes with transformers; this interpreter may lack it without --torch_python.
    tokenizer = run_worker("tokenizer", {"output_dir": directory,
                                         "vocab_size": values["vocab_size"]}, python=torch_python)
    if "error" in tokenizer:
        return {"case": "modernbert_finetune", "kind": "model", **tokenizer}
    # The model's vocabulary is the tokenizer's (BPE training may stop short of the target).
    values["vocab_size"] = tokenizer["vocab_size"]
    args = {"output_dir": directory, "values": values}
    if torch_python:
        model = run_worker("hf_model", args, python=torch_python)
    else:
        model = run_worker("bert_tf_model", args)
    row = {"case": "modernbert_finetune", "kind": "model", **model,
           "config": {k: values[k] for k in (*FULL_MODEL, "classifier_pooling")},
           "tokenizer_lines": tokenizer.get("lines"),
           "build_s": round(time.perf_counter() - started, 1)}
    return row


def ratio_row(runs):
    """HF time / bert_tf time (train, predict) and bert_tf - HF dev accuracy; None when either
    run failed."""
    ours, theirs = runs.get("bert_tf"), runs.get("hf_torch")
    if not ours or not theirs or "error" in ours or "error" in theirs:
        return None
    return {"case": "modernbert_finetune", "kind": "ratio", "ours": "bert_tf",
            "versus": "hf_torch",
            "speed_vs_hf": round(theirs["train_s"] / ours["train_s"], 3),
            "predict_speed_vs_hf": round(theirs["predict_s"] / ours["predict_s"], 3),
            "accuracy_diff": round(ours["dev_accuracy"] - theirs["dev_accuracy"], 4),
            "target_speed_vs_hf": 1.0, "target_abs_accuracy_diff": 0.015}


def case_modernbert_finetune(workdir, quick, torch_python=None):
    """All rows of the case (see the module docstring)."""
    shape = QUICK if quick else FULL
    rows = []
    model_dir = os.path.join(workdir, "modernbert_random")
    model = build_model_dir(model_dir, quick, torch_python)
    rows.append(model)
    if "error" in model:
        return rows
    data_dir = os.path.join(workdir, "modernbert_finetune_data")
    splits = bench_finetune.write_data(data_dir, shape["num_train"], shape["num_dev"])
    from bert_tf.text import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    lengths = [len(tokenizer.encode(text)) + 2 for text, _ in splits["train"]]
    rows.append({"case": "modernbert_finetune", "kind": "data",
                 "num_train": len(splits["train"]), "num_dev": len(splits["dev"]),
                 "mean_tokens": round(sum(lengths) / len(lengths), 2),
                 "max_tokens": max(lengths), "max_seq_length": shape["max_seq_length"],
                 "batch_size": shape["batch_size"], "epochs": shape["epochs"],
                 "learning_rate": shape["learning_rate"]})
    args = dict(shape, data_dir=data_dir, model_dir=model_dir)
    runs = {"bert_tf": run_worker("bert_tf", dict(
        args, length_buckets="auto", output_dir=os.path.join(workdir, "modernbert_bert_tf")))}
    if torch_python:
        runs["hf_torch"] = run_worker("hf_torch", args, python=torch_python)
    for impl, result in runs.items():
        rows.append({"case": "modernbert_finetune", "kind": "run", "impl": impl, **result})
    ratio = ratio_row(runs)
    if ratio:
        rows.append(ratio)
    if not torch_python:
        rows.append({"case": "modernbert_finetune", "kind": "note",
                     "note": "Hugging Face row skipped (model built by bert_tf): no "
                             "--torch_python"})
    return rows


def format_lines(row):
    """Table lines of one modernbert_finetune row (see benchmark.format_table)."""
    name, kind = "mbert_finetune", row.get("kind")
    if kind == "model":
        return [f"{name:14} random-init ModernBERT {row['config']} built by "
                f"{row['built_by']}, {row['parameters']:,} parameters"]
    if kind == "data":
        return [f"{name:14} {row['num_train']} train / {row['num_dev']} dev phrases, "
                f"{row['mean_tokens']} BPE tokens on average (max {row['max_tokens']}), "
                f"batch {row['batch_size']}, {row['epochs']} epochs, lr {row['learning_rate']}"]
    if kind == "run":
        return [f"{name:14} {row['impl']:12} train {row['train_s']:8.1f} s  dev accuracy "
                f"{row['dev_accuracy']:.4f}  predict {row['predict_s']:7.2f} s  "
                f"(load {row['load_avg']})"]
    if kind == "ratio":
        return [f"{name:14} hf_torch time / bert_tf: train x{row['speed_vs_hf']} (target "
                f"{row['target_speed_vs_hf']}), predict x{row['predict_speed_vs_hf']}, "
                f"accuracy bert_tf - HF {row['accuracy_diff']:+.4f} (target within "
                f"{row['target_abs_accuracy_diff']})"]
    return []


if __name__ == "__main__":
    WORKERS[sys.argv[1]](json.loads(sys.argv[2]))
