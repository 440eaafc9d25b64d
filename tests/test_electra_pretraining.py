"""bert-tf-pretrain --objective=electra: replaced-token detection trains on TensorFlow and JAX,
resumes exactly after kill -9 (the sampler's state is checkpointed with dropout's), writes the
discriminator as the run's encoder (it fine-tunes, exports and converts to Hugging Face's
ElectraForPreTraining), and refuses what it cannot train before any work."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from no_tensorflow import jax_env
import tensorflow as tf

from bert_tf import interop, run_directory
from bert_tf.config import ModernBertConfig
from bert_tf.interop import weights
from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint
from bert_tf.jobs.pretraining import FlagValueError, pretrain
from bert_tf.jobs.pretraining_config import PretrainingConfig
from bert_tf.jobs.sections import from_flat
from bert_tf.modeling import BertClassifier, BertEncoder, ElectraPretrainer
from command_batch import run_commands
from test_run_pretraining import FLAGS, P, S, VOCAB, write_dropout_inputs

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("electra_pretraining")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, SAVE = 30, 15


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Records whose every token is 10 + position % 5 (the generator's guesses and the
    discriminator's are both learnable), vocabulary and a 1-layer config with dropout 0.1."""
    directory = tmp_path_factory.mktemp("electra_inputs")
    write_dropout_inputs(directory, patterned=True)
    return directory


def _args(inputs, output_dir, *extra):
    return [f"--bert_config_file={inputs / 'bert_config.json'}",
            f"--input_file={inputs / 'train-0.tfrecord'}", f"--vocab_file={inputs / 'vocab.txt'}",
            f"--output_dir={output_dir}", "--do_train", f"--max_seq_length={S}",
            f"--max_predictions_per_seq={P}", "--train_batch_size=16",
            f"--num_train_steps={STEPS}", "--num_warmup_steps=3",
            f"--save_checkpoints_steps={SAVE}", "--steps_per_loop=5", "--log_steps=15",
            "--learning_rate=2e-3", "--seed=3", "--objective=electra",
            "--nouse_next_sentence_label", "--dtype=float32", "--nodo_lower_case", *extra]


def _job(inputs, output_dir, **overrides):
    """The PretrainingConfig of _args' command line."""
    values = {name: FLAGS[name].default for name in FLAGS}
    values.update(bert_config_file=str(inputs / "bert_config.json"),
                  input_file=str(inputs / "train-0.tfrecord"), vocab_file=str(inputs / "vocab.txt"),
                  output_dir=str(output_dir), do_train=True, max_seq_length=S,
                  max_predictions_per_seq=P, train_batch_size=16, num_train_steps=STEPS,
                  num_warmup_steps=3, save_checkpoints_steps=SAVE, steps_per_loop=5,
                  log_steps=15, learning_rate=2e-3, seed=3, objective="electra",
                  use_next_sentence_label=False, dtype="float32", do_lower_case=False)
    values.update(overrides)
    return from_flat(PretrainingConfig, **values)


def _check_learned(train):
    """The last logging window against the first: the generator learns the masked tokens, and
    the discriminator finds most of the replacements it makes (where answering "original"
    everywhere would find none)."""
    first = train["first_log"]
    assert train["generator_loss"] < 0.75 * first["generator_loss"], train
    assert train["discriminator_recall"] > 0.5 and train["discriminator_precision"] > 0.5, train
    assert train["discriminator_accuracy"] > 1 - train["replaced_fraction"] + 0.02, train
    assert train["loss"] < first["loss"] / 2, train


def _read_checkpoint(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and not name.startswith(
                ("save_counter", "run_state/seconds_spent"))}


@pytest.fixture(scope="module")
def tensorflow_runs(inputs, tmp_path_factory):
    """An uninterrupted run here, alongside the same command in a process killed with -9 once
    its step-15 checkpoint is written; then that run resumed here."""
    root = tmp_path_factory.mktemp("electra_runs")
    killed = root / "killed"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(root / "killed.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bert_tf.run_pretraining",
                                 *_args(inputs, killed)], env=env, stdout=subprocess.DEVNULL,
                                stderr=log)
        try:
            straight = pretrain(_job(inputs, root / "straight"))
            deadline = time.time() + 600
            # The state file names a checkpoint once it is whole: the .index appears while
            # TensorFlow still writes it, and a kill then left a file too short to read (the
            # run had no earlier checkpoint to fall back on).
            while not _names_checkpoint(killed, SAVE):
                assert proc.poll() is None, (root / "killed.log").read_text()[-3000:]
                assert time.time() < deadline, (root / "killed.log").read_text()[-3000:]
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            proc.kill()
            proc.wait()
    if (killed / f"ckpt-{STEPS}.index").exists():
        # The kill came after the end: resume from step 15 anyway.
        for name in os.listdir(killed):
            if name.startswith(f"ckpt-{STEPS}."):
                os.remove(killed / name)
        tf.compat.v1.train.update_checkpoint_state(str(killed), str(killed / f"ckpt-{SAVE}"))
    resumed = pretrain(_job(inputs, killed))
    return root, straight, resumed


