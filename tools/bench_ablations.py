"""The `ablations` case of tools/benchmark.py: each lever of the CPU budget recipe
(official_configs/pretraining/time_budget_mini.flags) turned on or off alone, every arm trained
for the same wall-clock budget and scored the same way (tools/bench_scoring.py: held-out
masked-LM loss on fixed masks, linear probes, a short fine-tune), on the time_to_quality case's
data (bench_time_to_quality.write_data: CPython's prose, the 30,522-word uncased vocabulary).

Arms run one after the other, each in a fresh process, scored right after it trains, so every
arm gets the same idle machine for its budget. ARMS lists them: the recipe, then one change
each. A lever that changes the model (dropout, BERT's block) writes its own model config; both
blocks have BERT-mini's width, depth and parameter count.
"""

import json
import os

import bench_common
import bench_scoring
import bench_time_to_quality as ttq

# Seconds of wall-clock each arm trains for (the whole command, as --time_budget counts it).
ABLATION_BUDGET_S = 150
QUICK_STEPS = 3

# The model config of an arm: None (the recipe's own), a dict of changes to it, or BERT_BLOCK
# (official_configs/models/bert_mini.json whole: post-LN BERT with biases, learned positions and
# dropout 0.1, BERT-mini's width, depth and parameter count, the recipe's block before the
# 2026-12-05 ablation).
BERT_BLOCK = "bert_mini"

# (name, what it changes, extra flags after the recipe's, model config). "recipe" is the
# reference every other arm is compared with.
ARMS = (
    ("recipe", "time_budget_mini.flags as it is", [], None),
    ("nsp", "next-sentence prediction on (segment pairs, no full-sentence packing) on BERT's "
     "block (ModernBERT's layout has no NSP head)",
     ["--use_next_sentence_label=true", "--full_sentences=false"], BERT_BLOCK),
    ("no_packing", "no full-sentence packing (one document's segments per row)",
     ["--full_sentences=false"], None),
    ("mask_30", "30% masking", ["--masked_lm_prob=0.3", "--max_predictions_per_seq=39"], None),
    ("mask_40", "40% masking", ["--masked_lm_prob=0.4", "--max_predictions_per_seq=52"], None),
    ("mask_falling", "masking 30% falling to 15% over the budget",
     ["--masked_lm_prob=0.3", "--masked_lm_prob_end=0.15", "--max_predictions_per_seq=39"], None),
    ("mask_falling_5", "masking 30% falling to 5% over the budget (mmBERT's 30 -> 5)",
     ["--masked_lm_prob=0.3", "--masked_lm_prob_end=0.05", "--max_predictions_per_seq=39"],
     None),
    ("batch_ramp", "batch 16 growing to 32 over the first half (Cramming's batch-size ramp: "
     "accumulation 1 -> 2)",
     ["--train_batch_size=16", "--gradient_accumulation_steps=2", "--batch_size_ramp=0.5"],
     None),
    ("batch_16", "batch 16 throughout (the ramp's first batch, without the ramp)",
     ["--train_batch_size=16"], None),
    ("batch_ramp_128", "batch 32 growing to 128 over the first 75% (accumulation 1 -> 4)",
     ["--gradient_accumulation_steps=4", "--batch_size_ramp=0.75"], None),
    ("no_cls_bow", "no [CLS] bag-of-words loss (the masked LM alone)",
     ["--bag_of_words_weight=0"], None),
    ("cls_bow_0.3", "the [CLS] bag-of-words loss at weight 0.3 (the recipe's is 1)",
     ["--bag_of_words_weight=0.3"], None),
    ("lr_5e-4", "peak learning rate 5e-4", ["--learning_rate=5e-4"], None),
    ("lr_2e-3", "peak learning rate 2e-3", ["--learning_rate=2e-3"], None),
    ("wsd", "warmup-stable-decay schedule (decay over the last 20%)",
     ["--lr_schedule=wsd", "--decay_proportion=0.2"], None),
    ("no_bias_correction", "Adam without bias correction (the original BERT optimizer)",
     ["--adam_bias_correction=false"], None),
    ("dropout", "dropout 0.1 (hidden and attention)", [],
     {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}),
    ("seq_64", "64-token rows, batch 64 (the same tokens per step)",
     ["--max_seq_length=64", "--train_batch_size=64", "--max_predictions_per_seq=10"], None),
    ("bert_block", "BERT's block (post-LN, biases, learned positions, dropout 0.1)", [],
     BERT_BLOCK),
    ("electra", "replaced-token detection (--objective=electra) on BERT's block (ELECTRA "
     "trains BERT's encoder and no [CLS] bag of words)",
     ["--objective=electra", "--bag_of_words_weight=0"], BERT_BLOCK),
)


def recipe_config():
    """The recipe's model config, a dict."""
    with open(ttq.recipe_config_file()) as f:
        return json.load(f)


def arm_config(arm, workdir, quick=False):
    """Writes the model config of an arm under workdir (a tiny version when quick); its path."""
    name, _, _, spec = arm
    if spec == BERT_BLOCK:
        with open(ttq.MODEL_CONFIG) as f:
            config = json.load(f)
    else:
        config = dict(recipe_config(), **(spec or {}))
    path = os.path.join(workdir, f"config_{name}.json")
    with open(path, "w") as f:
        json.dump(ttq.shrink(config) if quick else config, f, indent=1)
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
    wanted = ["recipe"] + [a for a in (arm_names or [a[0] for a in ARMS]) if a != "recipe"]
    unknown = sorted(set(wanted) - {a[0] for a in ARMS})
    if unknown:
        raise ValueError(f"unknown ablation arms {unknown}; expected {[a[0] for a in ARMS]}")
    rows = [{"case": "ablations", "kind": "data", **sizes, "budget_s": budget,
             "recipe": os.path.relpath(ttq.RECIPE, ttq._REPO), "load_avg": bench_common.load()}]
    reference = None
    for arm in (a for name in wanted for a in ARMS if a[0] == name):
        name = arm[0]
        config_file = arm_config(arm, workdir, quick)
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
                for key in bench_scoring.SCORES
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
    scores = "  ".join(f"{k} {final[k]}" for k in bench_scoring.SCORES if k in final)
    diffs = "  ".join(f"{k} {v:+.4f}" for k, v in row.get("diff_vs_recipe", {}).items())
    return [f"{'ablations':14} {row['arm']:18} {row['steps']:5} steps  {scores}"
            + (f"  (vs recipe: {diffs})" if diffs else "")]
