"""Hugging Face BERT: parity with transformers' outputs (fixtures), exact round trip, errors.

The fixtures under fixtures/hf_bert_{gelu,gelu_new} were written by tools/make_hf_reference.py
with transformers + PyTorch (not needed here): a random BertForPreTraining saved with
save_pretrained, and transformers' outputs for fixed inputs.
"""

import json
import os
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from bert_tf.interop import InteropError, load_huggingface, save_huggingface, warm_start
from bert_tf.modeling import BertEncoder, BertPretrainer
from interop_reference import bert_tf_outputs

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
_FEATURES = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")


def fixture(act):
    return os.path.join(FIXTURES, f"hf_bert_{act}")


def reference(act):
    return dict(np.load(os.path.join(fixture(act), "reference.npz")))


def copy_fixture(tmp_path, act="gelu"):
    directory = tmp_path / f"hf_{act}"
    shutil.copytree(fixture(act), directory)
    return directory


def assert_matches(got, ref, names):
    for name in names:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("act, hidden_act, eps", [("gelu", "gelu_exact", 1e-12),
                                                   ("gelu_new", "gelu", 1e-3)])
def test_outputs_match_transformers(act, hidden_act, eps):
    model, config, vocab_file = load_huggingface(fixture(act))
    assert isinstance(model, BertPretrainer) and model.next_sentence is not None
    assert (config.hidden_act, config.layer_norm_eps) == (hidden_act, eps)
    assert vocab_file == os.path.join(fixture(act), "vocab.txt")
    ref = reference(act)
    got = bert_tf_outputs(model, {k: ref[k] for k in _FEATURES})
    assert_matches(got, ref, ("sequence_output", "pooled_output", "mlm_log_probs", "nsp_logits"))


@pytest.mark.parametrize("act, change", [("gelu", {"hidden_act": "gelu"}),
                                         ("gelu_new", {"layer_norm_eps": 1e-12})])
def test_the_parity_check_sees_activation_and_epsilon(act, change):
    """The wrong GELU, or the default epsilon, moves the outputs far past the tolerance."""
    _, config, _ = load_huggingface(fixture(act))
    model = BertPretrainer(BertEncoder(config.replace(**change)))
    warm_start(fixture(act), model)
    ref = reference(act)
    got = bert_tf_outputs(model, {k: ref[k] for k in _FEATURES})
    assert np.abs(got["sequence_output"] - ref["sequence_output"]).max() > 1e-4


