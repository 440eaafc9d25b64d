"""End to end: python -m bert_tf.run_pretraining on tiny TFRecords written here."""

import copy
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from absl import flags

from bert_tf.cli import outputs
from bert_tf.cli import pretrain as pretrain_cli
from bert_tf.jobs import pretraining
from bert_tf.jobs.pretraining import FlagValueError, pretrain
from bert_tf.jobs.pretraining_config import PretrainingConfig, PretrainingTask
from bert_tf.jobs.sections import from_flat
from bert_tf.config import BertConfig
from bert_tf.run_directory import RunDirectoryError
from command_batch import run_commands
from file_digests import digest

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("run_pretraining")

FIXTURE_RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "runs_v0_1")

S, P, VOCAB = 16, 4, 40
# The pre-training command's flags, in a FlagValues of their own.
FLAGS = pretrain_cli.define_flags(flags.FlagValues())


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _write_records(path, num_examples, seq_length=S, seed=0, num_predictions=P,
                   patterned=False):
    """Original-format (v1 names) records, learnable: masked id = 10 + position % 5; with
    `patterned` every token is (so a replaced token can be told too), else the others are
    random."""
    P = num_predictions  # noqa: N806
    rng = np.random.RandomState(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(num_examples):
            length = rng.randint(max(8, P + 2), seq_length + 1)
            middle = ([10 + p % 5 for p in range(1, length - 1)] if patterned
                      else list(rng.randint(5, VOCAB, size=length - 2)))
            ids = [2] + middle + [3]
            positions = sorted(rng.choice(np.arange(1, length - 1), size=P, replace=False))
            labels = [10 + p % 5 for p in positions]
            for p in positions:
                ids[p] = 4  # [MASK]
            pad = seq_length - length
            features = {
                "input_ids": _int_feature(ids + [0] * pad),
                "input_mask": _int_feature([1] * length + [0] * pad),
                "segment_ids": _int_feature([0] * (length // 2) + [1] * (length - length // 2)
                                            + [0] * pad),
                "masked_lm_positions": _int_feature(positions),
                "masked_lm_ids": _int_feature(labels),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.0] * P)),
                "next_sentence_labels": _int_feature([i % 2]),
            }
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=features)).SerializeToString())


def write_dropout_inputs(directory, patterned=False):
    """What the runs that check exact resume read: a 1-layer config with BERT's dropout 0.1
    (bert_config.json), 64 records (train-0.tfrecord, `patterned` as _write_records') and the
    vocabulary (vocab.txt) in `directory`. Returns (config path, vocabulary path)."""
    config_path, vocab = directory / "bert_config.json", directory / "vocab.txt"
    BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=32).to_json_file(str(config_path))
    _write_records(directory / "train-0.tfrecord", 64, seed=0, patterned=patterned)
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"w{i}" for i in range(VOCAB - 5)]) + "\n")
    return config_path, vocab


def _write_setup(tmp_path):
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config_path = tmp_path / "bert_config.json"
    config.to_json_file(str(config_path))
    _write_records(tmp_path / "train-0.tfrecord", 64, seed=0)
    _write_records(tmp_path / "train-1.tfrecord", 64, seed=1)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"w{i}" for i in range(VOCAB - 5)]) + "\n")
    return tmp_path, config_path, vocab


@pytest.fixture
def setup(tmp_path):
    return _write_setup(tmp_path)


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """This module's runs of python -m bert_tf.run_pretraining, one after the other in one
    process (one TensorFlow start-up; each run starts from the command's defaults): the
    setup (tmp_path, config_path, vocab) and {"train": result, "too_long": result}."""
    setup = tmp_path, config_path, vocab = _write_setup(tmp_path_factory.mktemp("cli"))
    train = _base_flags(tmp_path, config_path, tmp_path / "out") + [
        "--do_train", "--do_eval", "--num_train_steps=60", "--save_checkpoints_steps=30",
        "--max_eval_steps=4", f"--vocab_file={vocab}"]
    too_long = [f for f in _base_flags(tmp_path, config_path, tmp_path / "too_long")
                if not f.startswith("--max_seq_length")] + ["--do_train", "--max_seq_length=600"]
    runs = {"train": train, "too_long": too_long}
    for name, args in runs.items():
        (tmp_path / f"{name}.flags").write_text("\n".join(args) + "\n")
    results = run_commands([("bert_tf.run_pretraining", [f"--flagfile={tmp_path}/{name}.flags"])
                            for name in runs])
    return setup, dict(zip(runs, results))


def _base_flags(tmp_path, config_path, output_dir):
    return [f"--bert_config_file={config_path}",
            f"--input_file={tmp_path}/train-*.tfrecord",
            f"--output_dir={output_dir}",
            f"--max_seq_length={S}", f"--max_predictions_per_seq={P}",
            "--train_batch_size=16", "--eval_batch_size=16", "--learning_rate=5e-3",
            "--num_warmup_steps=5", "--seed=1", "--steps_per_loop=10"]


