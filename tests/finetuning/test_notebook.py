"""notebooks/fine_tune_classifier.ipynb runs top to bottom and its classifier learns."""

import json
import os

import nbformat
import pytest
from nbclient import NotebookClient


@pytest.mark.slow
def test_fine_tune_classifier_notebook(tmp_path, repo_root):
    notebook = nbformat.read(os.path.join(repo_root, "notebooks", "fine_tune_classifier.ipynb"),
                             as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(
        "import json\n"
        "print(json.dumps({'accuracy': float(accuracy), 'epochs': len(history.history['loss']),"
        " 'predicted': [label for _, label, _ in classify(['a superb film .', 'a poor plot .'])]"
        "}))"))
    client = NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = notebook.cells[-1].outputs
    summary = json.loads("".join(o.get("text", "") for o in outputs if o.output_type == "stream"))
    assert summary["epochs"] == 6
    assert summary["accuracy"] >= 0.9
    assert summary["predicted"] == ["positive", "negative"]
    # The curves were drawn (an image output) and the model file was written.
    images = [o for cell in notebook.cells if cell.cell_type == "code"
              for o in cell.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    assert os.path.exists(tmp_path / "fine_tuned_classifier.keras")