def test_round_trip_is_exact(tmp_path):
    source = fixture("gelu_new")
    model, config, vocab_file = load_huggingface(source)
    out = tmp_path / "out"
    save_huggingface(model, str(out), vocab_file=vocab_file, do_lower_case=True)
    before = load_file(os.path.join(source, "model.safetensors"))
    after = load_file(str(out / "model.safetensors"))
    assert sorted(after) == sorted(before)
    for key, value in before.items():
        assert after[key].dtype == value.dtype and np.array_equal(after[key], value), key
    original = json.loads(open(os.path.join(source, "config.json")).read())
    written = json.loads((out / "config.json").read_text())
    for key in ("architectures", "hidden_act", "hidden_size", "intermediate_size",
                "layer_norm_eps", "max_position_embeddings", "model_type",
                "num_attention_heads", "num_hidden_layers", "type_vocab_size", "vocab_size",
                "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
        assert written[key] == original[key], key
    assert (out / "vocab.txt").read_bytes() == open(vocab_file, "rb").read()
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is True


def test_classifier_heads_write_their_problem_type(tmp_path):
    """transformers picks the loss of BertForSequenceClassification by config.problem_type: a
    multi-label head gets multi_label_classification (sigmoid per label), regression its own,
    a softmax head none (transformers infers single-label from integer labels); given label
    names, id2label / label2id hold them."""
    from bert_tf.modeling import BertClassifier

    model, _, _ = load_huggingface(fixture("gelu_new"))
    encoder = model.encoder
    for name, head, problem in (
            ("multi", BertClassifier(encoder, 3, multi_label=True), "multi_label_classification"),
            ("regression", BertClassifier(encoder, 1), "regression"),
            ("single", BertClassifier(encoder, 3), None)):
        save_huggingface(head, str(tmp_path / name))
        written = json.loads((tmp_path / name / "config.json").read_text())
        assert written.get("problem_type") == problem, name
        assert written["architectures"] == ["BertForSequenceClassification"]
    save_huggingface(BertClassifier(encoder, 2), str(tmp_path / "named"), labels=["no", "yes"])
    written = json.loads((tmp_path / "named" / "config.json").read_text())
    assert written["id2label"] == {"0": "no", "1": "yes"}
    assert written["label2id"] == {"no": 0, "yes": 1}
    with pytest.raises(ValueError, match=r"labels \['a'\]: expected 2 distinct names, one "
                                         "per class of the BertClassifier"):
        save_huggingface(BertClassifier(encoder, 2), str(tmp_path / "bad"), labels=["a"])
    with pytest.raises(ValueError, match="for a BertEncoder, which has no classes"):
        save_huggingface(encoder, str(tmp_path / "bad"), labels=["a"])


def _rewrite(directory, rename=None, drop=(), add=None):
    path = str(directory / "model.safetensors")
    tensors = load_file(path)
    tensors = {(rename(k) if rename else k): v for k, v in tensors.items() if k not in drop}
    tensors.update(add or {})
    save_file(tensors, path, metadata={"format": "pt"})


def test_bert_model_without_prefix_and_with_gamma_beta_names(tmp_path):
    """A saved BertModel: no `bert.` prefix, no heads; old-style LayerNorm gamma/beta names."""
    directory = copy_fixture(tmp_path)
    encoder_only = [k for k in load_file(str(directory / "model.safetensors"))
                    if k.startswith("cls.")]
    _rewrite(directory, drop=encoder_only,
             rename=lambda k: k[len("bert."):].replace("LayerNorm.weight", "LayerNorm.gamma")
             .replace("LayerNorm.bias", "LayerNorm.beta"))
    model, _, _ = load_huggingface(str(directory))
    assert type(model) is BertEncoder
    ref = reference("gelu")
    assert_matches(bert_tf_outputs(model, ref), ref, ("sequence_output", "pooled_output"))


def test_masked_lm_without_pooler_with_tied_decoder_copies(tmp_path):
    """BertForMaskedLM: no pooler, no NSP; tied decoder tensors stored too (older files)."""
    directory = copy_fixture(tmp_path)
    tensors = load_file(str(directory / "model.safetensors"))
    drop = [k for k in tensors if k.startswith(("bert.pooler.", "cls.seq_relationship."))]
    _rewrite(directory, drop=drop, add={
        "cls.predictions.decoder.weight": tensors["bert.embeddings.word_embeddings.weight"],
        "cls.predictions.decoder.bias": tensors["cls.predictions.bias"]})
    model, _, _ = load_huggingface(str(directory))
    assert isinstance(model, BertPretrainer) and model.next_sentence is None
    ref = reference("gelu")
    assert_matches(bert_tf_outputs(model, ref), ref, ("sequence_output", "mlm_log_probs"))


def test_untied_decoder_is_refused(tmp_path):
    directory = copy_fixture(tmp_path)
    tensors = load_file(str(directory / "model.safetensors"))
    _rewrite(directory, add={"cls.predictions.decoder.weight":
                             tensors["bert.embeddings.word_embeddings.weight"] + 1.0})
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory))
    assert str(error.value) == (f"{directory}: cls.predictions.decoder.weight differs from the "
                                "word embeddings; bert_tf ties the MLM decoder to them, as BERT "
                                "does")