@pytest.mark.slow
def test_end_to_end_train_eval_resume(cli_runs):
    (tmp_path, config_path, vocab), runs = cli_runs
    out = tmp_path / "out"
    proc = runs["train"]
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["global_step"] == 60
    train = results["train"]
    assert set(train) >= {"loss", "mlm_loss", "nsp_loss", "masked_lm_accuracy",
                          "next_sentence_accuracy", "examples_per_second", "wall_time_seconds",
                          "steps_this_run"}
    # The masked id is a function of the position: learnable far above chance (1/40).
    assert train["masked_lm_accuracy"] > 0.3, train
    assert results["eval"]["eval_steps"] == 4
    assert results["eval"]["masked_lm_accuracy"] > 0.3
    for name in ("bert_config.json", "vocab.txt", "pretrainer.keras", "encoder.keras",
                 "ckpt-60.index", "ckpt-30.index", "checkpoint", "run_pretraining.flags"):
        assert (out / name).exists(), name
    assert "--num_train_steps=60" in (out / "run_pretraining.flags").read_text().splitlines()
    assert tf.io.gfile.glob(str(out / "summaries" / "eval" / "events.out.tfevents.*"))
    assert BertConfig.from_json_file(str(out / "bert_config.json")) == \
        BertConfig.from_json_file(str(config_path))
    assert "step 60/60" in proc.stderr and "examples/s=" in proc.stderr and "ETA" in proc.stderr

    # A rerun (in this process, same flags) with a larger --num_train_steps continues at 60.
    results = pretrain(_job(tmp_path, config_path, output_dir=str(out), num_train_steps=70,
                                num_warmup_steps=5, learning_rate=5e-3, steps_per_loop=10,
                                save_checkpoints_steps=30, eval_batch_size=16))
    assert results["global_step"] == 70 and results["train"]["steps_this_run"] == 10
    assert json.loads((out / "results.json").read_text())["global_step"] == 70
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-70")

    # Warm starts (weights only) from the saved .keras model and from the checkpoint directory.
    for name, init in (("from_keras", out / "pretrainer.keras"), ("from_ckpt", out)):
        warm = pretrain(_job(tmp_path, config_path, output_dir=str(tmp_path / name),
                                 init_checkpoint=str(init), do_train=False, do_eval=True,
                                 eval_batch_size=16, max_eval_steps=2))
        assert warm["global_step"] == 0
        assert warm["eval"]["masked_lm_accuracy"] > 0.3, (name, warm)


def test_max_seq_length_exceeding_position_embeddings(cli_runs):
    (tmp_path, config_path, _), runs = cli_runs
    proc = runs["too_long"]
    assert proc.returncode == 1
    assert (f"run_pretraining: error: --max_seq_length=600 exceeds max_position_embeddings=32 "
            f"in {config_path}") in proc.stderr


def _job(tmp_path, config_path, **overrides):
    """The PretrainingConfig of the command's flag defaults plus the test's base flags."""
    values = {name: FLAGS[name].default for name in FLAGS}
    values.update(bert_config_file=str(config_path), input_file=f"{tmp_path}/train-*.tfrecord",
                  output_dir=str(tmp_path / "out"), max_seq_length=S, max_predictions_per_seq=P,
                  train_batch_size=16, do_train=True, seed=1)
    values.update(overrides)
    return from_flat(PretrainingConfig, **values)


@pytest.mark.parametrize("overrides, message", [
    (dict(input_file="/nonexistent/*.tfrecord"),
     '--input_file=/nonexistent/*.tfrecord: No files match input pattern '
     '"/nonexistent/*.tfrecord".'),
    (dict(max_predictions_per_seq=5),
     'train-0.tfrecord: feature "masked_lm_positions" has length 4, expected int64_list of '
     'length 5'),
    (dict(max_seq_length=20),
     'train-0.tfrecord: feature "input_ids" has length 16, expected int64_list of length 20'),
    (dict(num_warmup_steps=500, num_train_steps=100),
     "--num_warmup_steps=500 must be in [0, --num_train_steps=100]"),
    (dict(lr_schedule="wsd", decay_proportion=0.0),
     "--decay_proportion=0.0 must be in (0, 1] (the fraction of the training steps the final "
     "decay takes)"),
    (dict(lr_schedule="wsd", num_warmup_steps=100, num_train_steps=100),
     "--lr_schedule=wsd decays after warmup: --num_warmup_steps=100 leaves no step of "
     "--num_train_steps=100 for it"),
    (dict(do_train=False),
     "at least one of --do_train or --do_eval must be set"),
    (dict(input_text_file="corpus.txt"),
     "give exactly one of --input_file (TFRecords), --input_text_file (raw text masked on the "
     "fly) or --input_tfds"),
    (dict(eval_tfds_split="validation"),
     "--eval_tfds_split is a split of --input_tfds, which is not set"),
    (dict(max_predictions_per_seq=17),
     "--max_predictions_per_seq=17 must be in [1, --max_seq_length=16]"),
    (dict(do_eval=True, eval_input_file="/nonexistent/eval-*.tfrecord"),
     '--eval_input_file=/nonexistent/eval-*.tfrecord: No files match input pattern '
     '"/nonexistent/eval-*.tfrecord".'),
    (dict(do_eval=True, eval_input_text_file="held_out.txt"),
     "--eval_input_text_file needs --vocab_file"),
    (dict(init_checkpoint="/ckpts/cased_L-12_H-768_A-12/bert_model.ckpt", do_lower_case=True),
     "cased_L-12_H-768_A-12"),
    (dict(bert_config_file=None),
     "--bert_config_file is required (or an --init_checkpoint that records its configuration)"),
    (dict(bert_config_file=None, init_checkpoint="/ckpts/uncased_L-2_H-128_A-2/bert_model.ckpt"),
     "--bert_config_file is required: --init_checkpoint=/ckpts/uncased_L-2_H-128_A-2/"
     "bert_model.ckpt has no bert_config.json beside it"),
    (dict(masked_lm_prob_end=1.5), "--masked_lm_prob_end=1.5 must be in (0, 1]"),
    (dict(masked_lm_prob_end=0.05),
     "--masked_lm_prob_end=0.05 schedules the masking of raw text (--input_text_file, "
     "--input_tfds); --input_file="),
    (dict(input_file=None, input_text_file="corpus.txt", vocab_file="vocab.txt",
          masked_lm_prob_end=0.05,
          tf_data_service="grpc://localhost:5050"),
     "--masked_lm_prob_end=0.05 needs the input masked in the training process, which sets "
     "the rate as it trains; --tf_data_service=grpc://localhost:5050 masks it elsewhere"),
    (dict(batch_size_ramp=0.5),
     "--batch_size_ramp=0.5 grows the batch from --train_batch_size to --train_batch_size x "
     "--gradient_accumulation_steps: set --gradient_accumulation_steps >= 2 (it is 1)"),
    (dict(batch_size_ramp=2.0, gradient_accumulation_steps=2),
     "--batch_size_ramp=2.0 must be in (0, 1]: the share of training over which the batch "
     "grows"),
    (dict(tf_data_service="localhost:5050"),
     "--tf_data_service=localhost:5050 must look like grpc://HOST:PORT (the dispatcher's "
     "address)"),
])
def test_bad_inputs_fail_with_named_flag(setup, overrides, message):
    tmp_path, config_path, _ = setup
    with pytest.raises(FlagValueError) as error:
        pretrain(_job(tmp_path, config_path, **overrides))
    assert message in str(error.value)