def _names_checkpoint(directory, step):
    """True once `directory`'s checkpoint state file names ckpt-<step> (or a later one)."""
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except (ValueError, tf.errors.OpError):  # being written
        return False
    if state is None:
        return False
    return any(path.rsplit("ckpt-", 1)[-1].isdigit() and int(path.rsplit("ckpt-", 1)[-1]) >= step
               for path in state.all_model_checkpoint_paths)


def test_replaced_token_detection_trains_and_writes_the_discriminator(tensorflow_runs):
    root, results, _ = tensorflow_runs
    run = root / "straight"
    train = results["train"]
    assert {"loss", "generator_loss", "generator_accuracy", "discriminator_loss",
            "discriminator_accuracy", "discriminator_precision", "discriminator_recall",
            "replaced_fraction", "examples_per_second"} <= set(train)
    _check_learned(train)
    assert isinstance(keras.saving.load_model(str(run / "pretrainer.keras")), ElectraPretrainer)
    assert type(keras.saving.load_model(str(run / "encoder.keras"))) is BertEncoder
    settings = json.loads((run / run_directory.RECORD_FILE).read_text())["settings"]
    assert (settings["objective"], settings["generator_hidden_size"],
            settings["discriminator_weight"]) == ("electra", 8, 50.0)
    # The loop's progress lines carry the ELECTRA metrics.
    assert "generator_accuracy=" in (root / "killed.log").read_text()


def test_killed_run_resumes_to_the_uninterrupted_weights(tensorflow_runs):
    """Dropout on and the generator's samples: the step-30 checkpoint of the killed and
    resumed run equals the uninterrupted one's (model, optimizer, every random generator's
    state, the sampler's included)."""
    root, _, resumed = tensorflow_runs
    assert resumed["global_step"] == STEPS and resumed["train"]["steps_this_run"] == SAVE
    want = _read_checkpoint(str(root / "straight" / f"ckpt-{STEPS}"))
    got = _read_checkpoint(str(root / "killed" / f"ckpt-{STEPS}"))
    assert set(got) == set(want)
    # The sampler (the model's own generator: the first) drew between the two checkpoints.
    sampler = "rng/generator_0/.ATTRIBUTES/VARIABLE_VALUE"
    earlier = _read_checkpoint(str(root / "straight" / f"ckpt-{SAVE}"))[sampler]
    assert not np.array_equal(earlier, want[sampler])
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, err_msg=name)


def test_the_run_fine_tunes_exports_and_converts(tensorflow_runs, tmp_path):
    root, _, _ = tensorflow_runs
    run = root / "straight"
    pretrainer = keras.saving.load_model(str(run / "pretrainer.keras"))
    # --init_checkpoint=RUN: the discriminator is the encoder a fine-tuning run starts from.
    classifier = BertClassifier(BertEncoder(pretrainer.encoder.config), num_classes=2)
    report = interop.warm_start(str(run), classifier)
    assert sorted(report.newly_initialized) == ["classifier/bias", "classifier/kernel"]
    for mine, theirs in zip(classifier.encoder.weights, pretrainer.encoder.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(mine),
                                      keras.ops.convert_to_numpy(theirs))
    # Export: the run's model directory serves the discriminator's encoder.
    from bert_tf.serving.model_dir import load_model_dir

    source = load_model_dir(str(run))
    assert type(source.model) is BertEncoder and source.max_seq_length == S
    # Hugging Face: ElectraForPreTraining with the run's discriminator logits.
    convert_checkpoint(ConvertCheckpointConfig(from_format="bert_tf", to_format="huggingface",
                                               checkpoint=str(run),
                                               output_dir=str(tmp_path / "hf")))
    values = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (values["model_type"], values["architectures"]) == ("electra",
                                                                ["ElectraForPreTraining"])
    source = interop.read_huggingface(str(tmp_path / "hf"))
    loaded = ElectraPretrainer(BertEncoder(source.config))
    weights.transfer(source, loaded, strict=False)
    features = {"input_word_ids": np.array([[2, 11, 12, 39, 14, 3]], "int32"),
                "input_mask": np.ones((1, 6), "int32"), "input_type_ids": np.zeros((1, 6),
                                                                                  "int32")}
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded.discriminate(features)),
                               keras.ops.convert_to_numpy(pretrainer.discriminate(features)),
                               atol=1e-5)


