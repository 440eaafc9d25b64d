"""Run directories on a tf.io.gfile file system: pre-train, resume, fine-tune and export on ram://.

ram:// is TensorFlow's in-memory file system, one per process, so every step runs in this
process through the CLIs' Python entry points (pretrain(), run_classifier()) with their flags.
Nothing touches the local disk: a path that bypassed tf.io.gfile would fail or land in ./ram:.
"""

import json
import os
import random
import uuid

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import fileio
from bert_tf.config import BertConfig
from bert_tf.serving import load_model_dir

S, P = 16, 3
WORDS = ["the", "a", "movie", "film", "was", "is", "plot", "story", "and", "very", "good",
         "great", "fine", "bad", "awful", "dull", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def _job(config_class, flag_values, **values):
    """A job's config (sectioned: bert_tf.jobs.sections) of the command's flag defaults, then
    `values`."""
    from bert_tf.jobs.sections import from_flat

    settings = {name: flag_values[name].default for name in flag_values}
    settings.update(values)
    return from_flat(config_class, **settings)


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _write_pretraining_records(path, num_examples, seed):
    """Original-format records; the masked id is a function of its position (learnable)."""
    rng = np.random.RandomState(seed)
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(num_examples):
            ids = [2] + list(rng.randint(5, len(VOCAB), size=S - 2)) + [3]
            positions = sorted(rng.choice(np.arange(1, S - 1), size=P, replace=False))
            labels = [5 + p % 4 for p in positions]
            for p in positions:
                ids[p] = 4
            features = {
                "input_ids": _int_feature(ids), "input_mask": _int_feature([1] * S),
                "segment_ids": _int_feature([0] * (S // 2) + [1] * (S - S // 2)),
                "masked_lm_positions": _int_feature(positions),
                "masked_lm_ids": _int_feature(labels),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.0] * P)),
                "next_sentence_labels": _int_feature([i % 2])}
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=features)).SerializeToString())


def _write_sst2(data_dir, seed=0):
    """SST-2 layout: train/dev 'sentence<TAB>label', test 'index<TAB>sentence'."""
    rng = random.Random(seed)

    def sentence(positive):
        words = [rng.choice(WORDS[:10]) for _ in range(rng.randint(3, 6))]
        words.insert(rng.randint(0, len(words)),
                     rng.choice(["good", "great", "fine"] if positive
                                else ["bad", "awful", "dull"]))
        return " ".join(words)

    for split, count in (("train", 64), ("dev", 16)):
        rows = ["sentence\tlabel"] + [f"{sentence(i % 2)}\t{i % 2}" for i in range(count)]
        fileio.write_text_atomic(f"{data_dir}/{split}.tsv", "\n".join(rows) + "\n")
    rows = ["index\tsentence"] + [f"{i}\t{sentence(i % 2)}" for i in range(8)]
    fileio.write_text_atomic(f"{data_dir}/test.tsv", "\n".join(rows) + "\n")


def _read_json(path):
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