def test_vocab_larger_than_config(setup):
    tmp_path, config_path, vocab = setup
    vocab.write_text(vocab.read_text() + "extra1\nextra2\n")
    with pytest.raises(FlagValueError) as error:
        pretrain(_job(tmp_path, config_path, vocab_file=str(vocab)))
    assert str(error.value) == (f"vocab_size=40 in {config_path} is smaller than the 42 tokens "
                                f"of --vocab_file={vocab}")


def test_a_vocabulary_the_run_cannot_read_is_refused_naming_the_flag(setup, tmp_path):
    # Before, the run record's tokenizer digest read it first, with a traceback.
    records, config_path, _ = setup
    empty, bare = tmp_path / "empty.txt", tmp_path / "bare.txt"
    empty.write_text("")
    bare.write_text("a\nb\nc\n")
    for vocab, problem in ((empty, f"vocab_file '{empty}' is empty; expected one token per "
                                   "line."),
                           (bare, f"vocab_file '{bare}' lacks the special token(s) [PAD], "
                                  "[UNK], [CLS], [SEP], [MASK]; a BERT vocabulary must contain "
                                  "[PAD], [UNK], [CLS], [SEP], [MASK].")):
        with pytest.raises(FlagValueError) as error:
            pretrain(_job(records, config_path, vocab_file=str(vocab),
                          output_dir=str(tmp_path / "out")))
        assert str(error.value) == f"--vocab_file={vocab}: {problem}"
    assert not (tmp_path / "out").exists()


def test_record_ids_beyond_vocab_size(setup):
    tmp_path, _, _ = setup
    small = BertConfig(vocab_size=12, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64, max_position_embeddings=32)
    small_path = tmp_path / "small_config.json"
    small.to_json_file(str(small_path))
    with pytest.raises(FlagValueError) as error:
        pretrain(_job(tmp_path, small_path))
    assert str(error.value).startswith(f"--input_file={tmp_path}/train-*.tfrecord: ")
    assert "vocab_size" in str(error.value) and "12" in str(error.value)


def test_unwritable_output_dir(setup):
    tmp_path, config_path, _ = setup
    (tmp_path / "blocker").write_text("a file")
    with pytest.raises(RunDirectoryError) as error:
        pretrain(_job(tmp_path, config_path, output_dir=str(tmp_path / "blocker" / "out")))
    assert str(error.value) == (f"--output_dir={tmp_path}/blocker/out cannot be created: "
                                f"{tmp_path}/blocker is a file")


def _write_text_corpus(tmp_path):
    """Sentences of the Python reference manual (an offline English corpus), 3 per document."""
    from pydoc_data.topics import topics
    words, lines = {}, []
    for text in list(topics.values())[:40]:
        for sentence in text.replace("\n", " ").split(". "):
            sentence = " ".join(w for w in sentence.split() if w.isalpha())
            if len(sentence.split()) >= 4:
                lines.append(sentence.lower())
                for w in sentence.lower().split():
                    words[w] = words.get(w, 0) + 1
    corpus = []
    for i in range(0, 300, 3):
        corpus += lines[i:i + 3] + [""]
    (tmp_path / "corpus.txt").write_text("\n".join(corpus) + "\n")
    letters = sorted({c for w in words for c in w})
    tokens = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + letters
              + ["##" + c for c in letters] + sorted(words, key=lambda w: -words[w])[:150])
    (tmp_path / "text_vocab.txt").write_text("\n".join(dict.fromkeys(tokens)) + "\n")
    return tmp_path / "corpus.txt", tmp_path / "text_vocab.txt", len(dict.fromkeys(tokens))


def test_raw_text_training_in_bfloat16_then_eval_only(tmp_path):
    import keras
    corpus, vocab, vocab_size = _write_text_corpus(tmp_path)
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    config_path = tmp_path / "bert_config.json"
    config.to_json_file(str(config_path))
    values = {name: FLAGS[name].default for name in FLAGS}
    values.update(bert_config_file=str(config_path), input_text_file=str(corpus),
                  vocab_file=str(vocab), output_dir=str(tmp_path / "out"), max_seq_length=32,
                  max_predictions_per_seq=5, train_batch_size=8, eval_batch_size=8,
                  num_train_steps=20, num_warmup_steps=2, learning_rate=1e-3,
                  steps_per_loop=10, save_checkpoints_steps=10, seed=3, do_train=True,
                  dtype="mixed_bfloat16", masked_lm_prob=0.3, masked_lm_prob_end=0.1,
                  gradient_accumulation_steps=2, batch_size_ramp=0.5)
    try:
        results = pretrain(from_flat(PretrainingConfig, **values))
        encoder_policy = keras.saving.load_model(str(tmp_path / "out" / "encoder.keras")) \
            .dtype_policy.name
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert results["global_step"] == 20 and results["train"]["steps_this_run"] == 20
    assert np.isfinite(results["train"]["loss"]) and results["train"]["mlm_loss"] > 0
    assert encoder_policy == "mixed_bfloat16"
    assert (tmp_path / "out" / "vocab.txt").read_text() == vocab.read_text()
    # The falling rate: the last call of the steps started at step 10 of 20.
    assert results["masking_rate"] == {"first": 0.3, "last": pytest.approx(0.2)}
    # The growing batch: steps 0-9 of 1 batch of 8, steps 10-19 of 2 (half-way: the ramp's end).
    assert results["train"]["micro_batches"] == 10 + 20
    assert results["tokens"] == 30 * 8 * 32

    values.update(do_train=False, do_eval=True, max_eval_steps=3, dtype="float32")
    results = pretrain(from_flat(PretrainingConfig, **values))
    assert results["global_step"] == 20 and "train" not in results
    assert results["eval"]["eval_steps"] == 3
    assert 0.0 <= results["eval"]["masked_lm_accuracy"] <= 1.0
    # The evaluation is added beside the training run's results, which stay.
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["global_step"] == 20 and "train" in saved and "eval" not in saved
    lines = (tmp_path / "out" / "eval_only_results.jsonl").read_text().splitlines()
    assert [json.loads(line)["eval"] for line in lines] == [results["eval"]]


