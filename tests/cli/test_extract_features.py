"""tools/extract_features.py: the original's JSON lines, values equal to the encoder's."""

import json
import os

import numpy as np
import pytest

from command_batch import REPO_ROOT, run_commands
from finetuning_helpers import pretrained_encoder_weights

TOOL = os.path.join(REPO_ROOT, "tools", "extract_features.py")


def _expected(pretrained_dir, features):
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertEncoder

    encoder = BertEncoder(BertConfig.from_json_file(str(pretrained_dir / "bert_config.json")))
    encoder.set_weights(pretrained_encoder_weights(pretrained_dir))
    outputs = encoder({k: np.array([v], np.int32) for k, v in features.items()})
    return outputs["encoder_outputs"][0].numpy()[0], outputs["pooled_output"].numpy()[0]


@pytest.mark.slow
def test_token_layers_and_sentence_embeddings(tmp_path, pretrained_dir):
    from bert_tf.text import WordpieceTokenizer, pack_inputs

    input_file = tmp_path / "input.txt"
    input_file.write_text("Alice saw a GOOD film.\nbob ||| rome was dull\n\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    bucketed_out = tmp_path / "bucketed.jsonl"
    bad_layers_out = tmp_path / "bad.jsonl"
    common = [f"--input_file={input_file}", f"--init_checkpoint={pretrained_dir}",
              "--max_seq_length=8"]
    # The three runs share one process (one TensorFlow start-up); each starts from the
    # command's defaults.
    result, bucketed_result, bad_result = run_commands([
        (TOOL, [*common, f"--output_file={out}", "--layers=-1,0", "--batch_size=2", "--pooled"]),
        # Length buckets 4 and 8 (inputs of 8, 7 and 2 pieces).
        (TOOL, [*common, f"--output_file={bucketed_out}", "--layers=-1,0", "--batch_size=2",
                "--pooled", "--length_buckets=4"]),
        (TOOL, [*common, f"--output_file={bad_layers_out}", "--layers=-2"])])
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2]
    tokens = [[f["token"] for f in r["features"]] for r in records]
    # Truncated to 8 pieces; the pair gets segment B; an empty line is [CLS] [SEP].
    assert tokens == [["[CLS]", "alice", "[UNK]", "a", "good", "film", ".", "[SEP]"],
                      ["[CLS]", "bob", "[SEP]", "rome", "was", "dull", "[SEP]"],
                      ["[CLS]", "[SEP]"]]
    first = records[1]["features"][3]
    assert [layer["index"] for layer in first["layers"]] == [-1, 0]

    tokenizer = WordpieceTokenizer(str(pretrained_dir / "vocab.txt"))
    features = pack_inputs(tokenizer.encode("bob"), tokenizer.encode("rome was dull"),
                           max_seq_length=8, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id)
    sequence, pooled = _expected(pretrained_dir, features)
    values = np.array([f["layers"][0]["values"] for f in records[1]["features"]])
    np.testing.assert_allclose(values, sequence[:7], atol=2e-6)
    np.testing.assert_allclose(records[1]["pooled"], pooled, atol=2e-6)
    mean = records[1]["mean_pooled"]
    assert [m["index"] for m in mean] == [-1, 0]
    np.testing.assert_allclose(mean[0]["values"], sequence[:7].mean(0), atol=2e-6)

    # Length buckets 4 and 8: other batches, same lines in order.
    assert bucketed_result.returncode == 0, bucketed_result.stderr[-3000:]
    bucketed = [json.loads(line) for line in bucketed_out.read_text(encoding="utf-8").splitlines()]
    assert [r["linex_index"] for r in bucketed] == [0, 1, 2]
    for got, want in zip(bucketed, records):
        assert [f["token"] for f in got["features"]] == [f["token"] for f in want["features"]]
        np.testing.assert_allclose(got["pooled"], want["pooled"], atol=2e-6)
        np.testing.assert_allclose([f["layers"][1]["values"] for f in got["features"]],
                                   [f["layers"][1]["values"] for f in want["features"]], atol=2e-6)

    result = bad_result
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "extract_features: error: --layers=-2: layer -2 does not exist; the model has "
        "num_hidden_layers=1 (indices -1..0)")


def test_modernbert_directory_with_a_tokenizer_json(tmp_path):
    """A Hugging Face ModernBERT directory (tokenizer.json, no vocab.txt): the tokenizer is
    found beside --init_checkpoint, "token" holds the byte-level BPE tokens, the values are the
    encoder's for the Python tokenizer's ids."""
    from absl import flags
    from bpe_fixtures import make_modernbert_dir

    from bert_tf import interop
    from bert_tf.cli import extract_features
    from bert_tf.cli import flags as cli_flags
    from bert_tf.jobs import extract_features as extract_features_job
    from bert_tf.jobs.extract_features_config import ExtractFeaturesConfig
    from bert_tf.modeling import build_encoder
    from bert_tf.text import load_tokenizer, pack_inputs

    model_dir = make_modernbert_dir(str(tmp_path / "modernbert"))
    input_file = tmp_path / "input.txt"
    input_file.write_text("Hi world\nThe cat ||| sat.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    flag_values = extract_features.define_flags(flags.FlagValues())
    flag_values(["extract", f"--input_file={input_file}", f"--output_file={out}",
                 f"--init_checkpoint={model_dir}", "--layers=-1,0", "--max_seq_length=16",
                 "--batch_size=2"])
    config = cli_flags.to_config(ExtractFeaturesConfig, flag_values)
    assert config == ExtractFeaturesConfig(
        input_file=str(input_file), output_file=str(out), init_checkpoint=model_dir,
        layers="-1,0", max_seq_length=16, batch_size=2)
    assert extract_features_job.extract_features(config) == 2
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [[f["token"] for f in r["features"]] for r in records] == [
        ["[CLS]", "H", "i", "Ġ", "w", "o", "r", "l", "d", "[SEP]"],
        ["[CLS]", "T", "h", "e", "Ġ", "c", "a", "t", "[SEP]", "s", "a", "t", ".", "[SEP]"]]

    tokenizer = load_tokenizer(os.path.join(model_dir, "tokenizer.json"))
    features = pack_inputs(tokenizer.encode("The cat"), tokenizer.encode("sat."),
                           max_seq_length=16, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                           pad_id=tokenizer.pad_id)
    encoder = build_encoder(interop.checkpoint_config(model_dir))
    interop.warm_start(model_dir, encoder)
    outputs = encoder({k: np.array([v], np.int32) for k, v in features.items()})
    for j, layer in enumerate((-1, 0)):
        values = np.array([f["layers"][j]["values"] for f in records[1]["features"]])
        np.testing.assert_allclose(values, outputs["encoder_outputs"][layer].numpy()[0, :14],
                                   rtol=0, atol=2e-6)
