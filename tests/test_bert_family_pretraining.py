"""run_pretraining with the BERT-family recipes: the official flagfiles, an ALBERT-style run on
sentence-order records, a SpanBERT + RoBERTa-style run on raw text and the RoBERTa base recipe
on a byte-level BPE, tiny and short."""

import collections
import glob
import json
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf.cli import pretrain as pretrain_cli
from bert_tf.jobs import pretraining
from bert_tf.jobs.pretraining import FlagValueError, masking_recipe, pretrain
from bert_tf.jobs.pretraining_config import PretrainingConfig
from bert_tf.jobs.sections import from_flat
from bert_tf.config import BertConfig, EncoderConfig
from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.pretraining.demo_corpus import format_documents, pydoc_documents
from bert_tf.interop import warm_start
from bert_tf.modeling import BertClassifier, BertEncoder
from bert_tf.text import load_tokenizer
from bert_tf.text.sentencepiece_trainer import build_sentencepiece_model
from bert_tf.training.optimization import create_optimizer

import bpe_fixtures

FLAGS = pretrain_cli.define_flags(flags.FlagValues())  # the command's flags, on their own
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAMILY_FLAGFILES = sorted(glob.glob(os.path.join(REPO, "official_configs", "pretraining",
                                                 "*_style_*.flags")))


def flagfile_values(path):
    """The flags of a flagfile, each parsed by its run_pretraining definition."""
    values = {}
    for line in open(path).read().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, value = line[2:].partition("=")
        assert name in FLAGS, f"{os.path.basename(path)}: --{name} is not a run_pretraining flag"
        values[name] = FLAGS[name].parser.parse(value)
    return values


def job_from(flagfile, **overrides):
    """The PretrainingConfig of a flagfile of official_configs/pretraining plus overrides."""
    values = {name: FLAGS[name].default for name in FLAGS}
    values.update(flagfile_values(os.path.join(REPO, "official_configs", "pretraining",
                                               flagfile)))
    values.update(overrides)
    return from_flat(PretrainingConfig, **values)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("family_corpus")
    documents = pydoc_documents()[:60]
    (root / "corpus.txt").write_text(format_documents(documents), encoding="utf-8")
    words = collections.Counter(w for doc in documents for sentence in doc
                                for w in re.findall(r"[a-z]+", sentence.lower()))
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?()[]{}'\"-_=+*/\\<>@#$%^&|~`"))
    tokens = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
              + [w for w, _ in words.most_common(300) if len(w) > 1])
    (root / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return {"root": root, "text": str(root / "corpus.txt"), "vocab": str(root / "vocab.txt"),
            "vocab_size": len(tokens)}


def tiny_config(path, vocab_size, **family):
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                        **family)
    config.to_json_file(str(path))
    return str(path)


SHORT_RUN = dict(max_seq_length=32, max_predictions_per_seq=5, train_batch_size=8,
                 eval_batch_size=8, num_train_steps=4, num_warmup_steps=1, steps_per_loop=4,
                 save_checkpoints_steps=4, do_eval=False, dtype="float32", max_eval_steps=2)


@pytest.mark.parametrize("path", FAMILY_FLAGFILES, ids=os.path.basename)
def test_family_flagfiles_use_real_flags_and_configs(path):
    values = flagfile_values(path)
    config = BertConfig.from_json_file(os.path.join(REPO, values["bert_config_file"]))
    recipe = os.path.basename(path).split("_style")[0]
    if recipe == "roberta":
        assert not values["use_next_sentence_label"] and values["full_sentences"]
        assert values["gradient_accumulation_steps"] > 1
        if "base" in path:  # the paper's optimizer and vocabulary (table 9)
            assert (values["adam_bias_correction"], values["adam_beta2"],
                    values["adam_epsilon"], values["clip_norm"]) == (True, 0.98, 1e-6, 0)
            assert values["vocab_file"].endswith("tokenizer.json")
    elif recipe == "albert":
        assert values["sentence_order_prediction"]
        if "base" in path:  # ALBERT's own kind of vocabulary
            assert values["vocab_file"].endswith(".model") and values["do_lower_case"]
        assert config.share_parameters == "all" and config.embedding_size < config.hidden_size
        if "demo" in path:  # raw text masked on the fly with ALBERT's n-grams
            job = job_from(os.path.basename(path))
            assert masking_recipe(job.task).ngram_mask == 3
            assert masking_recipe(job.task).span_length_weights() == [1.0, 0.5, 1 / 3]
        else:  # records, made with the n-grams (the command in its comment)
            assert "--ngram_mask=3" in open(path).read()
    elif recipe == "modernbert":
        assert not values["use_next_sentence_label"] and values["pack_sequences"]
        assert values["masked_lm_prob"] == 0.3
        assert config.position_embedding_type == "rotary"
        assert config.global_attn_every_n_layers == 3 and config.type_vocab_size == 0
    else:
        assert values["do_span_mask"] and values["span_boundary_objective"]
        assert not values["use_next_sentence_label"]
    assert values["max_seq_length"] <= config.max_position_embeddings