def test_prepared_tfds_text_dataset_trains_and_evaluates(tmp_path):
    """--input_tfds: documents of a TFDS text dataset prepared locally (no download), masked on
    the fly; --eval_tfds_split evaluates on another split of it."""
    tfds = pytest.importorskip("tensorflow_datasets")
    corpus, vocab, vocab_size = _write_text_corpus(tmp_path)
    documents = [d for d in corpus.read_text().split("\n\n") if d.strip()]

    class TinyManualDocs(tfds.core.GeneratorBasedBuilder):
        """Documents of the reference manual: 80 to train on, the rest held out."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                {"body": tfds.features.Text()}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(documents[:80]),
                    "validation": self._generate_examples(documents[80:])}

        def _generate_examples(self, docs):
            for i, doc in enumerate(docs):
                yield i, {"body": doc.strip()}

    data_dir = str(tmp_path / "tfds")
    TinyManualDocs(data_dir=data_dir).download_and_prepare()
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    values = {name: FLAGS[name].default for name in FLAGS}
    values.update(bert_config_file=str(tmp_path / "bert_config.json"),
                  input_tfds="tiny_manual_docs", tfds_data_dir=data_dir, tfds_text_key="body",
                  eval_tfds_split="validation", vocab_file=str(vocab),
                  output_dir=str(tmp_path / "out"), max_seq_length=32, max_predictions_per_seq=5,
                  train_batch_size=8, eval_batch_size=4, num_train_steps=10, num_warmup_steps=2,
                  learning_rate=1e-3, steps_per_loop=10, save_checkpoints_steps=10, seed=3,
                  do_train=True, do_eval=True, max_eval_steps=100)
    results = pretrain(from_flat(PretrainingConfig, **values))
    assert results["global_step"] == 10
    assert np.isfinite(results["train"]["loss"]) and results["train"]["mlm_loss"] > 0
    # One ordered pass over the 20 held-out documents of 3 sentences: a few batches of 4.
    assert 1 <= results["eval"]["eval_steps"] < 100
    with pytest.raises(FlagValueError, match='--input_tfds=tiny_manual_docs:test: .*split'):
        pretrain(from_flat(PretrainingConfig, **dict(values, tfds_split="test",
                                                     output_dir=str(tmp_path / "out2"))))


def test_eval_reads_eval_input_file_not_the_training_input(setup):
    tmp_path, config_path, _ = setup
    # 8 held-out records make exactly 2 eval batches of 4 (the training input has 128).
    _write_records(tmp_path / "held_out.tfrecord", 8, seed=7)
    results = pretrain(_job(
        tmp_path, config_path, do_train=True, do_eval=True, num_train_steps=10,
        num_warmup_steps=0, steps_per_loop=10, save_checkpoints_steps=10, eval_batch_size=4,
        max_eval_steps=100, eval_input_file=str(tmp_path / "held_out.tfrecord"),
        output_dir=str(tmp_path / "eval_out")))
    assert results["global_step"] == 10
    assert results["eval"]["eval_steps"] == 2
    first = results["train"]["first_log"]
    assert first["step"] == 10 and first["loss"] == results["train"]["loss"]


def test_float16_training_scales_the_loss(setup):
    import keras
    tmp_path, config_path, _ = setup
    try:
        results = pretrain(_job(tmp_path, config_path, output_dir=str(tmp_path / "fp16"),
                                    dtype="mixed_float16", num_train_steps=30,
                                    num_warmup_steps=5, learning_rate=5e-3, steps_per_loop=10,
                                    save_checkpoints_steps=30))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert np.isfinite(results["train"]["loss"])
    assert results["train"]["masked_lm_accuracy"] > 0.3
    reader = tf.train.load_checkpoint(str(tmp_path / "fp16" / "ckpt-30"))
    assert reader.get_tensor("optimizer/dynamic_scale/.ATTRIBUTES/VARIABLE_VALUE") >= 1.0


def _official_recipe(phase, *overrides):
    """The config of official_configs/pretraining/bert_base_<phase>.flags plus overrides."""
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    flag_values = copy.deepcopy(FLAGS)
    flag_values(["run_pretraining", f"--flagfile={repo_root}/official_configs/pretraining/"
                 f"bert_base_{phase}.flags", *overrides])
    return pretrain_cli.pretraining_config(flag_values)


def test_two_phase_recipe_continues_phase_1_weights_with_a_fresh_optimizer(setup):
    tmp_path, _, vocab = setup
    phase1, phase2 = _official_recipe("phase1"), _official_recipe("phase2")
    # The paper's split: 90% of the steps at 128 tokens, the rest at 512 with 80 predictions,
    # phase 2 starting from phase 1's output directory.
    assert (phase1.task.max_seq_length, phase1.task.max_predictions_per_seq) == (128, 20)
    assert (phase2.task.max_seq_length, phase2.task.max_predictions_per_seq) == (512, 80)
    assert phase1.trainer.num_train_steps == 9 * phase2.trainer.num_train_steps
    assert phase2.task.init_checkpoint == phase1.output_dir != phase2.output_dir
    assert BertConfig.from_json_file(
        phase1.task.bert_config_file).max_position_embeddings == 512

    # The same recipe shrunk by overrides: 32 tokens, then 64 (all 64 positions exist from the
    # start, as bert_base.json's 512 do).
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.to_json_file(str(tmp_path / "tiny.json"))
    _write_records(tmp_path / "seq32.tfrecord", 128, seq_length=32, seed=3)
    _write_records(tmp_path / "seq64.tfrecord", 128, seq_length=64, seed=4, num_predictions=8)
    shrink = [f"--bert_config_file={tmp_path}/tiny.json", f"--vocab_file={vocab}",
              "--train_batch_size=16", "--learning_rate=5e-3", "--num_warmup_steps=2",
              "--save_checkpoints_steps=10", "--steps_per_loop=10", "--dtype=float32"]
    first = pretrain(_official_recipe(
        "phase1", *shrink, f"--input_file={tmp_path}/seq32.tfrecord",
        f"--output_dir={tmp_path}/phase1", "--max_seq_length=32",
        "--max_predictions_per_seq=4", "--num_train_steps=40"))
    phase2_shrunk = [*shrink, f"--input_file={tmp_path}/seq64.tfrecord", "--max_seq_length=64",
                     "--max_predictions_per_seq=8", "--num_train_steps=10"]
    second = pretrain(_official_recipe("phase2", *phase2_shrunk,
                                       f"--init_checkpoint={tmp_path}/phase1",
                                       f"--output_dir={tmp_path}/phase2"))
    scratch = pretrain(_official_recipe("phase2", *phase2_shrunk, "--init_checkpoint=",
                                        f"--output_dir={tmp_path}/scratch"))
    assert first["global_step"] == 40
    # Phase 2 counts its own steps (fresh optimizer and schedule) ...
    assert second["global_step"] == 10 and second["train"]["steps_this_run"] == 10
    reader = tf.train.load_checkpoint(str(tmp_path / "phase2" / "ckpt-10"))
    assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 10
    # ... from phase 1's weights: its first steps predict far better than the same steps from
    # a random start.
    assert second["train"]["first_log"]["masked_lm_accuracy"] > \
        scratch["train"]["first_log"]["masked_lm_accuracy"] + 0.3


def test_training_input_through_tf_data_service(tmp_path):
    """A dispatcher and a worker on 127.0.0.1 read, tokenize and mask the training text."""
    corpus, vocab, vocab_size = _write_text_corpus(tmp_path)
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    port = dispatcher.target.rsplit(":", 1)[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=f"127.0.0.1:{port}"))
    values = {name: FLAGS[name].default for name in FLAGS}
    values.update(bert_config_file=str(tmp_path / "bert_config.json"),
                  input_text_file=str(corpus), vocab_file=str(vocab),
                  output_dir=str(tmp_path / "out"), max_seq_length=32, max_predictions_per_seq=5,
                  train_batch_size=8, num_train_steps=10, num_warmup_steps=2, learning_rate=1e-3,
                  steps_per_loop=5, save_checkpoints_steps=5, do_train=True,
                  tf_data_service=f"grpc://127.0.0.1:{port}")
    try:
        results = pretrain(from_flat(PretrainingConfig, **values))
        # The worker (the only one) runs the run's job; a private API, as TF's own tests use.
        assert worker._num_tasks() == 1
    finally:
        worker.stop()
        dispatcher.stop()
    assert results["global_step"] == 10 and np.isfinite(results["train"]["loss"])
    assert results["train"]["masked_lm_accuracy"] > 0.0

    # A restart of the run re-attaches to the same job; a run with other input gets a new one.
    job = pretraining._data_service_job_name(from_flat(PretrainingConfig, **values))
    values.update(num_train_steps=20)
    assert pretraining._data_service_job_name(from_flat(PretrainingConfig, **values)) == job
    values.update(ngram_mask=3)
    ngrams = pretraining._data_service_job_name(from_flat(PretrainingConfig, **values))
    assert ngrams != job
    values.update(max_predictions_per_seq=6)
    assert pretraining._data_service_job_name(from_flat(PretrainingConfig, **values)) not in (
        job, ngrams)


@pytest.fixture(scope="module")
def packed_setup(tmp_path_factory):
    """Packed and unpacked records of short real documents, a tiny config and its vocab."""
    from bert_tf.data.pretraining import create_pretraining_data as cpd
    from bert_tf.data.pretraining import demo_corpus
    from bert_tf.text import build_vocab, write_vocab

    root = tmp_path_factory.mktemp("packed_pretraining")
    (root / "corpus.txt").write_text(
        demo_corpus.format_documents(demo_corpus.short_documents()[:80]), encoding="utf-8")
    vocab = build_vocab(str(root / "corpus.txt"), 600, True)
    write_vocab(vocab, str(root / "vocab.txt"))
    for pack in (True, False):
        options = cpd.PretrainingDataOptions(max_seq_length=128, max_predictions_per_seq=24,
                                             dupe_factor=2, random_seed=1, pack_sequences=pack,
                                             max_instances_per_row=4)
        cpd.create_pretraining_data(str(root / "corpus.txt"),
                                    [str(root / f"{'packed' if pack else 'plain'}.tfrecord")],
                                    str(root / "vocab.txt"), options=options)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    config.to_json_file(str(root / "bert_config.json"))
    return root


def _packed_job(root, **overrides):
    values = dict(input_file=str(root / "packed.tfrecord"), max_seq_length=128,
                  max_predictions_per_seq=24, train_batch_size=4)
    values.update(overrides)
    return _job(root, root / "bert_config.json", **values)


@pytest.mark.slow
def test_trains_on_packed_records_and_counts_instances(packed_setup, tmp_path):
    results = pretrain(_packed_job(packed_setup, output_dir=str(tmp_path / "out"),
                                       num_train_steps=6, num_warmup_steps=1, steps_per_loop=3,
                                       save_checkpoints_steps=6, learning_rate=1e-3))
    train = results["train"]
    assert results["global_step"] == 6 and np.isfinite(train["loss"])
    assert train["nsp_loss"] > 0 and 0.0 <= train["next_sentence_accuracy"] <= 1.0
    # Rows of 128 tokens hold about two of these instances (at most 4).
    assert 1.3 < train["instances_per_row"] <= 4.0, train
    assert train["instances_per_second"] == pytest.approx(
        train["examples_per_second"] * train["instances_per_row"])


@pytest.mark.parametrize("overrides, message", [
    (dict(input_file="plain.tfrecord", pack_sequences=True),
     '--pack_sequences: the records of --input_file are not packed (no feature "instance_ids" '
     'in {root}/plain.tfrecord); make them with create_pretraining_data --pack_sequences, or '
     'drop --pack_sequences'),
    (dict(max_predictions_per_seq=20),
     "--max_predictions_per_seq=20 does not match the packed records of --input_file: "
     "{root}/packed.tfrecord holds 24 masked positions per row; pass "
     "--max_predictions_per_seq=24 or leave it unset"),
    (dict(max_instances_per_row=4),
     "--max_instances_per_row sets packed rows of raw text: it needs --pack_sequences"),
    (dict(input_file="packed.tfrecord,plain.tfrecord"),
     '--input_file={root}/packed.tfrecord,{root}/plain.tfrecord: {root}/plain.tfrecord: holds '
     'unpacked records (no feature "instance_ids") but packed rows were expected '
     "(--pack_sequences); make them with create_pretraining_data --pack_sequences, or read the "
     "file as unpacked."),
])
def test_packed_records_against_the_flags(packed_setup, overrides, message):
    root = packed_setup
    if "input_file" in overrides:
        overrides["input_file"] = ",".join(str(root / f)
                                           for f in overrides["input_file"].split(","))
    with pytest.raises(FlagValueError) as error:
        pretrain(_packed_job(root, output_dir=str(root / "bad"), **overrides))
    assert str(error.value) == message.format(root=root)


def test_the_checked_input_pipeline_is_handed_to_the_training_loop():
    # The up-front check builds the pipeline (seconds for raw text): the loop's first
    # single-pipeline call gets that one, later and multi-pipeline calls build their own.
    built = []

    def dataset_fn(input_context=None):
        built.append(input_context)
        return tf.data.Dataset.range(3)

    task = PretrainingTask(input_file="data/*.tfrecord")
    checked = pretraining._check_input(dataset_fn, task, is_training=True)
    single = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                        num_replicas_in_sync=1)
    first = checked(single)
    assert built == [None] and list(first.as_numpy_iterator()) == [0, 1, 2]
    checked(single)
    sharded = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                         num_replicas_in_sync=2)
    checked(sharded)
    assert built == [None, single, sharded]


def test_a_bad_input_fails_the_check_naming_the_flag():
    def dataset_fn(input_context=None):
        raise ValueError("no file matches")

    task = PretrainingTask(input_file="data/*.tfrecord")
    with pytest.raises(pretraining.FlagValueError) as raised:
        pretraining._check_input(dataset_fn, task, is_training=True)
    assert str(raised.value) == "--input_file=data/*.tfrecord: no file matches"


def test_type_vocab_size_1_with_sentence_pairs_is_refused(setup):
    """POOR: type_vocab_size 1 with NSP records ended in a raw traceback inside the model."""
    tmp_path, _, _ = setup
    one_type = tmp_path / "one_type.json"
    BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=32,
               type_vocab_size=1).to_json_file(str(one_type))
    with pytest.raises(FlagValueError) as error:
        pretrain(_job(tmp_path, one_type))
    assert str(error.value) == (
        f"type_vocab_size=1 in {one_type} has no segment id 1, which the sentence pairs of the "
        "pre-training inputs use; set type_vocab_size >= 2 (or train single sequences: "
        "--input_text_file with --full_sentences)")


def test_a_fine_tuning_run_is_not_a_pretraining_output_dir(setup):
    """The output rule: pre-training into a fine-tuning run's directory is refused, untouched."""
    tmp_path, config_path, _ = setup
    run = tmp_path / "classifier_run"
    run.mkdir()
    (run / "finetuning_run.json").write_text("{}\n")
    (run / "model.keras").write_bytes(b"weights")
    with pytest.raises(FlagValueError) as error:
        # The command's output rule (bert_tf.cli.pretrain runs it before pretrain).
        outputs.check_pretraining_output_dir(_job(tmp_path, config_path,
                                                      output_dir=str(run)).output_dir)
    assert str(error.value) == (
        f"--output_dir={run} holds a fine-tuning run (finetuning_run.json, model.keras); choose "
        "a new --output_dir (--init_checkpoint may name this one)")
    assert sorted(os.listdir(run)) == ["finetuning_run.json", "model.keras"]


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory):
    """(root, {run: digest before}, {case: result}): the release 0.1 runs (tiny, on TensorFlow)
    evaluated without training, a run whose lock file is a link, and a new run reused through
    its own flagfile, one process in a copy of the runs."""
    import shutil

    root = tmp_path_factory.mktemp("evaluations") / "runs"
    shutil.copytree(FIXTURE_RUNS, root)
    shutil.copytree(root / "pretrain_text", root / "linked")
    (root / "notes.txt").write_text("my notes\n")
    os.remove(root / "linked" / ".bert_tf_run.lock")
    os.symlink(root / "notes.txt", root / "linked" / ".bert_tf_run.lock")
    before = {name: digest(root / name) for name in ("pretrain_text", "pretrain_records")}
    evaluate = ["--do_eval", "--nodo_train", "--max_eval_steps=2"]
    text = ["--bert_config_file=inputs/bert_config.json", "--vocab_file=inputs/vocab.txt",
            "--input_text_file=inputs/corpus.txt", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--eval_batch_size=4", "--train_batch_size=4",
            "--num_train_steps=1", "--num_warmup_steps=0", "--seed=1", "--steps_per_loop=1"]
    own = ["--flagfile=pretrain_text/run_pretraining.flags", *evaluate]
    cases = {
        "own": own,
        "own_not_init": [*own, "--init_checkpoint=classifier"],
        "init_into_new": [*text, *evaluate, "--init_checkpoint=pretrain_records",
                          "--output_dir=evaluated"],
        "nothing": [*text, *evaluate, "--output_dir=nothing"],
        "linked_lock": ["--flagfile=linked/run_pretraining.flags", "--output_dir=linked",
                        "--num_train_steps=4"],
        "fresh": [*text, "--do_train", "--output_dir=fresh"],
        "again": ["--flagfile=fresh/run_pretraining.flags", "--output_dir=again"],
        "accumulating": ["--flagfile=fresh/run_pretraining.flags", "--num_train_steps=2",
                         "--gradient_accumulation_steps=2"],
    }
    results = run_commands([("bert_tf.run_pretraining", args) for args in cases.values()],
                           cwd=str(root))
    return root, before, dict(zip(cases, results))


