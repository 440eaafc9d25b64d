"""load_embedder (TextEmbedder.from_pretrained, bert-tf-embed --init_checkpoint) from the models
bert_tf itself saves: a task's save, a fine-tuning run."""

import os

import numpy as np
import pytest

import bert_tf
from bert_tf.interop import InteropError
from bert_tf.interop.sentence_transformers import load_embedder
from bert_tf.modeling import BertSentenceEmbedder
from bert_tf.tasks import TextEmbedder
from embedding_helpers import saved_classifier

CLASSIFY_RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "fixtures", "runs_v0_1", "classifier")
TEXTS = ["alice was in paris .", "the movie was very dull"]


def _same_weights(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights()))


def test_a_saved_classifier_embeds_with_its_encoder(tmp_path):
    """POOR: refused ("--init_checkpoint=...: the directory holds no checkpoint")."""
    saved, trained = saved_classifier(tmp_path / "saved")
    embedder = TextEmbedder.from_pretrained(saved)
    assert embedder.model.pooling == ("mean",) and embedder.model.normalize
    assert _same_weights(embedder.model.encoder, trained.encoder)
    expected = TextEmbedder(BertSentenceEmbedder(trained.encoder), embedder.tokenizer,
                            max_seq_length=embedder.max_seq_length)
    np.testing.assert_allclose(embedder.predict(TEXTS), expected.predict(TEXTS), atol=1e-6)


def test_a_saved_embedder_keeps_its_pooling_and_length(tmp_path):
    """POOR: refused, as a saved classifier was; its model.keras and task_info.json say how
    its vectors are made."""
    _, trained = saved_classifier(tmp_path / "classifier")
    model = BertSentenceEmbedder(trained.encoder, pooling="cls", normalize=False)
    original = TextEmbedder(model, str(tmp_path / "classifier" / "vocab.txt"), max_seq_length=12)
    saved = original.save(str(tmp_path / "embedder"))
    embedder = TextEmbedder.from_pretrained(saved)
    assert embedder.model.pooling == ("cls",) and not embedder.model.normalize
    assert embedder.max_seq_length == 12
    np.testing.assert_allclose(embedder.predict(TEXTS), original.predict(TEXTS), atol=1e-6)


def test_a_classify_run_embeds_with_its_encoder():
    """POOR: "BertSentenceEmbedder is not a bert_tf model" (weights.same_kind had no
    embedder); the encoder is the one bert_tf.load_model reads, mean-pooled."""
    embedder = TextEmbedder.from_pretrained(CLASSIFY_RUN)
    assert embedder.model.pooling == ("mean",) and embedder.model.normalize
    assert _same_weights(embedder.model.encoder, bert_tf.load_model(CLASSIFY_RUN).encoder)
    assert embedder.predict(TEXTS).shape == (2, embedder.model.embedding_dim)


def test_a_python_caller_gets_errors_naming_the_path(tmp_path):
    with pytest.raises(InteropError) as error:
        load_embedder(str(tmp_path), flag=None)
    assert str(error.value).startswith(f"{tmp_path}: the directory holds no checkpoint: ")
    from bert_tf.tasks import TextEmbedder

    with pytest.raises(InteropError) as error:
        TextEmbedder.from_pretrained(tmp_path)
    assert str(error.value).startswith(f"{tmp_path}: the directory holds no checkpoint: ")
    saved, _ = saved_classifier(tmp_path / "saved")
    with pytest.raises(InteropError) as error:
        load_embedder(saved, max_seq_length=64, flag=None)
    assert str(error.value) == ("max_seq_length=64 must be in [3, max_position_embeddings=32] "
                                "of the model")
