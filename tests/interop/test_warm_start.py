"""warm_start: every checkpoint format into task models; heads, reports and errors."""

import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.config import BertConfig, ModernBertConfig
from bert_tf.interop import (InteropError, check_weights_readable, checkpoint_config,
                             save_huggingface, save_tf1_checkpoint, warm_start)
from bert_tf.interop.weights import model_arrays
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                              BertTokenClassifier, build_encoder)
from embedding_helpers import saved_classifier
from interop_reference import TINY, original_arrays, write_tf1_checkpoint

HF_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hf_bert_gelu")
CLASSIFIER_HEAD = ["classifier/kernel", "classifier/bias"]
MLM_NSP_TF1 = ["cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
               "cls/predictions/transform/LayerNorm/gamma",
               "cls/predictions/transform/dense/bias",
               "cls/predictions/transform/dense/kernel", "cls/seq_relationship/output_bias",
               "cls/seq_relationship/output_weights"]


@pytest.fixture
def config():
    return BertConfig(**TINY)


@pytest.fixture(scope="module")
def pretrainer():
    """A BertPretrainer with random weights, the source of the bert_tf-format checkpoints."""
    keras.utils.set_random_seed(7)
    return BertPretrainer(BertEncoder(BertConfig(**TINY)))


def encoder_arrays(model):
    return {k: v for k, v in model_arrays(model).items() if k.startswith("bert/")}


def assert_same_encoder(model, expected):
    got = encoder_arrays(model)
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert np.array_equal(got[name], value), name


def test_from_tf1_checkpoint(tmp_path, config):
    arrays = original_arrays(seed=2, **TINY)
    prefix = write_tf1_checkpoint(tmp_path / "bert_model.ckpt", arrays)
    classifier = BertClassifier(BertEncoder(config), num_classes=3)
    report = warm_start(prefix, classifier)
    assert report.source_format == "tf1"
    assert_same_encoder(classifier, {k: v for k, v in arrays.items() if k.startswith("bert/")})
    assert report.newly_initialized == CLASSIFIER_HEAD
    assert len(report.loaded) == len(classifier.weights) - 2
    slots = [n for n in report.unused if n.endswith(("/adam_m", "/adam_v"))]
    assert len(slots) == 2 * len(arrays) and "global_step" in report.unused
    assert sorted(set(report.unused) - set(slots) - {"global_step"}) == MLM_NSP_TF1
    summary = report.summary()
    assert "39 variables loaded, 2 newly initialized" in summary
    assert "newly initialized: classifier/kernel, classifier/bias" in summary
    assert f"unused optimizer state: {len(slots) + 1} tensors" in summary


def test_from_hugging_face_directory(config):
    hf_config = checkpoint_config(HF_FIXTURE)
    assert hf_config.hidden_act == "gelu_exact"
    span = BertSpanLabeler(BertEncoder(hf_config))
    report = warm_start(HF_FIXTURE, span, do_lower_case=True)
    assert report.source_format == "huggingface"
    assert report.newly_initialized == ["span_logits/kernel", "span_logits/bias"]
    assert "cls.seq_relationship.weight" in report.unused
    reference = np.load(os.path.join(HF_FIXTURE, "reference.npz"))
    outputs = span.encoder({k: reference[k] for k in ("input_word_ids", "input_mask",
                                                     "input_type_ids")})
    np.testing.assert_allclose(np.asarray(outputs["sequence_output"]),
                               reference["sequence_output"], rtol=1e-5, atol=1e-5)