def _added(before, after):
    """The files `after` has that `before` had not; every file of `before` hashes the same."""
    assert {name: after.get(name) for name in before} == before
    return sorted(set(after) - set(before))


def test_evaluation_only_runs_write_only_their_results_beside_the_runs(evaluations):
    """Never destroy, round three: --do_eval --nodo_train on a finished run replaced its
    results.json (global_step 0, the training results gone) and its run_pretraining.flags,
    and rewrote its models. Now the run's files hash as before; the evaluation adds a line to
    eval_only_results.jsonl and TensorBoard scalars, and --init_checkpoint is not read while
    the run has its own checkpoints."""
    root, before, results = evaluations
    for case in ("own", "own_not_init", "init_into_new"):
        assert results[case].returncode == 0, results[case].stderr[-3000:]
    added = _added(before["pretrain_text"], digest(root / "pretrain_text"))
    assert added[0] == "eval_only_results.jsonl" and len(added) == 3
    assert all(name.startswith("summaries/eval/events.out.tfevents.") for name in added[1:])
    lines = [json.loads(line) for line in
             (root / "pretrain_text" / "eval_only_results.jsonl").read_text().splitlines()]
    assert [(line["evaluated"], line["global_step"], line["eval"]["eval_steps"])
            for line in lines] == [("pretrain_text/ckpt-2", 2, 2)] * 2
    assert lines[0]["eval_input"] == "--input_text_file=inputs/corpus.txt"
    assert 0 < lines[0]["eval"]["loss"] == pytest.approx(lines[1]["eval"]["loss"])
    assert ("--init_checkpoint=classifier is not read: --output_dir=pretrain_text holds the "
            "run's own checkpoints, which are evaluated") in results["own_not_init"].stderr
    assert digest(root / "pretrain_records") == before["pretrain_records"]
    # --init_checkpoint's weights evaluated into a new directory: only the evaluation there.
    evaluated = root / "evaluated"
    assert sorted(os.listdir(evaluated)) == [".bert_tf_run.lock", "eval_only_results.jsonl",
                                             "summaries"]
    line = json.loads((evaluated / "eval_only_results.jsonl").read_text())
    assert (line["evaluated"], line["global_step"]) == ("pretrain_records", 0)


