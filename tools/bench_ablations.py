"""The `ablations` case of tools/benchmark.py: each lever of the CPU budget recipe
(official_configs/pretraining/time_budget_mini.flags) turned on or off alone, every arm trained
for the same wall-clock budget and scored the same way (tools/bench_scoring.py: held-out
masked-LM loss on fixed masks, linear probes, a short fine-tune), on the time_to_quality case's
data (bench_time_to_quality.write_data: CPython's prose, the 30,522-word uncased vocabulary).

Arms run one after the other, each in a fresh process, scored right after it trains, so every
arm gets the same idle machine for its budget. ARMS lists them: the recipe, then one change
each. A lever that changes the model (dropout, the modern block) writes its own model config;
the modern block keeps BERT-mini's width, depth and feed-forward parameter count.
"""

import json
import os

import bench_common
import bench_time_to_quality as ttq

# Seconds of wall-clock each arm trains for (the whole command, as --time_budget counts it).
ABLATION_BUDGET_S = 150
QUICK_STEPS = 3

# The modern encoder's block at BERT-mini's size: pre-LN without biases, a gated (GLU)
# feed-forward whose intermediate size keeps the parameter count (3 x 256 x 688 ~ 2 x 256 x
# 1024), rotary positions; no token types (no pair objective in the recipe).
MODERN_MINI = {
    "architecture": "modernbert", "attention_probs_dropout_prob": 0.0,
    "classifier_pooling": "mean", "feed_forward_type": "gated", "final_layer_norm": True,
    "global_attn_every_n_layers": 1, "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.0,
    "hidden_size": 256, "initializer_range": 0.02, "intermediate_size": 688,
    "layer_norm_eps": 1e-05, "local_attention_window": 128, "max_position_embeddings": 512,
    "norm_bias": False, "norm_placement": "pre", "num_attention_heads": 4,
    "num_hidden_layers": 4, "pooler_type": "head", "position_embedding_type": "rotary",
    "type_vocab_size": 0, "use_bias": False, "vocab_size": 30522}

# (name, what it changes, extra flags after the recipe's, model config changes or a whole
# config). "recipe" is the reference every other arm is compared with.
ARMS = (
    ("recipe", "time_budget_mini.flags as it is", [], None),
    ("nsp", "next-sentence prediction on (segment pairs, no full-sentence packing)",
     ["--use_next_sentence_label=true", "--full_sentences=false"], None),
    ("no_packing", "no full-sentence packing (one document's segments per row)",
     ["--full_sentences=false"], None),
    ("mask_30", "30% masking", ["--masked_lm_prob=0.3", "--max_predictions_per_seq=39"], None),
    ("mask_40", "40% masking", ["--masked_lm_prob=0.4", "--max_predictions_per_seq=52"], None),
    ("lr_5e-4", "peak learning rate 5e-4", ["--learning_rate=5e-4"], None),
    ("lr_2e-3", "peak learning rate 2e-3", ["--learning_rate=2e-3"], None),
    ("wsd", "warmup-stable-decay schedule (decay over the last 20%)",
     ["--lr_schedule=wsd", "--decay_proportion=0.2"], None),
    ("no_bias_correction", "Adam without bias correction (the original BERT optimizer)",
     ["--adam_bias_correction=false"], None),
    ("no_dropout", "dropout off", [],
     {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}),
    ("seq_64", "64-token rows, batch 64 (the same tokens per step)",
     ["--max_seq_length=64", "--train_batch_size=64", "--max_predictions_per_seq=10"], None),
    ("modern_block", "the modern block: pre-LN, no biases, GLU, rotary, no dropout", [],
     MODERN_MINI),
    ("electra", "replaced-token detection (--objective=electra)", ["--objective=electra"], None),
)