def test_from_bert_tf_training_checkpoint_directory(tmp_path, pretrainer):
    """As run_pretraining writes it: tf.train.Checkpoint(model=, optimizer=) + bert_config.json."""
    optimizer = keras.optimizers.AdamW(1e-3)
    optimizer.build(pretrainer.trainable_variables)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=pretrainer, optimizer=optimizer), str(tmp_path), 2)
    manager.save(checkpoint_number=5)
    pretrainer.encoder.config.to_json_file(str(tmp_path / "bert_config.json"))
    for target in (BertTokenClassifier(BertEncoder(BertConfig(**TINY)), 5),
                   BertPretrainer(BertEncoder(BertConfig(**TINY)))):
        report = warm_start(str(tmp_path), target)
        assert report.source == str(tmp_path / "ckpt-5")
        assert report.source_format == "bert_tf_checkpoint"
        assert_same_encoder(target, encoder_arrays(pretrainer))
        assert any(n.startswith("optimizer/") for n in report.unused)
    assert report.newly_initialized == []
    assert all(np.array_equal(a, b) for a, b in zip(model_arrays(target).values(),
                                                    model_arrays(pretrainer).values()))


@pytest.mark.parametrize("file_name", ["pretrainer.keras", "pretrainer.weights.h5"])
def test_from_keras_files(tmp_path, pretrainer, file_name):
    path = str(tmp_path / file_name)
    if file_name.endswith(".keras"):
        pretrainer.save(path)
    else:
        pretrainer.save_weights(path)
        pretrainer.encoder.config.to_json_file(str(tmp_path / "bert_config.json"))
    classifier = BertClassifier(BertEncoder(BertConfig(**TINY)), num_classes=2)
    report = warm_start(path, classifier)
    assert report.source_format == ("keras" if file_name.endswith(".keras") else "weights_h5")
    assert_same_encoder(classifier, encoder_arrays(pretrainer))
    assert report.newly_initialized == CLASSIFIER_HEAD
    assert sorted(report.unused) == sorted(
        v.path for v in pretrainer.weights if v.path.startswith(("masked_lm/", "next_sentence/")))


def test_matching_heads_load_and_others_stay_new(tmp_path, config):
    keras.utils.set_random_seed(3)
    trained = BertClassifier(BertEncoder(config), num_classes=3)
    head = model_arrays(trained)["output_weights"]
    hf_dir, tf1_prefix = str(tmp_path / "hf"), str(tmp_path / "tf1" / "bert_model.ckpt")
    save_huggingface(trained, hf_dir)
    save_tf1_checkpoint(trained, tf1_prefix)
    for source in (hf_dir, tf1_prefix):
        same = BertClassifier(BertEncoder(config), num_classes=3)
        assert warm_start(source, same).newly_initialized == []
        assert np.array_equal(model_arrays(same)["output_weights"], head)
        other_classes = BertClassifier(BertEncoder(config), num_classes=4)
        report = warm_start(source, other_classes)
        assert report.newly_initialized == CLASSIFIER_HEAD
        assert_same_encoder(other_classes, encoder_arrays(trained))
    # Hugging Face says its head is a sequence classifier: a tagger does not take it.
    tagger = BertTokenClassifier(BertEncoder(config), num_classes=3)
    report = warm_start(hf_dir, tagger)
    assert report.newly_initialized == CLASSIFIER_HEAD
    assert sorted(report.unused) == ["classifier.bias", "classifier.weight"]


def test_task_model_training_checkpoint(tmp_path, config):
    keras.utils.set_random_seed(4)
    trained = BertClassifier(BertEncoder(config), num_classes=3)
    tf.train.Checkpoint(model=trained).write(str(tmp_path / "ckpt-1"))
    same = BertClassifier(BertEncoder(config), num_classes=3)
    assert warm_start(str(tmp_path / "ckpt-1"), same).newly_initialized == []
    assert all(np.array_equal(a, b) for a, b in zip(model_arrays(same).values(),
                                                    model_arrays(trained).values()))
    pretrainer = BertPretrainer(BertEncoder(config))
    report = warm_start(str(tmp_path / "ckpt-1"), pretrainer)
    assert_same_encoder(pretrainer, encoder_arrays(trained))
    assert len(report.newly_initialized) == 7 and len(report.unused) == 2