def _write_bfloat16_safetensors(path, tensors):
    """A safetensors file of BF16 tensors, written by hand (numpy has no bfloat16 of its own)."""
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        data = value.astype(ml_dtypes.bfloat16).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little") + encoded + b"".join(blobs))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_files_load_as_float32(tmp_path, dtype):
    directory = copy_fixture(tmp_path)
    path = str(directory / "model.safetensors")
    tensors = load_file(path)
    if dtype == "float16":
        save_file({k: v.astype(np.float16) for k, v in tensors.items()}, path)
    else:
        _write_bfloat16_safetensors(path, tensors)
    model, _, _ = load_huggingface(str(directory))
    loaded = model.encoder.word_embeddings.embeddings.numpy()
    expected = tensors["bert.embeddings.word_embeddings.weight"].astype(
        np.float16 if dtype == "float16" else ml_dtypes.bfloat16).astype(np.float32)
    assert loaded.dtype == np.float32 and np.array_equal(loaded, expected)


def _edit_config(directory, **changes):
    path = directory / "config.json"
    values = json.loads(path.read_text())
    values.update(changes)
    path.write_text(json.dumps(values))


def test_unknown_activation(tmp_path):
    directory = copy_fixture(tmp_path)
    _edit_config(directory, hidden_act="quick_gelu")
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory))
    assert str(error.value) == (
        f"{directory / 'config.json'}: hidden_act='quick_gelu' has no bert_tf equivalent; "
        "expected one of gelu (exact erf), gelu_new or gelu_pytorch_tanh (tanh approximation), "
        "relu, tanh, silu, swish")


def test_other_model_type(tmp_path):
    directory = copy_fixture(tmp_path)
    _edit_config(directory, model_type="roberta")
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory))
    assert str(error.value) == (f"{directory / 'config.json'}: model_type='roberta' is not a "
                                "model type bert_tf reads from Hugging Face; expected 'bert', "
                                "'electra' or 'modernbert'")


def test_missing_tensor_named_in_hugging_face_terms(tmp_path):
    directory = copy_fixture(tmp_path)
    _rewrite(directory, drop=("bert.encoder.layer.1.output.dense.weight",))
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory))
    assert str(error.value) == (f"{directory}: variable bert.encoder.layer.1.output.dense.weight "
                                "not found (the model needs it with shape [32, 64])")


def test_shape_mismatch_with_config(tmp_path):
    directory = copy_fixture(tmp_path)
    _edit_config(directory, intermediate_size=48)
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory))
    assert str(error.value) == (
        f"{directory}: variable bert.encoder.layer.0.intermediate.dense.weight has shape "
        "[64, 32] in the checkpoint but [48, 32] in the model built from the config")


def _pickle_only(tmp_path):
    directory = copy_fixture(tmp_path)
    os.remove(directory / "model.safetensors")
    (directory / "pytorch_model.bin").write_bytes(b"not read: a pickle is never opened")
    return directory


def test_pytorch_pickle_refused_by_default(tmp_path):
    directory = _pickle_only(tmp_path)
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory))
    assert str(error.value) == (
        f"{directory / 'pytorch_model.bin'}: a PyTorch pickle; loading a pickle can run "
        "arbitrary code, so bert_tf reads model.safetensors only. Re-save the model with "
        "safetensors, or opt in with allow_pickle=True (--allow_pickle) and torch installed to "
        "read it with torch.load(weights_only=True)")


def test_pytorch_pickle_opt_in_needs_torch(tmp_path, monkeypatch):
    directory = _pickle_only(tmp_path)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory), allow_pickle=True)
    assert str(error.value) == (
        f"{directory / 'pytorch_model.bin'}: allow_pickle=True needs PyTorch to read the file "
        "(pip install torch), or convert it to model.safetensors")


