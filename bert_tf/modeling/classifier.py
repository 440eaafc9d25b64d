"""BertClassifier: sentence / sentence-pair classification (one label or several) or regression
from the pooled [CLS] vector."""

import keras

from bert_tf.modeling.dropout import FusedDropout
from bert_tf.modeling.task_model import EncoderTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(EncoderTaskModel):
    """Sentence / sentence-pair classification (or regression) from the pooled [CLS] vector.

    logits = dense(dropout(pooled_output)): float32 [B, num_classes]. With num_classes=1 the
    output is a regression score [B, 1] (STS-B). With `multi_label` every class is a yes/no
    question of its own: its probability is sigmoid(logit), and any number of classes may
    apply to a text (topics, tags, toxicity kinds). The dense layer is `classifier`
    (kernel [H, C]; the original run_classifier.py's `output_weights` [C, H] transposed).

    `compile()` without a loss picks the usual one: sparse categorical cross-entropy on logits
    with accuracy for classes, binary cross-entropy on logits with accuracy over the B x C
    yes/no decisions for multi-label, mean squared error for regression. `fit` takes
    `(features, labels)` with features the encoder's input dict and int labels [B] (multi-hot
    float [B, C] for multi-label, float [B] for regression).

    Args:
      encoder: a `BertEncoder` (pre-trained or fresh).
      num_classes: C; 1 for regression.
      dropout_rate: dropout before the dense layer (default: the config's hidden_dropout_prob).
      multi_label: independent sigmoid classes instead of one softmax over them (C >= 2).
      **kwargs: `name`, `trainable`.

    Examples:

    >>> from bert_tf.config import BertConfig
    >>> from bert_tf.modeling import BertEncoder
    >>> model = BertClassifier(BertEncoder(BertConfig.from_preset("bert_tiny")), num_classes=3)
    >>> ids = keras.ops.ones((2, 8), "int32")
    >>> tuple(model({"input_word_ids": ids, "input_mask": ids,
    ...              "input_type_ids": keras.ops.zeros_like(ids)}).shape)
    (2, 3)
    """

    text_task = "TextClassifier"

    def __init__(self, encoder, num_classes, dropout_rate=None, multi_label=False, **kwargs):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"BertClassifier: num_classes={num_classes!r} must be an int >= 1")
        if multi_label and num_classes < 2:
            raise ValueError(f"BertClassifier: multi_label needs num_classes >= 2, got "
                             f"{num_classes}")
        self.num_classes = num_classes
        self.multi_label = bool(multi_label)
        kwargs.setdefault("name", "bert_classifier")
        super().__init__(encoder, dropout_rate, **kwargs)

    def _head(self, encoder, encoder_outputs, config, policy):
        pooled_bh = FusedDropout(self._head_dropout, dtype=policy, name="dropout")(
            encoder_outputs["pooled_output"])
        logits_bc = self._dense(self.num_classes, config, policy, "classifier")(pooled_bh)
        return keras.layers.Activation("linear", dtype="float32", name="logits")(logits_bc)

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        if loss is None:
            if self.num_classes == 1:
                loss = keras.losses.MeanSquaredError()
            elif self.multi_label:
                loss = keras.losses.BinaryCrossentropy(from_logits=True)
                if metrics is None:
                    # Logits: a label is predicted where its logit is above 0 (probability 0.5).
                    metrics = [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)]
            else:
                loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                if metrics is None:
                    metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        config = dict(super().get_config(), num_classes=self.num_classes)
        if self.multi_label:
            # Only when set: model.keras files of single-label classifiers stay as they were.
            config["multi_label"] = True
        return config