def test_a_refused_evaluation_writes_nothing(evaluations):
    root, _, results = evaluations
    assert results["nothing"].returncode == 1
    assert results["nothing"].stderr.strip().splitlines()[-1] == (
        "run_pretraining: error: --do_eval without --do_train needs a checkpoint in "
        "--output_dir=nothing or --init_checkpoint")
    assert not (root / "nothing").exists()


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(evaluations):
    """Never destroy, round three: the lock record was written through a link in the lock's
    place and its target emptied on release."""
    root, _, results = evaluations
    assert results["linked_lock"].returncode == 1
    assert results["linked_lock"].stderr.strip().splitlines()[-1] == (
        f"run_pretraining: error: --output_dir=linked: its lock file "
        f"linked/.bert_tf_run.lock is a symbolic link (to {root / 'notes.txt'}); a run locks "
        "a file of its own and never writes through another: remove it (what it names is left "
        "as it is), or choose another --output_dir")
    assert (root / "notes.txt").read_text() == "my notes\n"
    assert not [name for name in os.listdir(root / "linked") if name.startswith("ckpt-4")]


def test_a_runs_flagfile_holds_its_commands_flags_and_runs_it_again(evaluations):
    """run_pretraining.flags held absl's, absltest's and TensorFlow's own flags
    (--op_conversion_fallback_to_while_loop, ...): as --flagfile it failed on them."""
    root, _, results = evaluations
    for case in ("fresh", "again"):
        assert results[case].returncode == 0, results[case].stderr[-3000:]
    fresh = (root / "fresh" / "run_pretraining.flags").read_text().splitlines()
    for line in fresh:  # each a flag of the command (FLAGS: its define_flags())
        name = line.lstrip("-").split("=")[0]
        assert name in FLAGS or (name.startswith("no") and name[2:] in FLAGS), line
    assert "--num_train_steps=1" in fresh and "--nodo_eval" in fresh
    again = (root / "again" / "run_pretraining.flags").read_text().splitlines()
    # Its paths absolute, so the file reruns from any directory.
    assert f"--output_dir={root / 'fresh'}" in fresh
    assert [line for line in fresh if not line.startswith("--output_dir=")] == [
        line for line in again if not line.startswith("--output_dir=")]


