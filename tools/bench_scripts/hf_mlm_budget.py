"""Hugging Face transformers' masked-LM pre-training the way run_mlm.py does it, stopped at a
wall-clock budget, for tools/bench_time_to_quality.py.

run_mlm.py's method: every line of the corpus tokenized with [CLS] ... [SEP]
(BertTokenizerFast from the directory holding vocab.txt), the token lists concatenated and cut
into blocks of max_seq_length (group_texts), DataCollatorForLanguageModeling's masking (15%:
80% [MASK], 10% random, 10% kept; fresh masks every batch), BertForMaskedLM from a BertConfig,
torch AdamW (the Trainer's defaults: betas 0.9/0.999, eps 1e-8, weight decay on all but biases
and LayerNorm weights), gradient clipping at 1.0, a linear schedule with warmup. The budget
covers the whole command, as bert-tf-pretrain's --time_budget does: training gets what is left
of budget_s after the imports and tokenization (less a few seconds for the last save), and the
schedule runs on elapsed training time T of that, so it ends with it:
lr(t) = peak * min(t / (warmup_share * T), 1) * (1 - t / T).

On a GPU (torch.cuda), as the accelerator_quality case runs it: the model on the GPU,
bfloat16 autocast, fused AdamW; `ids_file` (bench_accelerator_quality's train_ids.npz: the
corpus's lines tokenized once for every trainer) then replaces tokenizing `corpus`, each line
still [CLS] ... [SEP] before the concatenation.

Runs under --torch_python (no TensorFlow, no bert_tf). Argument: one JSON object (corpus or
ids_file, model_dir (holds vocab.txt), output_dir, config (BertConfig fields), budget_s,
warmup_share, learning_rate, weight_decay, batch_size, max_seq_length, save_every_s, seed;
max_steps: stop and schedule on steps instead, step s counting as s * budget_s / max_steps
seconds). Writes output_dir/ckpt-<i>/ (save_pretrained: config.json, model.safetensors,
vocab.txt) about every save_every_s seconds of training and at the budget, and
output_dir/progress.json: per checkpoint the seconds since this process started and since
training started, steps and tokens; prints one BENCH_RESULT line.
"""

import json
import os
import shutil
import sys
import time

PROCESS_START = time.time()

import torch  # noqa: E402
import transformers  # noqa: E402

args = json.loads(sys.argv[1])
torch.manual_seed(args.get("seed", 0))
tokenizer = transformers.BertTokenizerFast.from_pretrained(args["model_dir"])
if args.get("ids_file"):
    import numpy as np

    with np.load(args["ids_file"]) as arrays:
        pieces = np.split(arrays["ids"].astype(np.int64),
                          np.cumsum(arrays["sentence_lengths"])[:-1])
    ids = np.concatenate([np.concatenate([[tokenizer.cls_token_id], piece,
                                          [tokenizer.sep_token_id]]) for piece in pieces])
else:
    with open(args["corpus"], encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    ids = [i for line in tokenizer(lines)["input_ids"] for i in line]
block = args["max_seq_length"]
blocks = torch.tensor(ids[:len(ids) // block * block]).view(-1, block)
collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = transformers.BertForMaskedLM(transformers.BertConfig(**args["config"])).to(device)
no_decay = ("bias", "LayerNorm.weight")
groups = [{"params": [p for n, p in model.named_parameters()
                      if not any(k in n for k in no_decay)],
           "weight_decay": args.get("weight_decay", 0.0)},
          {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
           "weight_decay": 0.0}]
optimizer = torch.optim.AdamW(groups, lr=args["learning_rate"], betas=(0.9, 0.999), eps=1e-8,
                              fused=device.type == "cuda")
# Seconds kept for the last save_pretrained after training.
FINAL_SAVE_S = 3.0
max_steps = args.get("max_steps")
budget = float(args["budget_s"])


def run_progress(step, train_start):
    """(fraction of the run done, its elapsed seconds) at `step`."""
    if max_steps:
        return step / max_steps, step * budget / max_steps
    elapsed = time.time() - train_start
    return elapsed / budget, elapsed


def rate(done):
    warmup = args.get("warmup_share", 0.0)
    warm = min(1.0, done / warmup) if warmup > 0 else 1.0
    return args["learning_rate"] * warm * max(0.0, 1.0 - done)


output_dir = args["output_dir"]
os.makedirs(output_dir, exist_ok=True)
progress = []


def save(step, tokens, train_start):
    directory = os.path.join(output_dir, f"ckpt-{len(progress)}")
    model.save_pretrained(directory)
    shutil.copyfile(os.path.join(args["model_dir"], "vocab.txt"),
                    os.path.join(directory, "vocab.txt"))
    now = time.time()
    progress.append({"dir": directory, "step": step, "tokens": tokens,
                     "process_s": round(now - PROCESS_START, 2),
                     "train_s": round(now - train_start, 2)})
    with open(os.path.join(output_dir, "progress.json"), "w") as f:
        json.dump(progress, f, indent=1)


model.train()
generator = torch.Generator().manual_seed(args.get("seed", 0))
order = torch.randperm(len(blocks), generator=generator)
batch, cursor, step, tokens, losses = args["batch_size"], 0, 0, 0, []
train_start = time.time()
if not max_steps:  # the whole command's budget: what the set-up left
    budget = max(1.0, PROCESS_START + budget - FINAL_SAVE_S - train_start)
next_save = args["save_every_s"]
while True:
    done, elapsed = run_progress(step, train_start)
    if done >= 1.0:
        break
    if elapsed >= next_save:
        save(step, tokens, train_start)
        next_save += args["save_every_s"]
    if cursor + batch > len(order):
        order, cursor = torch.randperm(len(blocks), generator=generator), 0
    rows = blocks[order[cursor:cursor + batch]]
    cursor += batch
    features = collator([{"input_ids": r} for r in rows])
    for group in optimizer.param_groups:
        group["lr"] = rate(done)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        loss = model(input_ids=features["input_ids"].to(device),
                     labels=features["labels"].to(device)).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    step += 1
    tokens += rows.numel()
    # Read back every 20 steps only: each read waits for the GPU to finish the step.
    losses.append(loss.detach())
    if step % 20 == 0:
        losses[-20:] = [float(x) for x in losses[-20:]]
save(step, tokens, train_start)
print("BENCH_RESULT " + json.dumps({
    "steps": step, "tokens": tokens, "train_s": progress[-1]["train_s"],
    "process_s": round(time.time() - PROCESS_START, 2), "blocks": len(blocks),
    "final_train_loss": round(sum(float(x) for x in losses[-20:]) / max(1, len(losses[-20:])),
                              4),
    "tokens_per_s": round(tokens / max(progress[-1]["train_s"], 1e-9), 1),
    "checkpoints": progress, "torch": torch.__version__,
    "transformers": transformers.__version__, "threads": torch.get_num_threads(),
    "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
    "load_avg": round(os.getloadavg()[0], 2)}), flush=True)