_REFUSALS = [
    (dict(), "--objective=electra trains replaced-token detection only: "
             "--use_next_sentence_label adds a sentence-pair head; pass "
             "--use_next_sentence_label=false"),
    (dict(sentence_order_prediction=True),
     "--objective=electra trains replaced-token detection only: --sentence_order_prediction "
     "adds a sentence-pair head; leave --sentence_order_prediction out"),
    (dict(use_next_sentence_label=False, span_boundary_objective=True),
     "--objective=electra trains replaced-token detection only: --span_boundary_objective "
     "adds a span-boundary head; leave --span_boundary_objective out"),
    (dict(use_next_sentence_label=False, do_span_mask=True),
     "--objective=electra trains replaced-token detection only: --do_span_mask adds span "
     "masking for the span-boundary objective; leave --do_span_mask out"),
    (dict(use_next_sentence_label=False, bag_of_words_weight=0.5),
     "--objective=electra trains replaced-token detection only: --bag_of_words_weight "
     "adds a [CLS] bag-of-words loss; leave --bag_of_words_weight out"),
    (dict(use_next_sentence_label=False, generator_hidden_size=64),
     "--generator_hidden_size=64 is larger than hidden_size=32 in {config}: ELECTRA's "
     "generator must be no larger than the discriminator (default hidden_size / 4)"),
    (dict(use_next_sentence_label=False, generator_hidden_size=0),
     "--generator_hidden_size=0 must be a positive integer"),
    (dict(use_next_sentence_label=False, discriminator_weight=float("nan")),
     "--discriminator_weight=nan must be > 0 and finite"),
    (dict(objective="mlm", generator_hidden_size=8),
     "--generator_hidden_size sets ELECTRA's replaced-token detection: it needs "
     "--objective=electra"),
    (dict(objective="mlm", discriminator_weight=10.0),
     "--discriminator_weight sets ELECTRA's replaced-token detection: it needs "
     "--objective=electra"),
]


@pytest.mark.parametrize("overrides, message", _REFUSALS)
def test_what_electra_cannot_train_is_refused_naming_both_flags(inputs, tmp_path, overrides,
                                                               message):
    job = _job(inputs, tmp_path / "out", **{"use_next_sentence_label": True, **overrides})
    with pytest.raises(FlagValueError) as error:
        pretrain(job)
    assert str(error.value) == message.format(config=inputs / "bert_config.json")
    assert not (tmp_path / "out").exists()


def test_a_modern_encoder_is_refused(inputs, tmp_path):
    config = tmp_path / "modern.json"
    ModernBertConfig.from_preset("modernbert_tiny", vocab_size=VOCAB,
                           max_position_embeddings=32).to_json_file(str(config))
    with pytest.raises(FlagValueError) as error:
        pretrain(_job(inputs, tmp_path / "out", bert_config_file=str(config)))
    assert str(error.value) == (f"--objective=electra trains BERT's encoder: {config} declares "
                                "architecture 'modernbert'")


def test_jax_trains_and_tensorflow_reads_its_run(inputs, tmp_path):
    """--backend=jax: the run's metrics, its checkpoints holding the sampler's state (drawn
    from at every step; the JAX step runner threads it with dropout's, whose resume
    tests/backends/test_run_controller.py checks), and its files loaded and converted here, on
    TensorFlow."""
    from bert_tf.training.jax_checkpoints import load_arrays

    run = tmp_path / "jax"
    runs = run_commands([("bert_tf.run_pretraining", _args(inputs, run))],
                        env=jax_env())
    assert runs[0].returncode == 0, runs[0].stderr[-3000:]
    assert "discriminator_loss=" in runs[0].stderr
    _check_learned(json.loads((run / "results.json").read_text())["train"])
    last, earlier = (load_arrays(str(run / f"ckpt-{step}.orbax")) for step in (STEPS, SAVE))
    sampler = [key for key in last if key.endswith("/sampler/seed_generator_state")]
    assert len(sampler) == 1 and not np.array_equal(earlier[sampler[0]], last[sampler[0]])
    pretrainer = keras.saving.load_model(str(run / "pretrainer.keras"))
    assert isinstance(pretrainer, ElectraPretrainer)
    table = next(v for k, v in last.items() if k.endswith("word_embeddings/embeddings"))
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(pretrainer.encoder.word_embeddings.embeddings), table)
    written = convert_checkpoint(ConvertCheckpointConfig(
        from_format="bert_tf", to_format="huggingface", checkpoint=str(run),
        output_dir=str(tmp_path / "hf")))
    assert written == ["config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
