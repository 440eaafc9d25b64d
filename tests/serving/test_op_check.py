"""The op check: our exports use only ops the TF Serving model server links; others are caught."""

import os
import subprocess

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from bert_tf.serving import check_ops, list_ops, server_op_allowlist

import serving_cases as cases
import zygote

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("op_check")

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools", "export_saved_model.py")
PLANTED = "BertTfPlantedOp"


@pytest.fixture(scope="module")
def server_ops():
    return server_op_allowlist()


def test_allowlist_is_read_from_the_registries(server_ops):
    assert {"MatMul", "StaticRegexReplace", "UnicodeDecode", "RaggedTensorToTensor"} <= \
        server_ops.core
    assert "FastWordpieceTokenizeWithOffsets" in server_ops.tf_text
    assert "FastWordpieceTokenizeWithOffsets" not in server_ops.core
    assert server_ops.source("FastWordpieceTokenizeWithOffsets") == "tensorflow-text"
    # Registered by TensorFlow's Python extension but unusable without Python.
    assert "EagerPyFunc" in server_ops.core and server_ops.source("EagerPyFunc") is None
    assert server_ops.versions["tensorflow"] == tf.__version__
    assert "tensorflow-text" in server_ops.versions


def test_every_export_passes(serving_run, server_ops):
    for kind in cases.KINDS:
        report = check_ops(serving_run.export_dirs[kind], server_ops)
        assert report.ok, (kind, report.missing)
        assert report.sources["FastWordpieceTokenizeWithOffsets"] == "tensorflow-text"
        assert report.sources["MatMul"] == "core"
        # Ops inside functions count: the graph itself holds only the calls.
        assert report.counts["FastWordpieceTokenizeWithOffsets"] >= 1
        text = report.format()
        assert text.splitlines()[-1].startswith("OK: every op is in core TensorFlow or "
                                                "tensorflow-text (tensorflow ")


def test_a_sentencepiece_export_passes(server_ops, tmp_path_factory, tmp_path):
    """An export tokenizing with a SentencePiece model (ALBERT's) uses tensorflow-text's
    SentencePiece op, which the model server links."""
    import dataclasses

    from bert_tf import serving
    from bert_tf.modeling import BertClassifier, BertEncoder
    from bert_tf.text import load_tokenizer

    from sentencepiece_fixtures import sentencepiece_model_file

    tokenizer = load_tokenizer(sentencepiece_model_file(tmp_path_factory))
    config = dataclasses.replace(cases.tiny_config(), vocab_size=tokenizer.vocab_size)
    export_dir = serving.export(BertClassifier(BertEncoder(config), num_classes=2),
                                str(tmp_path / "1"), tokenizer=tokenizer,
                                max_seq_length=cases.SEQ_LENGTH, signatures=("text",))
    report = check_ops(export_dir, server_ops)
    assert report.ok, report.missing
    sentencepiece_ops = [op for op in report.sources if "Sentencepiece" in op]
    assert sentencepiece_ops and {report.sources[op] for op in sentencepiece_ops} == {
        "tensorflow-text"}


def _plant_op(export_dir, target):
    """Copies saved_model.pb with one node of an op no library registers in a function."""
    os.makedirs(target)
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    function = saved_model.meta_graphs[0].graph_def.library.function[0]
    function.node_def.add(name="planted", op=PLANTED)
    with open(os.path.join(target, "saved_model.pb"), "wb") as f:
        f.write(saved_model.SerializeToString())
    return target


def test_a_planted_op_fails(serving_run, server_ops, tmp_path):
    export_dir = _plant_op(serving_run.export_dirs["classifier"], str(tmp_path / "planted"))
    report = check_ops(export_dir, server_ops)
    assert not report.ok
    assert report.missing == {PLANTED: "not a core TensorFlow or tensorflow-text op"}
    assert list_ops(export_dir)[PLANTED] == 1
    assert f"  {PLANTED}" in report.format()
    assert report.format().splitlines()[-1].startswith(
        f"FAILED: the TF Serving model server does not have {PLANTED} (checked against")


def test_py_function_fails(server_ops, tmp_path):
    class WithPython(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def __call__(self, x):
            return tf.py_function(lambda v: v * 2, [x], tf.float32)

    export_dir = str(tmp_path / "py")
    tf.saved_model.save(WithPython(), export_dir)
    report = check_ops(export_dir, server_ops)
    assert report.missing == {
        "EagerPyFunc": "its kernel runs Python code (tf.py_function / tf.numpy_function)"}


def test_missing_saved_model_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no saved_model.pb; expected a SavedModel "
                                                "version directory such as EXPORT/1"):
        list_ops(str(tmp_path))


@pytest.mark.slow
def test_cli_check_fails_on_a_planted_op(serving_run, tmp_path):
    bad = _plant_op(serving_run.export_dirs["squad"], str(tmp_path / "1"))
    failed = subprocess.run([zygote.shared_python(), TOOL, "--check", bad], capture_output=True,
                            text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert failed.returncode == 1, failed.stderr[-3000:]
    lines = failed.stdout.splitlines()
    assert lines[0] == f"SavedModel {bad}"
    # Every op is listed with its count and where the server has it from.
    (text_op,) = [l for l in lines if l.strip().startswith("FastWordpieceTokenizeWithOffsets")]
    assert text_op.split()[2] == "tensorflow-text"
    (planted,) = [l for l in lines if l.strip().startswith(PLANTED)]
    assert planted.split() == [PLANTED, "1", "MISSING:", "not", "a", "core", "TensorFlow",
                               "or", "tensorflow-text", "op"]
    assert lines[-1].startswith(f"FAILED: the TF Serving model server does not have {PLANTED}")