def test_a_resume_with_another_accumulation_is_refused_naming_both(evaluations):
    """A resume with another --gradient_accumulation_steps changed the effective batch and
    skipped examples it never trained on, silently."""
    root, _, results = evaluations
    fresh = root / "fresh"  # the run's flagfile names it by its absolute path
    assert results["accumulating"].returncode == 1
    assert results["accumulating"].stderr.strip().splitlines()[-1] == (
        f"run_pretraining: error: --output_dir={fresh} holds checkpoints of a run with other "
        f"settings ({fresh}/bert_tf_run.json); resuming would mix them: "
        "--gradient_accumulation_steps=1 then, 2 now. Rerun with the run's settings to resume "
        f"it, or choose a new --output_dir (--init_checkpoint={fresh} starts from its weights)")


def test_a_budget_keeps_back_only_what_its_evaluation_reads(caplog):
    """The time after training a budgeted run keeps back counts the held-out batches there
    are, not --max_eval_steps: two batches of a 60-s budget left training 11 s of it (1,000
    assumed), its learning rate far from 0."""
    job = from_flat(PretrainingConfig, do_train=True, do_eval=True, max_eval_steps=1000,
                    train_batch_size=32, eval_batch_size=32, time_budget="60s")

    def two_batches(input_context=None):
        return tf.data.Dataset.range(64).map(lambda i: {"input_ids": i}).batch(32)

    two_batches.pipeline = two_batches
    assert pretraining._eval_batches(job, two_batches) == 2
    reserve = pretraining._budget_reserve_fn(job, 60.0, two_batches)
    # 2 s for the model files, half the 4 s compilation, two batches at a third of a step.
    assert reserve(0.3, 4.0) == pytest.approx(2.0 + 2.0 + 2 * 0.3 / 3)
    assert "more than half the budget" not in caplog.text

    def many_batches(input_context=None):
        return tf.data.Dataset.range(64).repeat().batch(32)

    many_batches.pipeline = many_batches
    reserve = pretraining._budget_reserve_fn(job, 60.0, many_batches)
    with caplog.at_level("WARNING"):
        assert reserve(0.3, 4.0) == pytest.approx(2.0 + 2.0 + 1000 * 0.3 / 3)
        reserve(0.3, 4.0)
    assert caplog.text.count(
        "--time_budget=60s: the evaluation after training (1000 batches of 32) and the model "
        "files are estimated at 104 s, more than half the budget; fewer --max_eval_steps leave "
        "training more") == 1