def test_task_model_checkpoint_written_with_its_optimizer(tmp_path, config):
    # The fine-tuning loop's checkpoints hold model + optimizer; the optimizer tracks the
    # trainable variables, so the checkpoint keys them as optimizer/_trainable_variables/N.
    keras.utils.set_random_seed(5)
    trained = BertClassifier(BertEncoder(config), num_classes=3)
    optimizer = keras.optimizers.Adam()
    optimizer.build(trained.trainable_variables)
    tf.train.Checkpoint(model=trained, optimizer=optimizer).write(str(tmp_path / "ckpt-7"))
    same = BertClassifier(BertEncoder(config), num_classes=3)
    report = warm_start(str(tmp_path / "ckpt-7"), same)
    assert report.newly_initialized == []
    assert all(np.array_equal(a, b) for a, b in zip(model_arrays(same).values(),
                                                    model_arrays(trained).values()))
    assert report.unused and all(n.startswith("optimizer/") for n in report.unused)
    assert not [n for n in report.unused if n.startswith("optimizer/_trainable_variables/")]


def test_casing_mismatch_hugging_face(config):
    with pytest.raises(InteropError) as error:
        warm_start(HF_FIXTURE, BertClassifier(BertEncoder(checkpoint_config(HF_FIXTURE)), 2),
                   do_lower_case=False)
    assert str(error.value) == (
        f"--do_lower_case=False contradicts --init_checkpoint={HF_FIXTURE}: its "
        "tokenizer_config.json do_lower_case is True, so pass --do_lower_case=True to tokenize "
        "as the model was trained (or leave it unset to use it)")


def test_casing_mismatch_original_checkpoint_name(tmp_path, config):
    path = str(tmp_path / "cased_L-12_H-768_A-12" / "bert_model.ckpt")
    with pytest.raises(InteropError) as error:
        warm_start(path, BertEncoder(config), do_lower_case=True)
    assert str(error.value) == (
        f"--do_lower_case=True contradicts --init_checkpoint={path}: 'cased_L-12_H-768_A-12' is "
        "a cased model, so pass --do_lower_case=False to tokenize as it was pre-trained.")


def test_config_mismatch_is_named(tmp_path):
    hf_config = checkpoint_config(HF_FIXTURE)
    with pytest.raises(InteropError) as error:
        warm_start(HF_FIXTURE, BertEncoder(hf_config.replace(num_attention_heads=2)))
    assert str(error.value) == (f"{HF_FIXTURE}: the checkpoint's config does not match the "
                                "model's: num_attention_heads=4 in the checkpoint but 2 in the "
                                "model")


def test_missing_checkpoint(tmp_path, config):
    with pytest.raises(InteropError) as error:
        warm_start(str(tmp_path / "nothing" / "model.ckpt"), BertEncoder(config))
    assert str(error.value).startswith(f"--init_checkpoint={tmp_path / 'nothing' / 'model.ckpt'}"
                                       f": no checkpoint at")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InteropError, match="the directory holds no checkpoint"):
        warm_start(str(empty), BertEncoder(config))


def test_hugging_face_weights_file_path_is_its_directory(tmp_path):
    directory = tmp_path / "hf"
    shutil.copytree(HF_FIXTURE, directory)
    report = warm_start(str(directory / "model.safetensors"),
                        BertEncoder(checkpoint_config(str(directory))))
    assert report.source == str(directory) and report.newly_initialized == []


def test_a_tagging_head_is_not_loaded_as_a_classifier_head(tmp_path, config):
    """POOR: a tagging run's head (hidden -> 3 tags) has a 3-class classifier head's shapes and
    was loaded silently; the task recorded in task_info.json decides."""
    keras.utils.set_random_seed(6)
    tagger = BertTokenClassifier(BertEncoder(config), num_classes=3)
    tf.train.Checkpoint(model=tagger).write(str(tmp_path / "ckpt-1"))
    (tmp_path / "task_info.json").write_text('{"task": "tagging", "do_lower_case": true, '
                                             '"max_seq_length": 16}')
    classifier = BertClassifier(BertEncoder(config), num_classes=3)
    report = warm_start(str(tmp_path / "ckpt-1"), classifier)
    assert sorted(report.newly_initialized) == sorted(CLASSIFIER_HEAD)
    assert_same_encoder(classifier, encoder_arrays(tagger))
    # The same task still loads its head.
    same = BertTokenClassifier(BertEncoder(config), num_classes=3)
    assert warm_start(str(tmp_path / "ckpt-1"), same).newly_initialized == []


