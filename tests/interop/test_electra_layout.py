"""ELECTRA in Hugging Face's layout: an ElectraForPreTraining directory written by transformers
(fixtures/hf_electra, made by tools/make_hf_reference.py) reads into bert_tf with
transformers' outputs, and an ElectraPretrainer writes it back tensor for tensor; live (with
the peers' Python), transformers loads what bert_tf writes as ElectraForPreTraining and as
ElectraForSequenceClassification, and fine-tunes it."""

import json
import os
import subprocess

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

import peers
from bert_tf.interop import huggingface, load_huggingface, read_huggingface, save_huggingface
from bert_tf.interop import weights
from bert_tf.modeling import BertEncoder, ElectraPretrainer, build_encoder

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hf_electra")
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def discriminator():
    """An ElectraPretrainer holding the fixture's discriminator, and the transfer's report."""
    source = read_huggingface(FIXTURE)
    model = ElectraPretrainer(build_encoder(source.config))
    return model, source, weights.transfer(source, model, strict=False)


def _reference():
    reference = np.load(os.path.join(FIXTURE, "reference.npz"))
    inputs = {k: reference[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    return reference, inputs, reference["input_mask"].astype(bool)


def test_transformers_electra_reads_with_its_outputs(discriminator):
    model, source, report = discriminator
    config = source.config
    assert (config.embedding_size, config.hidden_size, config.hidden_act) == (16, 32,
                                                                              "gelu_exact")
    assert source.head_kind == weights.REPLACED_TOKEN_DETECTION
    # Everything of ElectraForPreTraining loaded; what it lacks (the generator, the pooler)
    # is new, and nothing went unused.
    names = weights.model_variables(model)
    new = sorted(variable.path for name, (variable, _) in names.items()
                 if name.startswith(weights.GENERATOR_SCOPES + (weights.POOLER_SCOPE,)))
    assert sorted(report.newly_initialized) == new and report.unused == []
    reference, inputs, real = _reference()
    sequence = keras.ops.convert_to_numpy(model.encoder(inputs)["sequence_output"])
    np.testing.assert_allclose(sequence[real], reference["sequence_output"][real],
                               atol=TOLERANCE, rtol=TOLERANCE)
    logits = keras.ops.convert_to_numpy(model.discriminate(inputs))
    np.testing.assert_allclose(logits[real], reference["discriminator_logits"][real],
                               atol=TOLERANCE, rtol=TOLERANCE)
    # load_huggingface gives the discriminator's encoder.
    encoder, _, _ = load_huggingface(FIXTURE)
    assert type(encoder) is BertEncoder
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(encoder(inputs)["sequence_output"])[real],
        reference["sequence_output"][real], atol=TOLERANCE, rtol=TOLERANCE)


def test_an_electra_pretrainer_writes_transformers_layout_tensor_for_tensor(discriminator,
                                                                           tmp_path):
    model, source, _ = discriminator
    save_huggingface(model, str(tmp_path))
    written = load_file(str(tmp_path / "model.safetensors"))
    original = load_file(os.path.join(FIXTURE, "model.safetensors"))
    assert sorted(written) == sorted(original)
    for key, value in written.items():
        assert np.array_equal(value, original[key]), key
    values = json.loads((tmp_path / "config.json").read_text())
    with open(os.path.join(FIXTURE, "config.json")) as f:
        expected = json.load(f)
    assert {k: v for k, v in values.items() if k in expected} == {
        k: expected[k] for k in values if k in expected}
    assert huggingface.read_config(str(tmp_path))[0] == source.config


def test_the_writer_refuses_what_electra_cannot_hold(small_bert_config):
    model = ElectraPretrainer(BertEncoder(small_bert_config.replace(share_parameters="all")))
    with pytest.raises(weights.InteropError) as error:
        save_huggingface(model, "/nonexistent/out")
    assert str(error.value) == ("the model's config has share_parameters='all'; Hugging Face "
                                "ELECTRA checkpoints hold plain BERT only "
                                "(share_parameters='none')")


@pytest.fixture
def small_bert_config():
    from bert_tf.config import BertConfig

    return BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


_TRANSFORMERS_SCRIPT = r"""
import json, sys
import numpy as np, torch, transformers

directory, reference = sys.argv[1], np.load(sys.argv[2])
ids = torch.from_numpy(reference["input_word_ids"].astype("int64"))
mask = torch.from_numpy(reference["input_mask"].astype("int64"))
types = torch.from_numpy(reference["input_type_ids"].astype("int64"))
model, info = transformers.ElectraForPreTraining.from_pretrained(directory,
                                                                 output_loading_info=True)
with torch.no_grad():
    logits = model.eval()(input_ids=ids, attention_mask=mask, token_type_ids=types).logits.numpy()
real = reference["input_mask"].astype(bool)
report = {"pretraining_missing": sorted(info["missing_keys"]),
          "pretraining_unexpected": sorted(info["unexpected_keys"]),
          "logits_difference": float(np.abs(logits - reference["logits"])[real].max())}

# Fine-tune as a classifier: label = whether token 7 occurs in the row.
torch.manual_seed(0)
classifier, info = transformers.ElectraForSequenceClassification.from_pretrained(
    directory, num_labels=2, output_loading_info=True)
report["classifier_missing"] = sorted(info["missing_keys"])
rng = np.random.default_rng(0)
rows = rng.integers(8, 100, size=(64, 12))
labels = rng.integers(0, 2, size=64)
rows[labels == 1, rng.integers(1, 12, size=int(labels.sum()))] = 7
rows[:, 0] = 2
inputs = torch.from_numpy(rows.astype("int64"))
targets = torch.from_numpy(labels.astype("int64"))
optimizer = torch.optim.AdamW(classifier.parameters(), lr=3e-3)
classifier.train()
losses = []
for epoch in range(15):
    for start in range(0, 64, 16):
        out = classifier(input_ids=inputs[start:start + 16], labels=targets[start:start + 16])
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        losses.append(float(out.loss))
classifier.eval()
with torch.no_grad():
    predicted = classifier(input_ids=inputs).logits.argmax(-1).numpy()
report.update(first_loss=float(np.mean(losses[:4])), last_loss=float(np.mean(losses[-4:])),
              train_accuracy=float((predicted == labels).mean()))
print(json.dumps(report))
"""


@peers.needs("PyTorch and transformers")
def test_transformers_loads_and_fine_tunes_what_bert_tf_writes(small_bert_config, tmp_path):
    """bert_tf's own ElectraPretrainer (E = H: no projection) written, then loaded in
    transformers: the same discriminator logits, no missing or unexpected weight; as a
    classifier only the classification head is new, and it trains."""
    keras.utils.set_random_seed(3)
    model = ElectraPretrainer(BertEncoder(small_bert_config))
    save_huggingface(model, str(tmp_path / "hf"))
    _, inputs, _ = _reference()
    np.savez(tmp_path / "reference.npz", **inputs,
             logits=keras.ops.convert_to_numpy(model.discriminate(inputs)))
    proc = subprocess.run([peers.python(), "-c", _TRANSFORMERS_SCRIPT, str(tmp_path / "hf"),
                           str(tmp_path / "reference.npz")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["pretraining_missing"] == [] and report["pretraining_unexpected"] == []
    assert report["logits_difference"] < TOLERANCE
    assert report["classifier_missing"] == ["classifier.dense.bias", "classifier.dense.weight",
                                            "classifier.out_proj.bias",
                                            "classifier.out_proj.weight"]
    assert report["last_loss"] < report["first_loss"] / 2, report
    assert report["train_accuracy"] > 0.9, report
