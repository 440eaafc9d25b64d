"""notebooks/*.ipynb run top to bottom, learn what they claim, and print no warning.

Each notebook runs in a kernel of its own (nbclient) in its own directory; a cell appended here
checks its results in the kernel. Any stderr output is a warning the reader did not cause (the
first cell, `import bert_tf`, keeps TensorFlow's start-up, oneDNN and XLA notices away: checked
where TensorFlow starts in the kernel, FRESH_KERNEL).

FRESH_KERNEL starts its kernel as Jupyter does, an interpreter that imports TensorFlow itself
(whose start-up notices must stay off the output); the others fork theirs from the tests' server
that imported TensorFlow and Keras once (tests/zygote.py), a few seconds less each.
"""

import glob
import json
import os

import nbformat
import pytest
from nbclient import NotebookClient

import zygote
from quiet_check import noisy_lines

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "notebooks",
                                                                       "*.ipynb")))

# What each notebook must have achieved, checked in its kernel after its last cell.
CHECKS = {
    "fine_tune_classifier.ipynb": """
import os
assert len(history.history["loss"]) == 6
assert accuracy >= 0.9, accuracy
assert [label for _, label, _ in classify(["a superb film .", "a poor plot ."])] == [
    "positive", "negative"]
assert os.path.exists("fine_tuned_classifier.keras")
""",
    "pretrain_with_fit.ipynb": """
mlm = history.history["masked_lm_accuracy"]
# From the unigram level (about 0.07) to twice that: the model learns from context.
assert mlm[-1] > 0.15 and mlm[-1] > mlm[0] + 0.05, mlm
assert held_out_metrics["masked_lm_accuracy"] > 0.1, held_out_metrics
assert len(fill_mask("The [MASK] statement.")) == 5 and encoder.config.hidden_size == 64
""",
    "squad_question_answering.ipynb": """
assert scores["exact_match"] >= 80 and scores["f1"] >= 80, scores
assert list(squad_postprocess.compute_predictions(
    examples, features, logits["start_logits"], logits["end_logits"], max_answer_length=5,
    do_lower_case=True).predictions.values()) == ["law"]
""",
    "sentence_embeddings_search.ipynb": """
assert after["mrr@10"] > before["mrr@10"] + 0.1, (before, after)
assert after["recall@1"] > before["recall@1"] + 0.1 and after["recall@1"] > 5 / len(test_pairs)
assert len(search("exceptions")) == 3
""",
    "long_document_modernbert.ipynb": """
assert accuracy > majority + 0.1, (accuracy, majority)
assert int(x_long["input_mask"].sum()) == 4096
assert abs(float(probabilities.sum()) - 1) < 1e-5
""",
    "export_and_serve.ipynb": """
assert [l.decode() for l in out["predicted_label"].numpy()[:2]] == ["statement", "type"]
np.testing.assert_allclose(tf.nn.softmax(logits["logits"]).numpy(),
                           out["probabilities"].numpy()[:1], atol=1e-5)
assert sorted(loaded.signatures) == ["serve_examples", "serve_text", "serving_default"]
""",
}

FRESH_KERNEL = "fine_tune_classifier.ipynb"
FORKED_KERNEL = "bert_tf_tests_forked"


def test_every_notebook_has_its_checks():
    assert sorted(CHECKS) == NOTEBOOKS and FRESH_KERNEL in NOTEBOOKS


@pytest.fixture(scope="module")
def forked_kernel(tmp_path_factory):
    """A Jupyter path whose kernel FORKED_KERNEL is the fork server's `python`, and that
    `python` (a kernel started with it has it as sys.executable)."""
    root = tmp_path_factory.mktemp("jupyter")
    python = zygote.shared_python(dict(os.environ), now=True)
    (root / "kernels" / FORKED_KERNEL).mkdir(parents=True)
    (root / "kernels" / FORKED_KERNEL / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (forked)", "language": "python"}))
    return str(root), python


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_and_learns(name, tmp_path, request, monkeypatch):
    notebook = nbformat.read(os.path.join(REPO, "notebooks", name), as_version=4)
    assert not [c for c in notebook.cells if c.cell_type == "code" and c.outputs], (
        f"{name}: commit notebooks without outputs")
    notebook.cells.append(nbformat.v4.new_code_cell(CHECKS[name]))
    kernel = "python3"
    if name != FRESH_KERNEL:
        jupyter_path, python = request.getfixturevalue("forked_kernel")
        monkeypatch.setenv("JUPYTER_PATH", jupyter_path)
        kernel = FORKED_KERNEL
        # Forked indeed: a client whose settings differ from its server's runs the real
        # interpreter instead, as slow as a fresh kernel.
        notebook.cells.append(nbformat.v4.new_code_cell(
            f"import sys\nassert sys.executable == {python!r}, sys.executable"))
    client = NotebookClient(notebook, timeout=600, kernel_name=kernel,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    stderr = [line for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.outputs
              if output.output_type == "stream" and output.name == "stderr"
              for line in output.text.splitlines() if line.strip()]
    assert not stderr, f"{name} printed to stderr:\n" + "\n".join(stderr[:20])
    stdout = "\n".join(output.text for cell in notebook.cells if cell.cell_type == "code"
                       for output in cell.outputs
                       if output.output_type == "stream" and output.name == "stdout")
    # Keras' live progress bar is a notebook's (colour codes included); no TensorFlow lines.
    assert not [line for line in noisy_lines(stdout) if "\x1b[" not in line], stdout[-2000:]
    if name == "fine_tune_classifier.ipynb":  # its training curves
        images = [o for cell in notebook.cells if cell.cell_type == "code"
                  for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(images) == 1