@pytest.mark.slow
def test_pretrain_resume_finetune_export_on_ram_filesystem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a path that bypasses tf.io.gfile would show up as ./ram:
    root = f"ram://bert_tf_{uuid.uuid4().hex[:8]}"
    tf.io.gfile.makedirs(f"{root}/inputs")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    config.to_json_file(f"{root}/inputs/bert_config.json")
    fileio.write_text_atomic(f"{root}/inputs/vocab.txt", "\n".join(VOCAB) + "\n")
    for shard in range(2):
        _write_pretraining_records(f"{root}/inputs/train-{shard}.tfrecord", 32, seed=shard)

    from absl import flags

    from bert_tf.cli import classify, pretrain as pretrain_cli
    from bert_tf.jobs.classification import run_classifier
    from bert_tf.jobs.finetuning_config import ClassificationConfig
    from bert_tf.jobs.pretraining import pretrain
    from bert_tf.jobs.pretraining_config import PretrainingConfig

    run_dir = f"{root}/pretrain"
    pretraining = dict(
        bert_config_file=f"{root}/inputs/bert_config.json", vocab_file=f"{root}/inputs/vocab.txt",
        input_file=f"{root}/inputs/train-*.tfrecord", output_dir=run_dir, max_seq_length=S,
        max_predictions_per_seq=P, train_batch_size=8, learning_rate=1e-3, num_warmup_steps=1,
        save_checkpoints_steps=2, steps_per_loop=2, seed=1, do_train=True)
    # Each command's flags in a FlagValues of their own: their defaults, as the command has them.
    pretraining_flags = pretrain_cli.define_flags(flags.FlagValues())
    results = pretrain(_job(PretrainingConfig, pretraining_flags, num_train_steps=4, **pretraining),
                       flags_text="--num_train_steps=4\n")
    assert results["global_step"] == 4
    assert {"bert_config.json", "vocab.txt", "run_pretraining.flags", "results.json",
            "pretrainer.keras", "encoder.keras", "checkpoint", "ckpt-4.index"} <= set(
        tf.io.gfile.listdir(run_dir))
    assert _read_json(f"{run_dir}/results.json")["global_step"] == 4
    assert tf.train.latest_checkpoint(run_dir) == f"{run_dir}/ckpt-4"

    # Resumed: continues from ckpt-4 (2 more steps, not 6), and the .keras file is readable.
    results = pretrain(_job(PretrainingConfig, pretraining_flags, num_train_steps=6,
                            **pretraining))
    assert results["global_step"] == 6 and results["train"]["steps_this_run"] == 2
    assert tf.train.latest_checkpoint(run_dir) == f"{run_dir}/ckpt-6"
    import keras

    encoder = keras.saving.load_model(f"{run_dir}/encoder.keras")
    pretrainer = keras.saving.load_model(f"{run_dir}/pretrainer.keras")
    for saved, loaded in zip(pretrainer.encoder.weights, encoder.weights):
        np.testing.assert_array_equal(saved.numpy(), loaded.numpy())
    assert encoder.weights[0].shape == (len(VOCAB), 32)
    # The warm start fine-tuning does (--init_checkpoint=<the ram:// run>) loads those weights.
    from bert_tf import interop
    from bert_tf.modeling import BertClassifier, BertEncoder

    warm = BertClassifier(BertEncoder(config), 2)
    interop.warm_start(run_dir, warm)
    for saved, loaded in zip(encoder.weights, warm.encoder.weights):
        np.testing.assert_array_equal(saved.numpy(), loaded.numpy())

    # Fine-tuning from the ram:// run, with data, output and export on ram://.
    _write_sst2(f"{root}/SST-2")
    out, export_dir = f"{root}/classifier", f"{root}/export/1"
    results = run_classifier(_job(
        ClassificationConfig, classify.define_flags(flags.FlagValues()), task_name="sst-2",
        data_dir=f"{root}/SST-2", init_checkpoint=run_dir, bert_config_file=None,
        vocab_file=None, output_dir=out,
        export_dir=export_dir, max_seq_length=S, train_batch_size=8, learning_rate=3e-3,
        num_train_epochs=2, save_checkpoints_steps=8, seed=1, do_train=True, do_eval=True,
        do_predict=True), flags_text="--task_name=sst-2\n")
    assert results["global_step"] == 16
    assert results["num_examples"] == {"train": 64, "dev": 16, "test": 8}
    written = set(tf.io.gfile.listdir(out))
    assert {"results.json", "eval_results.txt", "task_info.json", "model.keras", "vocab.txt",
            "bert_config.json", "run_classifier.flags", "test_results.tsv", "SST-2.tsv",
            "checkpoint"} <= written, written
    assert _read_json(f"{out}/results.json")["global_step"] == 16
    best = results["best_step"]
    assert _read_json(f"{out}/best/metrics.json")["step"] == best
    # best/ on remote storage: new weights beside the old, metrics.json, then the old removed.
    assert sorted(tf.io.gfile.listdir(f"{out}/best")) == [
        "metrics.json", f"model-{best}.data-00000-of-00001", f"model-{best}.index"]
    with tf.io.gfile.GFile(f"{out}/SST-2.tsv") as f:
        assert len(f.read().splitlines()) == 9

    # What the export tool reads from a run directory, read from ram://.
    source = load_model_dir(out)
    assert source.model_file == f"{out}/model.keras" and source.vocab_file == f"{out}/vocab.txt"
    assert list(source.task_info.labels) == ["0", "1"] and source.max_seq_length == S

    # The SavedModel on ram:// loads back and agrees with the run's model.keras.
    classifier = source.model
    loaded = tf.saved_model.load(export_dir)
    ids = np.array([[2, 10, 15, 3] + [0] * (S - 4)], np.int32)
    mask = (ids > 0).astype(np.int32)
    outputs = loaded.signatures["serving_default"](
        input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
        input_type_ids=tf.zeros_like(ids))
    expected = classifier({"input_word_ids": ids, "input_mask": mask,
                           "input_type_ids": np.zeros_like(ids)})
    np.testing.assert_allclose(list(outputs.values())[0].numpy(), np.asarray(expected),
                               atol=1e-5)
    # Only final names: no .tmp_* left by the atomic writes anywhere under the root.
    leftovers = [os.path.join(d, n) for d, dirs, files in tf.io.gfile.walk(root)
                 for n in dirs + files if n.startswith(".tmp")]
    assert not leftovers
    assert not os.path.exists(tmp_path / "ram:")


def test_build_vocab_and_create_pretraining_data_on_ram_filesystem(tmp_path, monkeypatch):
    """The TF-free data tools take tf.io.gfile paths too (TensorFlow imported for them only)."""
    from bert_tf.data.pretraining.create_pretraining_data import (PretrainingDataOptions,
                                                      create_pretraining_data)
    from bert_tf.text import vocab_builder

    monkeypatch.chdir(tmp_path)
    root = f"ram://bert_tf_{uuid.uuid4().hex[:8]}"
    rng = random.Random(0)
    documents = ["\n".join(" ".join(rng.choice(WORDS[:-1]) for _ in range(rng.randint(4, 9)))
                           + " ." for _ in range(6)) for _ in range(12)]
    fileio.write_text_atomic(f"{root}/corpus/part-0.txt", "\n\n".join(documents[:6]) + "\n")
    fileio.write_text_atomic(f"{root}/corpus/part-1.txt", "\n\n".join(documents[6:]) + "\n")

    tokens = vocab_builder.build_vocab(f"{root}/corpus/*.txt", 80, True)
    vocab_builder.write_vocab(tokens, f"{root}/vocab.txt")
    assert {"movie", "film", "."} <= set(tokens)

    shards = [f"{root}/records/train-{i}.tfrecord" for i in range(2)]
    tf.io.gfile.makedirs(f"{root}/records")
    stats = create_pretraining_data(
        f"{root}/corpus/*.txt", shards, f"{root}/vocab.txt",
        options=PretrainingDataOptions(max_seq_length=S, max_predictions_per_seq=P,
                                       dupe_factor=2, documents_per_chunk=4))
    counts = [sum(1 for _ in tf.data.TFRecordDataset(shard)) for shard in shards]
    assert stats.instances > 0 and sum(counts) == stats.instances and min(counts) > 0
    assert sorted(tf.io.gfile.listdir(f"{root}/records")) == ["train-0.tfrecord",
                                                              "train-1.tfrecord"]
    assert not os.path.exists(tmp_path / "ram:")
