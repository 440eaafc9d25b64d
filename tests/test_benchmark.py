"""tools/benchmark.py end to end on its smallest shapes: the JSON it prints and writes.

Checks the structure and arithmetic of the results (keys, types, ratios and MFU derived from the
measured numbers), never the speed: timings are the benchmark's output, not a test condition.
"""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "tools", "benchmark.py")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--cases=pretrain,tokenizer", "--models=tiny",
         "--dtypes=float32", "--xla_modes=off", f"--output_file={out}"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    with open(out) as f:
        document = json.load(f)
    return lines, document, proc.stdout


def _rows(rows, case, kind):
    return [r for r in rows if r.get("case") == case and r.get("kind") == kind]


def test_prints_machine_line_and_writes_the_same_rows(quick_run):
    lines, document, _ = quick_run
    assert lines[0]["case"] == "machine"
    assert lines[0]["cpus"] == os.cpu_count()
    assert len(lines[0]["load_avg_start"]) == 3
    assert document["quick"] is True
    assert document["cases"] == ["pretrain", "tokenizer"]
    assert document["results"] == [r for r in lines[1:]]
    assert "errors" not in document and not [r for r in document["results"] if "error" in r]


def test_pretrain_rows_and_derived_numbers(quick_run):
    rows = quick_run[1]["results"]
    (peak,) = _rows(rows, "pretrain", "matmul_peak")
    assert peak["float32_gflops"] > 0 and peak["bfloat16_gflops"] > 0
    steps = _rows(rows, "pretrain", "step")
    assert {(r["impl"], r["model"], r["dtype"], r["xla"]) for r in steps} == {
        ("bert_tf", "tiny", "float32", False), ("keras_hub", "tiny", "float32", False)}
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
    ours, hub = (next(r for r in steps if r["impl"] == i) for i in ("bert_tf", "keras_hub"))
    # The NSP head (pooler is shared) adds a few parameters; the encoders are the same size.
    assert 0 < ours["params"] - hub["params"] < 20_000
    # bert_tf's count includes the NSP head, 2 x (H^2 + 2H) per sequence, 3x for training.
    assert ours["flops_per_step"] - hub["flops_per_step"] == 3 * 4 * 2 * (128 * 128 + 2 * 128)
    (ratio,) = _rows(rows, "pretrain", "ratio")
    assert ratio["ratio"] == pytest.approx(ours["tokens_per_s"] / hub["tokens_per_s"], rel=1e-3)
    notes = _rows(rows, "pretrain", "note")
    assert notes and "BertForPreTraining" in notes[0]["note"]


def test_tokenizer_rows(quick_run):
    rows = quick_run[1]["results"]
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


def test_table_is_printed(quick_run):
    stdout = quick_run[2]
    assert "bert_tf best / keras-hub best =" in stdout
    assert "matmul peak: fp32" in stdout


def test_unknown_case_is_a_usage_error():
    proc = subprocess.run([sys.executable, SCRIPT, "--cases=pretrain,bogus"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode != 0
    assert "--cases: unknown bogus; expected pretrain, tokenizer, create_data, input_pipeline" \
        in proc.stderr