def test_a_budget_spent_before_the_first_step_is_an_error_not_a_random_model(setup, tmp_path):
    records, config_path, _ = setup
    out = tmp_path / "out"
    with pytest.raises(FlagValueError) as error:
        pretrain(_job(records, config_path, time_budget="0.1s", output_dir=str(out)))
    assert str(error.value).startswith("--time_budget=0.1s was spent before the first "
                                       "training step (")
    assert str(error.value).endswith(" s of set-up: reading the input, building and compiling "
                                     "the model); give a longer budget")
    assert not (out / "encoder.keras").exists() and not (out / "results.json").exists()


@pytest.mark.parametrize("values, warned", [
    (dict(decay_proportion=0.3), True),
    (dict(decay_proportion=0.3, time_budget="60s"), True),
    (dict(decay_proportion=0.3, lr_schedule="wsd"), False),
    (dict(decay_proportion=0.1), False),  # the default, as every run's flagfile records it
])
def test_a_decay_proportion_the_schedule_does_not_use_is_said(values, warned, setup, caplog):
    from bert_tf.jobs.pretraining_config import check_settings

    records, config_path, _ = setup
    job = _job(records, config_path, **values)
    with caplog.at_level("WARNING"):
        # The command checks the settings and the job again: said where the optimizer is made.
        check_settings(job)
        check_settings(job)
        job.trainer.optimizer_options()
    message = ("--decay_proportion=0.3 is not used: it sizes --lr_schedule=wsd's final decay, "
               "and --lr_schedule=linear decays over the whole run")
    assert caplog.text.count(message) == (1 if warned else 0)


def test_a_full_disk_writing_the_models_says_the_training_is_kept_and_what_writes_them(
        setup, monkeypatch):
    """A full disk while encoder.keras was written ended with `[Errno 28] No space left on
    device` alone: no file named, nothing said of the checkpoints or of the rerun that
    writes the models."""
    import errno

    from bert_tf.training import checkpointing

    tmp_path, config_path, _ = setup
    out = tmp_path / "full"
    job = _job(tmp_path, config_path, num_train_steps=2, num_warmup_steps=0,
               steps_per_loop=2, save_checkpoints_steps=2, output_dir=str(out))
    save_keras_model = checkpointing.save_keras_model

    def full_disk(model, path):
        if path.endswith("encoder.keras"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        save_keras_model(model, path)

    monkeypatch.setattr(checkpointing, "save_keras_model", full_disk)
    with pytest.raises(RunDirectoryError) as error:
        pretrain(job)
    assert str(error.value) == (
        f"{out}/encoder.keras cannot be written (No space left on device); nothing was lost: "
        f"training is saved in the checkpoint {out}/ckpt-2. Free space (or fix the directory) "
        "and rerun the same command: it has nothing left to train and writes the run's models "
        "and results")
    assert (out / "pretrainer.keras").is_file() and (out / "ckpt-2.index").is_file()
    assert not (out / "encoder.keras").exists() and not (out / "results.json").exists()