def test_a_checkpoint_of_the_other_architecture_is_refused_naming_both(tmp_path, pretrainer):
    pretrainer.save(str(tmp_path / "bert.keras"))
    modern = ModernBertConfig.from_preset("modernbert_tiny", vocab_size=TINY["vocab_size"])
    with pytest.raises(InteropError) as error:
        warm_start(str(tmp_path / "bert.keras"), build_encoder(modern))
    assert str(error.value).endswith(
        "the checkpoint holds architecture 'bert', the model is 'modernbert'")
    # And the other way: a modern encoder's checkpoint directory into a BERT classifier.
    modern_model = BertPretrainer(build_encoder(modern), use_next_sentence_label=False)
    tf.train.Checkpoint(model=modern_model).write(str(tmp_path / "modern" / "ckpt-1"))
    modern.to_json_file(str(tmp_path / "modern" / "bert_config.json"))
    with pytest.raises(InteropError) as error:
        warm_start(str(tmp_path / "modern"), BertClassifier(BertEncoder(BertConfig(**TINY)),
                                                            num_classes=2))
    assert str(error.value).endswith(
        "the checkpoint holds architecture 'modernbert', the model is 'bert'")


def test_a_saved_task_warm_starts_as_its_model(tmp_path):
    """POOR: a task's save was refused as --init_checkpoint ("the directory holds no
    checkpoint: expected ... pretrainer.keras or encoder.keras"), though load_model and
    TextClassifier.from_pretrained read it; the commands check, configure and warm-start with
    these three calls."""
    saved, trained = saved_classifier(tmp_path / "saved")
    check_weights_readable(saved)
    assert checkpoint_config(saved) == trained.encoder.config
    same = BertClassifier(BertEncoder(checkpoint_config(saved)), num_classes=2)
    report = warm_start(saved, same, do_lower_case=True)
    assert report.source == os.path.join(saved, "model.keras") and report.source_format == "keras"
    assert report.newly_initialized == []
    assert all(np.array_equal(a, b) for a, b in zip(model_arrays(same).values(),
                                                    model_arrays(trained).values()))
    # Another head: the encoder loads, the head starts new.
    other = BertClassifier(BertEncoder(checkpoint_config(saved)), num_classes=3)
    assert warm_start(saved, other).newly_initialized == CLASSIFIER_HEAD
    assert_same_encoder(other, encoder_arrays(trained))


def test_python_callers_get_errors_naming_the_path_not_the_flag(tmp_path, config):
    """POOR: errors raised to Python callers (bert_tf.load_model, the tasks' from_pretrained)
    named the commands' --init_checkpoint flag; `flag` says what a message names."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InteropError) as error:
        warm_start(str(empty), BertEncoder(config), flag=None)
    assert str(error.value).startswith(f"{empty}: the directory holds no checkpoint: expected ")
    with pytest.raises(InteropError) as error:
        check_weights_readable(str(empty))  # as the commands call it
    assert str(error.value).startswith(f"--init_checkpoint={empty}: the directory holds no ")
    # bert_tf.load_model names the path alone.
    prefix = tf.train.Checkpoint(other=tf.Variable(1.0)).write(str(tmp_path / "other" / "ckpt-1"))
    config.to_json_file(str(tmp_path / "other" / "bert_config.json"))
    with pytest.raises(InteropError) as error:
        bert_tf.load_model(prefix)
    assert str(error.value) == (f"{prefix}: a TF2 checkpoint without a bert_tf model under "
                                "`model` (expected tf.train.Checkpoint(model=...))")