def test_missing_shape_fields_are_named_not_filled_in(tmp_path):
    """POOR: a config.json without hidden_size / num_hidden_layers built BERT-base's shape."""
    directory = copy_fixture(tmp_path)
    path = directory / "config.json"
    values = json.loads(path.read_text())
    del values["hidden_size"], values["num_hidden_layers"]
    path.write_text(json.dumps(values))
    with pytest.raises(InteropError) as error:
        load_huggingface(str(directory))
    assert str(error.value) == (
        f"{path}: required field(s) hidden_size, num_hidden_layers missing (a Hugging Face "
        "config.json saved by transformers gives every field; bert_tf fills in no model shape)")


def test_a_transformers_task_model_loads_as_a_task_and_exports_with_its_head(tmp_path):
    """A fine-tuned transformers directory (ForSequenceClassification single-label,
    multi-label and regression, ForTokenClassification, ForQuestionAnswering) reads with its
    head and id2label (interop.load_huggingface_task: the original model's logits), answers
    texts through bert_tf.load_task with its tokenizer_config.json's casing and
    model_max_length, exports to a SavedModel with its label names, and predicts in
    bert-tf-classify without --labels (a multi-label one refused without --multi_label); a
    model that names no labels gets transformers' LABEL_i, and a malformed id2label is refused
    naming config.json."""
    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of serve_text)

    import bert_tf
    import serving_cases as cases
    from bert_tf.interop import load_huggingface_task
    from bert_tf.jobs.export import ExportConfig, export
    from bert_tf.modeling import BertClassifier, BertSpanLabeler, BertTokenClassifier

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{token}\n" for token in cases.VOCAB))
    tok = cases.python_tokenizer()
    texts = ["the cat sat .", "Paris is big", ""]
    features = cases.pack_batch(tok, [tok.encode(t) for t in texts])
    keras.utils.set_random_seed(4)
    encoder = BertEncoder(cases.tiny_config())
    models = {
        "sentiment": (BertClassifier(encoder, 2), ["bad", "good"], "classification"),
        "topics": (BertClassifier(encoder, 3, multi_label=True), cases.CLASS_LABELS,
                   "multi_label"),
        "score": (BertClassifier(encoder, 1), None, "regression"),
        "ner": (BertTokenClassifier(encoder, len(cases.TAGS)), cases.TAGS, "tagging"),
        "qa": (BertSpanLabeler(encoder), None, "squad")}
    for name, (model, labels, task) in models.items():
        directory = tmp_path / name
        save_huggingface(model, str(directory), vocab_file=str(vocab), do_lower_case=True,
                         labels=labels)
        loaded, loaded_task, loaded_labels, vocab_file = load_huggingface_task(str(directory))
        assert type(loaded) is type(model) and vocab_file == str(directory / "vocab.txt")
        assert (loaded_task, loaded_labels) == (task, labels), name
        assert getattr(loaded, "multi_label", False) == (task == "multi_label")
        expected, got = model(features), loaded(features)
        for key in (expected if isinstance(expected, dict) else [None]):
            np.testing.assert_allclose(got[key] if key else got, expected[key] if key
                                       else expected, atol=1e-5, err_msg=f"{name} {key}")
        assert bert_tf.load_task(str(directory)).task_name == task, name

    # The length transformers truncates at, and the casing, from tokenizer_config.json.
    sentiment = tmp_path / "sentiment"
    config = json.loads((sentiment / "tokenizer_config.json").read_text())
    (sentiment / "tokenizer_config.json").write_text(json.dumps(dict(config,
                                                                     model_max_length=16)))
    classifier = bert_tf.load_task(str(sentiment))
    assert (classifier.labels, classifier.max_seq_length, classifier.do_lower_case) == (
        ("bad", "good"), 16, True)
    answers = classifier.predict(texts)
    logits = models["sentiment"][0](cases.pack_batch(tok, [tok.encode(t) for t in texts],
                                                     seq_length=16)).numpy()
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose([[a["scores"][n] for n in ("bad", "good")] for a in answers],
                               probabilities, atol=1e-5)
    exported = export(ExportConfig(model_dir=str(sentiment),
                                   export_dir=str(tmp_path / "export" / "1"),
                                   signatures=["text"], text_pair=False))
    served = tf.saved_model.load(exported).signatures["serve_text"](text=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    assert [n.decode() for n in served["label_names"].numpy()[0]] == ["bad", "good"]
    info = json.loads((tmp_path / "export" / "1" / "assets.extra" /
                       "bert_tf_export.json").read_text())
    assert (info["task"], info["max_seq_length"]) == ("classification", 16)

    # A cased model stays cased (tokenizer_config.json's do_lower_case false).
    save_huggingface(models["sentiment"][0], str(tmp_path / "cased"), vocab_file=str(vocab),
                     do_lower_case=False, labels=["bad", "good"])
    assert bert_tf.load_task(str(tmp_path / "cased")).do_lower_case is False
    # A tagger to LiteRT without --signatures: the id signature alone (its text answers,
    # words with offsets, need string ops LiteRT lacks).
    export(ExportConfig(model_dir=str(tmp_path / "ner"), export_dir=str(tmp_path / "lite"),
                        format="litert"))
    written = json.loads((tmp_path / "lite" / "bert_tf_litert.json").read_text())
    assert (written["task"], list(written["signatures"])) == ("tagging", ["serving_default"])

    # bert-tf-classify predicts with it: the head, the id2label labels (no --labels) and the
    # length of its tokenizer_config.json.
    from absl import flags

    from bert_tf.cli import classify as classify_cli
    from bert_tf.cli import flags as cli_flags
    from bert_tf.jobs.classification import run_classifier
    from bert_tf.jobs.finetuning_config import ClassificationConfig

    (tmp_path / "texts.txt").write_text("".join(f"{t}\n" for t in texts[:2]))
    flag_values = classify_cli.define_flags(flags.FlagValues())
    flag_values(["prog", f"--init_checkpoint={sentiment}", "--do_predict",
                 f"--test_file={tmp_path / 'texts.txt'}", f"--output_dir={tmp_path / 'pred'}"])
    job = cli_flags.to_config(ClassificationConfig, flag_values)
    run_classifier(job)
    assert job.task.max_seq_length == 16  # its model_max_length, as load_task's
    predicted = np.loadtxt(tmp_path / "pred" / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(predicted, probabilities[:2], atol=1e-5)
    rows = (tmp_path / "pred" / "predictions.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[2] for r in rows] == [
        ["bad", "good"][i] for i in probabilities[:2].argmax(-1)]

    # A multi-label model (problem_type) predicted without --multi_label: refused.
    from bert_tf.jobs.flag_checks import FlagValueError

    topics = tmp_path / "topics"
    flag_values = classify_cli.define_flags(flags.FlagValues())
    flag_values(["prog", f"--init_checkpoint={topics}", "--do_predict",
                 f"--test_file={tmp_path / 'texts.txt'}", f"--output_dir={tmp_path / 'pred2'}",
                 "--max_seq_length=16"])
    with pytest.raises(FlagValueError) as error:
        run_classifier(cli_flags.to_config(ClassificationConfig, flag_values))
    assert str(error.value) == (f"--multi_label=false, but {topics / 'config.json'} says task "
                                "multi_label: give --multi_label to evaluate or predict with "
                                "the model it trained")

    # Without id2label: transformers' names; a malformed one is refused.
    values = json.loads((sentiment / "config.json").read_text())
    del values["id2label"], values["label2id"]
    (sentiment / "config.json").write_text(json.dumps(values))
    assert load_huggingface_task(str(sentiment))[2] == ["LABEL_0", "LABEL_1"]
    (sentiment / "config.json").write_text(json.dumps(dict(values, id2label={"0": "a",
                                                                             "2": "b"})))
    with pytest.raises(InteropError) as error:
        load_huggingface_task(str(sentiment))
    assert str(error.value) == (f"{sentiment / 'config.json'}: id2label must map the ids "
                                "0..C-1 to label names, got {'0': 'a', '2': 'b'}")