def arm_config(arm, base_config, workdir):
    """The model config file of an arm: base_config (a dict) with the arm's changes, or the
    arm's whole config (a dict with "architecture"), written under workdir."""
    name, _, _, changes = arm
    config = dict(changes) if changes and "architecture" in changes else dict(
        base_config, **(changes or {}))
    path = os.path.join(workdir, f"config_{name}.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=1)
    return path


def arm_flags(arm, config_file, vocab, corpus, quick):
    """bert-tf-pretrain's flags for an arm: the recipe's flagfile, then its changes."""
    flags = [f"--flagfile={ttq.RECIPE}", f"--bert_config_file={config_file}",
             f"--vocab_file={vocab}", f"--input_text_file={corpus}",
             "--save_checkpoints_steps=100000", *arm[2]]
    if quick:
        flags += [f"--num_train_steps={QUICK_STEPS}", "--num_warmup_steps=1",
                  "--steps_per_loop=1"]
    return flags


def quick_config(config):
    """A tiny version of a model config for --quick (width 32, one block)."""
    return dict(config, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=64 if config.get("architecture") != "modernbert" else 48,
                max_position_embeddings=128)


def case_ablations(workdir, quick, budget_s=None, arm_names=None):
    """Trains and scores every arm (or those named), one after the other.

    Args:
      workdir: scratch directory.
      quick: tiny models, QUICK_STEPS steps each, no fine-tune (the smoke test).
      budget_s: each arm's wall-clock budget (default ABLATION_BUDGET_S).
      arm_names: the arms to run (default all); "recipe" always runs first.
    Returns rows: one "data", one "arm" per arm (its scores and its differences from the
    recipe's).
    """
    if ttq.vocab_file() is None:
        return [{"case": "ablations", "kind": "note",
                 "note": "skipped: the vocabulary's pip package is not installed"}]
    budget = None if quick else (budget_s or ABLATION_BUDGET_S)
    data_dir = os.path.join(workdir, "ablations_data")
    sizes = ttq.write_data(data_dir, quick)
    corpus, vocab = (os.path.join(data_dir, n) for n in ("corpus_train.txt", "vocab.txt"))
    with open(ttq.MODEL_CONFIG) as f:
        base_config = json.load(f)
    wanted = ["recipe"] + [a for a in (arm_names or [a[0] for a in ARMS]) if a != "recipe"]
    unknown = sorted(set(wanted) - {a[0] for a in ARMS})
    if unknown:
        raise ValueError(f"unknown ablation arms {unknown}; expected {[a[0] for a in ARMS]}")
    rows = [{"case": "ablations", "kind": "data", **sizes, "budget_s": budget,
             "recipe": os.path.relpath(ttq.RECIPE, ttq._REPO), "load_avg": bench_common.load()}]
    reference = None
    for arm in (a for name in wanted for a in ARMS if a[0] == name):
        name = arm[0]
        config_file = arm_config(arm, base_config, workdir)
        if quick:
            with open(config_file) as f:
                small = quick_config(json.load(f))
            with open(config_file, "w") as f:
                json.dump(small, f)
        row = {"case": "ablations", "kind": "arm", "arm": name, "change": arm[1],
               "flags": arm[2], "load_avg_before": bench_common.load()}
        trained = ttq.run_worker("bert_tf", {
            "output_dir": os.path.join(workdir, f"arm_{name}"),
            "flags": arm_flags(arm, config_file, vocab, corpus, quick), "budget_s": budget})
        if "error" in trained:
            rows.append(dict(row, error=trained["error"]))
            continue
        last = trained["checkpoints"][-1]
        scored = ttq.run_worker("score", {
            "runs": {name: [last]}, "data_dir": data_dir,
            "workdir": os.path.join(workdir, f"score_{name}"), "vocab_file": vocab,
            "bert_config_file": config_file, "finetune": not quick})
        if "error" in scored:
            rows.append(dict(row, steps=trained["steps"], error=scored["error"]))
            continue
        final = {k: v for k, v in scored["scores"][name][-1].items()
                 if k not in ("bert_tf", "model_dir")}
        row.update(steps=trained["steps"], process_s=trained["process_s"], final=final)
        if name == "recipe":
            reference = final
        elif reference:
            row["diff_vs_recipe"] = {
                key: round(final[key] - reference[key], 4)
                for key in ("mlm_loss", "probe_mean", "probe_cls", "finetune_accuracy")
                if final.get(key) is not None and reference.get(key) is not None}
        rows.append(row)
    return rows


def format_lines(row):
    """Table lines of one ablations row (see benchmark.format_table)."""
    if row.get("kind") == "data":
        return [f"{'ablations':14} {row['budget_s']} s per arm, corpus {row['train_bytes']} "
                f"bytes, recipe {row['recipe']}"]
    if row.get("kind") != "arm":
        return []
    if "error" in row:
        return [f"{'ablations':14} {row['arm']:18} error: {row['error'][:200]}"]
    final = row["final"]
    scores = "  ".join(f"{k} {final[k]}" for k in ("mlm_loss", "probe_mean", "probe_cls",
                                                     "finetune_accuracy") if k in final)
    diffs = "  ".join(f"{k} {v:+.4f}" for k, v in row.get("diff_vs_recipe", {}).items())
    return [f"{'ablations':14} {row['arm']:18} {row['steps']:5} steps  {scores}"
            + (f"  (vs recipe: {diffs})" if diffs else "")]