@pytest.mark.parametrize("name", ["time_budget_mini.flags", "time_budget_base.flags"])
def test_budget_recipes_use_real_flags_and_configs(name):
    values = flagfile_values(os.path.join(REPO, "official_configs", "pretraining", name))
    config = EncoderConfig.from_json_file(os.path.join(REPO, values["bert_config_file"]))
    # The levers that won the equal-time ablations (docs/pretraining.md).
    assert not values["use_next_sentence_label"] and values["full_sentences"]
    assert values["bag_of_words_weight"] == 1 and values["adam_bias_correction"]
    assert config.architecture == "modernbert" and config.hidden_dropout_prob == 0
    assert values["max_seq_length"] <= config.max_position_embeddings


def test_albert_base_config_is_the_papers():
    config = BertConfig.from_json_file(os.path.join(REPO, "official_configs", "models",
                                                    "albert_base.json"))
    assert (config.vocab_size, config.embedding_size, config.hidden_size,
            config.num_hidden_layers, config.share_parameters) == (30000, 128, 768, 12, "all")


def test_albert_style_run_on_sentence_order_records_with_span_boundaries(corpus, tmp_path):
    records = str(tmp_path / "sop.tfrecord")
    cpd.create_pretraining_data(corpus["text"], [records], corpus["vocab"],
                                options=cpd.PretrainingDataOptions(
                                    max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
                                    sentence_order_prediction=True, do_span_mask=True))
    config_file = tiny_config(tmp_path / "albert.json", corpus["vocab_size"], embedding_size=16,
                              share_parameters="all")
    out = tmp_path / "albert_run"
    job = job_from("albert_style_demo_tiny.flags", bert_config_file=config_file,
                   vocab_file=corpus["vocab"], input_file=records,
                   input_text_file=None, eval_input_text_file=None, ngram_mask=0,
                   output_dir=str(out), span_boundary_objective=True, **SHORT_RUN)
    results = pretrain(job)
    train = results["train"]
    assert results["global_step"] == 4
    assert {"sop_loss", "sentence_order_accuracy", "sbo_loss",
            "span_boundary_accuracy"} <= set(train)
    assert "nsp_loss" not in train
    assert all(np.isfinite(train[k]) for k in ("loss", "mlm_loss", "sop_loss", "sbo_loss"))
    np.testing.assert_allclose(train["loss"], train["mlm_loss"] + train["sop_loss"]
                               + train["sbo_loss"], rtol=1e-4)
    pretrainer = keras.saving.load_model(str(out / "pretrainer.keras"))
    assert pretrainer.sentence_order_prediction and pretrainer.span_boundary_objective
    saved = json.loads((out / "bert_config.json").read_text())
    assert (saved["embedding_size"], saved["share_parameters"]) == (16, "all")
    # The run directory warm-starts a fine-tuning model of the same family.
    classifier = BertClassifier(BertEncoder(BertConfig.from_json_file(config_file)), 2)
    report = warm_start(str(out), classifier)
    assert report.newly_initialized == ["classifier/kernel", "classifier/bias"]


def test_spanbert_and_roberta_style_run_on_raw_text_with_the_cls_bag_of_words(corpus,
                                                                             tmp_path):
    config_file = tiny_config(tmp_path / "sinusoidal.json", corpus["vocab_size"],
                              position_embedding_type="sinusoidal")
    out = tmp_path / "span_run"
    job = job_from("spanbert_style_demo_tiny.flags", bert_config_file=config_file,
                   vocab_file=corpus["vocab"], input_text_file=corpus["text"],
                   eval_input_text_file=None, output_dir=str(out),
                   full_sentences=True, gradient_accumulation_steps=2, bag_of_words_weight=0.5,
                   **SHORT_RUN)
    results = pretrain(job)
    train = results["train"]
    assert results["global_step"] == 4
    assert {"sbo_loss", "span_boundary_accuracy", "bow_loss"} <= set(train)
    assert not {"nsp_loss", "sop_loss"} & set(train)
    # A row's words under one distribution: about log(vocabulary) untrained, less once trained.
    assert 1.0 < train["bow_loss"] < np.log(corpus["vocab_size"]) + 0.5
    np.testing.assert_allclose(train["loss"], train["mlm_loss"] + train["sbo_loss"]
                               + 0.5 * train["bow_loss"], rtol=1e-4)
    record = json.loads((out / "bert_tf_run.json").read_text())
    assert record["settings"]["bag_of_words_weight"] == 0.5
    encoder = keras.saving.load_model(str(out / "encoder.keras"))
    assert encoder.config.position_embedding_type == "sinusoidal"


