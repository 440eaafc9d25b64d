"""Hugging Face BertForPreTraining train-step throughput, for tools/bench_pretrain.py.

Runs under --torch_python (a Python with torch + transformers, maybe without TensorFlow), so
it imports neither TF, absl nor bert_tf. Argument: one JSON object (config, batch, seq,
preds, steps, warmup, repeats); output: one BENCH_RESULT line.
"""

import json
import os
import statistics
import sys
import time

import torch
import transformers

args = json.loads(sys.argv[1])
threads = os.cpu_count()
torch.set_num_threads(threads)
torch.manual_seed(0)
build_start = time.perf_counter()
model = transformers.BertForPreTraining(transformers.BertConfig(**args["config"]))
model.train()
# The usual fine-tuning/pre-training optimizer of HF users: AdamW with global-norm clipping.
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
b, s, p = args["batch"], args["seq"], args["preds"]
v = args["config"]["vocab_size"]
g = torch.Generator().manual_seed(0)
input_ids = torch.randint(5, v, (b, s), generator=g)
attention_mask = torch.ones(b, s, dtype=torch.long)
token_type_ids = torch.cat([torch.zeros(b, s // 2, dtype=torch.long),
                            torch.ones(b, s - s // 2, dtype=torch.long)], dim=1)
# P labelled positions per row, -100 elsewhere (ignored by the loss; the MLM head still
# computes logits at all S positions, as BertForPreTraining does).
positions = torch.stack([torch.randperm(s - 1, generator=g)[:p] + 1 for _ in range(b)])
labels = torch.full((b, s), -100, dtype=torch.long)
labels.scatter_(1, positions, torch.randint(5, v, (b, p), generator=g))
next_sentence_label = torch.randint(0, 2, (b,), generator=g)


def train_steps(n):
    for _ in range(n):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=input_ids, attention_mask=attention_mask,
                     token_type_ids=token_type_ids, labels=labels,
                     next_sentence_label=next_sentence_label).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return float(loss)


train_steps(1)
compile_seconds = time.perf_counter() - build_start
for _ in range(args["warmup"]):
    train_steps(args["steps"])
times = []
for _ in range(args["repeats"]):
    start = time.perf_counter()
    train_steps(args["steps"])
    times.append(time.perf_counter() - start)
step_seconds = statistics.median(times) / args["steps"]
loss = train_steps(1)
print("BENCH_RESULT " + json.dumps({
    "ms_per_step": round(1000 * step_seconds, 2),
    "tokens_per_s": round(b * s / step_seconds, 1),
    "compile_s": round(compile_seconds, 1), "final_loss_finite": loss == loss,
    "params": sum(t.numel() for t in model.parameters()),
    "torch": torch.__version__, "transformers": transformers.__version__,
    "attn_implementation": model.config._attn_implementation, "threads": threads,
    "load_avg": round(os.getloadavg()[0], 2)}), flush=True)
