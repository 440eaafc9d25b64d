"""Hugging Face transformers' pre-training step on one accelerator, for tools/bench_accelerator.py.

Runs under --torch_python (PyTorch + transformers; neither TensorFlow nor bert_tf is needed):
BertForPreTraining (MLM + NSP) or ModernBertForMaskedLM (MLM, sparse_prediction: logits at the
masked positions only, as bert_tf computes them) from the bert_tf config given, SDPA attention,
torch.autocast bfloat16, fused AdamW, eager. Argument: one JSON object; output: one
BENCH_RESULT line.
"""

import json
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_accelerator import peak_tflops, result_row  # noqa: E402
from bench_common import emit  # noqa: E402

args = json.loads(sys.argv[1])
config, spec = args["config"], args["spec"]
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
_ACTIVATIONS = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu"}
if config.get("architecture") == "modernbert":
    window = config.get("local_attention_window", 0)
    hf_config = transformers.ModernBertConfig(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
        intermediate_size=config["intermediate_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"],
        max_position_embeddings=config["max_position_embeddings"],
        hidden_activation=_ACTIVATIONS[config["hidden_act"]], norm_eps=config["layer_norm_eps"],
        local_attention=window or config["max_position_embeddings"] * 2,
        global_attn_every_n_layers=config.get("global_attn_every_n_layers", 1),
        sparse_prediction=True, reference_compile=False, attn_implementation="sdpa",
        # Inside any vocabulary (--quick's 512 ids too); the batches hold no padding.
        pad_token_id=0)
    model = transformers.ModernBertForMaskedLM(hf_config)
else:
    hf_config = transformers.BertConfig(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"],
        intermediate_size=config["intermediate_size"],
        hidden_act=_ACTIVATIONS[config["hidden_act"]],
        max_position_embeddings=config["max_position_embeddings"],
        type_vocab_size=config["type_vocab_size"], layer_norm_eps=config["layer_norm_eps"],
        attn_implementation="sdpa")
    model = transformers.BertForPreTraining(hf_config)
model.to(device).train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6,
                              fused=device.type == "cuda")
b, s, p = spec["batch"], spec["seq"], spec["predictions"]
g = torch.Generator().manual_seed(0)
inputs = {"input_ids": torch.randint(5, config["vocab_size"], (b, s), generator=g),
          "attention_mask": torch.ones(b, s, dtype=torch.long)}
positions = torch.stack([torch.randperm(s - 1, generator=g)[:p] + 1 for _ in range(b)])
labels = torch.full((b, s), -100, dtype=torch.long)
labels.scatter_(1, positions, torch.randint(5, config["vocab_size"], (b, p), generator=g))
inputs["labels"] = labels
if spec["nsp"]:
    inputs["token_type_ids"] = torch.cat([torch.zeros(b, s // 2, dtype=torch.long),
                                          torch.ones(b, s - s // 2, dtype=torch.long)], 1)
    inputs["next_sentence_label"] = torch.randint(0, 2, (b,), generator=g)
inputs = {k: v.to(device) for k, v in inputs.items()}


def train_step():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = model(**inputs).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def synchronize():
    if device.type == "cuda":
        torch.cuda.synchronize()


start = time.perf_counter()
loss = train_step()
synchronize()
first_step = time.perf_counter() - start
for _ in range(args["warmup"]):
    train_step()
synchronize()
if device.type == "cuda":
    torch.cuda.reset_peak_memory_stats()
start = time.perf_counter()
for _ in range(args["steps"]):
    loss = train_step()
synchronize()
seconds = (time.perf_counter() - start) / args["steps"]
name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else None
row = result_row("huggingface_torch", args["model"], config, spec, seconds, first_step, name,
                 peak, float(loss), attention="sdpa", torch=torch.__version__,
                 transformers=transformers.__version__)
row["peak_tflops"] = peak_tflops(name)
emit(row)