def test_roberta_base_recipe_trains_on_raw_text_with_a_byte_level_bpe(corpus, tmp_path,
                                                                      monkeypatch):
    """roberta_style_base.flags as written but for the model's size and the run's length: a
    cased byte-level BPE tokenizer.json, raw text packed as full sentences, accumulated
    micro-batches and RoBERTa's Adam (bias-corrected, beta2 0.98, epsilon 1e-6, no clipping)."""
    bpe = bpe_fixtures.BPE_TOKENIZER_JSON
    config_file = tiny_config(tmp_path / "c.json", load_tokenizer(bpe).vocab_size)
    out = tmp_path / "roberta_run"
    job = job_from("roberta_style_base.flags", bert_config_file=config_file, vocab_file=bpe,
                   input_text_file=corpus["text"], output_dir=str(out),
                   **dict(SHORT_RUN, gradient_accumulation_steps=2))
    built = []

    def recording_create_optimizer(*args, **kwargs):
        built.append(create_optimizer(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(pretraining, "create_optimizer", recording_create_optimizer)
    results = pretrain(job)
    # The optimizer the run trained with.
    assert [(o.bias_correction, o.beta_1, o.beta_2, o.epsilon, o.clip_norm)
            for o in built] == [(True, 0.9, 0.98, 1e-6, None)]
    assert results["global_step"] == 4
    assert not {"nsp_loss", "sop_loss"} & set(results["train"])
    # Untrained: about log(vocabulary size) = 8.1 nats per masked token.
    assert 6.0 < results["train"]["mlm_loss"] < 10.0, results["train"]
    assert sorted(n for n in os.listdir(out) if n.startswith(("tokenizer", "vocab"))) == [
        "tokenizer.json"]


@pytest.fixture(scope="module")
def sentencepiece_model(corpus):
    """A SentencePiece model of the corpus, as `bert-tf-build-vocab --tokenizer=sentencepiece`
    learns it (ALBERT's layout: <pad> <unk> [CLS] [SEP] [MASK])."""
    path = corpus["root"] / "30k-clean.model"
    path.write_bytes(build_sentencepiece_model(corpus["text"], 400))
    return str(path)


def test_albert_base_recipe_trains_on_sentencepiece_ngram_records(corpus, sentencepiece_model,
                                                                   tmp_path):
    """albert_style_base.flags as written but for the model's size and the run's length: a
    SentencePiece vocabulary, sentence-order records with n-gram masks made by
    create_pretraining_data from it, accumulated micro-batches, LAMB."""
    tokenizer = load_tokenizer(sentencepiece_model)
    records = str(tmp_path / "sop.tfrecord")
    cpd.create_pretraining_data(corpus["text"], [records], sentencepiece_model,
                                options=cpd.PretrainingDataOptions(
                                    max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
                                    sentence_order_prediction=True, ngram_mask=3))
    # Masks cover whole words by ALBERT's rule for SentencePiece pieces: a masked piece that
    # continues a word has the piece before it masked, and the piece after a masked run does
    # not continue the run's last word.
    continuation = tokenizer.continuation_ids()
    specials = {tokenizer.cls_id, tokenizer.sep_id}
    joined = 0
    for record in tf.data.TFRecordDataset(records).take(100):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        ids = list(example["input_ids"].int64_list.value)
        assert ids[0] == tokenizer.cls_id == 2 and ids.count(tokenizer.sep_id) == 2
        positions = [p for p in example["masked_lm_positions"].int64_list.value if p]
        for p, original in zip(positions, example["masked_lm_ids"].int64_list.value):
            ids[p] = original
        masked = set(positions)
        assert masked and all(ids[p] != tokenizer.pad_id for p in masked)
        for p in masked:
            if ids[p] in continuation:
                # (A segment cut at its front may begin inside a word.)
                assert p - 1 in masked or ids[p - 1] in specials, (
                    p, tokenizer.convert_ids_to_tokens(ids))
                joined += 1
            if p + 1 not in masked and p + 1 < len(ids):
                assert ids[p + 1] not in continuation, (p, tokenizer.convert_ids_to_tokens(ids))
    assert joined > 50  # words of several pieces were masked whole
    config_file = tiny_config(tmp_path / "albert.json", tokenizer.vocab_size, embedding_size=16,
                              share_parameters="all")
    out = tmp_path / "albert_run"
    job = job_from("albert_style_base.flags", bert_config_file=config_file,
                   vocab_file=sentencepiece_model, input_file=records, output_dir=str(out),
                   **dict(SHORT_RUN, gradient_accumulation_steps=2))
    assert job.task.do_lower_case
    results = pretrain(job)
    train = results["train"]
    assert results["global_step"] == 4
    assert {"mlm_loss", "sop_loss"} <= set(train) and "nsp_loss" not in train
    # Untrained: about log(400) = 6.0 nats per masked token.
    assert 4.5 < train["mlm_loss"] < 8.0, train
    # The run directory keeps the model as spiece.model and records its fingerprint.
    assert sorted(n for n in os.listdir(out)
                  if n.startswith(("tokenizer", "vocab", "spiece"))) == ["spiece.model"]
    assert (out / "spiece.model").read_bytes() == open(sentencepiece_model, "rb").read()
    record = json.loads((out / "bert_tf_run.json").read_text())
    assert record["do_lower_case"] is True
    assert record["tokenizer_sha256"] == tokenizer.digest()


@pytest.mark.parametrize("overrides, message", [
    (dict(use_next_sentence_label=False, sentence_order_prediction=True),
     "--sentence_order_prediction trains the pair head: it needs --use_next_sentence_label=true"),
    (dict(full_sentences=True, use_next_sentence_label=True),
     "--full_sentences packs single sequences: it needs --use_next_sentence_label=false"),
    (dict(span_boundary_objective=True, do_span_mask=False),
     "--span_boundary_objective needs span boundaries: add --do_span_mask for raw text input"),
    (dict(bag_of_words_weight=-0.5),
     "--bag_of_words_weight=-0.5 must be >= 0 and finite (0: off)"),
    (dict(bag_of_words_weight=1.0, span_boundary_objective=False, do_span_mask=False,
          pack_sequences=True),
     "--bag_of_words_weight trains one [CLS] per row: it cannot be combined with "
     "--pack_sequences (several instances per row)"),
    (dict(do_span_mask=True, input_text_file=None, input_file="records.tfrecord"),
     "--do_span_mask masks or packs raw text: it needs --input_text_file"),
    (dict(ngram_mask=3),
     "--ngram_mask and --do_span_mask are two span-length distributions (ALBERT's and "
     "SpanBERT's): pass one of them"),
    (dict(ngram_mask=3, do_span_mask=False, span_boundary_objective=False, input_text_file=None,
          input_file="records.tfrecord"),
     "--ngram_mask masks or packs raw text: it needs --input_text_file"),
])
def test_family_flag_conflicts_are_named(corpus, tmp_path, overrides, message):
    config_file = tiny_config(tmp_path / "c.json", corpus["vocab_size"])
    values = dict(SHORT_RUN, bert_config_file=config_file, vocab_file=corpus["vocab"],
                  input_text_file=corpus["text"], eval_input_text_file=None,
                  output_dir=str(tmp_path / "out"))
    job = job_from("spanbert_style_demo_tiny.flags", **dict(values, **overrides))
    with pytest.raises(FlagValueError) as error:
        pretrain(job)
    assert message in str(error.value)


def test_span_boundary_objective_on_records_without_spans_is_named(corpus, tmp_path):
    records = str(tmp_path / "plain.tfrecord")
    cpd.create_pretraining_data(corpus["text"], [records], corpus["vocab"],
                                options=cpd.PretrainingDataOptions(
                                    max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1))
    job = job_from("spanbert_style_demo_tiny.flags",
                   bert_config_file=tiny_config(tmp_path / "c.json", corpus["vocab_size"]),
                   vocab_file=corpus["vocab"], input_file=records, input_text_file=None,
                   eval_input_text_file=None, do_span_mask=False,
                   output_dir=str(tmp_path / "out"), **SHORT_RUN)
    with pytest.raises(FlagValueError) as error:
        pretrain(job)
    assert str(error.value) == (
        f'--input_file={records}: {records}: the first record has no feature '
        '"span_left_boundaries" (expected int64_list of length 5 (max_predictions_per_seq)); '
        "the span-boundary objective needs records made with create_pretraining_data "
        "--do_span_mask.")
