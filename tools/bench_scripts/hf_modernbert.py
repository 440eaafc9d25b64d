"""Hugging Face ModernBERT forward latency, peak memory and train-step time, for
tools/bench_modernbert.py.

Runs under --torch_python (torch + transformers, no TensorFlow). Argument: one JSON object
(mode "forward" or "train", config, batch, seq, preds, warmup, repeats); output: one
BENCH_RESULT line.
"""

import json
import os
import resource
import statistics
import sys
import time

import torch
import transformers

args = json.loads(sys.argv[1])
torch.set_num_threads(os.cpu_count())
torch.manual_seed(0)
config = transformers.ModernBertConfig(**args["config"], sparse_prediction=True)
b, s = args["batch"], args["seq"]
g = torch.Generator().manual_seed(0)
input_ids = torch.randint(5, config.vocab_size, (b, s), generator=g)
attention_mask = torch.ones(b, s, dtype=torch.long)


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if args["mode"] == "forward":
    model = transformers.ModernBertModel._from_config(config, attn_implementation="sdpa").eval()

    def run():
        with torch.no_grad():
            return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
else:
    model = transformers.ModernBertForMaskedLM._from_config(
        config, attn_implementation="sdpa").train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
    p = args["preds"]
    positions = torch.stack([torch.randperm(s - 1, generator=g)[:p] + 1 for _ in range(b)])
    labels = torch.full((b, s), -100, dtype=torch.long)
    labels.scatter_(1, positions, torch.randint(5, config.vocab_size, (b, p), generator=g))

    def run():
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

built_mb = peak_mb()
run()
first_mb = peak_mb()
for _ in range(args["warmup"]):
    run()
times = []
for _ in range(args["repeats"]):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
print("BENCH_RESULT " + json.dumps({
    "impl": "hf_sdpa", "mode": args["mode"], "batch": b, "seq": s,
    "ms": round(1000 * statistics.median(times), 1),
    "peak_rss_mb": round(peak_mb(), 1), "model_rss_mb": round(built_mb, 1),
    "first_call_growth_mb": round(first_mb - built_mb, 1),
    "threads": torch.get_num_threads(), "versions": f"torch {torch.__version__}, "
    f"transformers {transformers.__version__}",
    "load_avg": round(os.getloadavg()[0], 2)}), flush=True)
