"""BertTokenClassifier: token tagging (NER, POS), class logits for every token."""

import keras

from bert_tf.modeling.dropout import FusedDropout
from bert_tf.modeling.task_model import EncoderTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(EncoderTaskModel):
    """Token tagging (NER, POS): class logits for every token.

    logits = dense(dropout(sequence_output)): float32 [B, S, num_classes], dense layer
    `classifier`. `compile()` without a loss uses sparse categorical cross-entropy on logits;
    labels are int [B, S] and a `sample_weight` [B, S] (1 on the first piece of each word, 0
    elsewhere, as the fine-tuning data gives it) keeps padding and continuation pieces out of
    the loss.

    Args:
      encoder: a `BertEncoder`.
      num_classes: number of tags C.
      dropout_rate: dropout before the dense layer (default: the config's hidden_dropout_prob).
      **kwargs: `name`, `trainable`.
    """

    text_task = "TokenTagger"

    def __init__(self, encoder, num_classes, dropout_rate=None, **kwargs):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"BertTokenClassifier: num_classes={num_classes!r} must be an "
                             "int >= 2")
        self.num_classes = num_classes
        kwargs.setdefault("name", "bert_token_classifier")
        super().__init__(encoder, dropout_rate, **kwargs)

    def _uses_pooler(self):
        return False

    def _head(self, encoder, encoder_outputs, config, policy):
        sequence_bsh = FusedDropout(self._head_dropout, dtype=policy, name="dropout")(
            encoder_outputs["sequence_output"])
        logits_bsc = self._dense(self.num_classes, config, policy, "classifier")(sequence_bsh)
        return keras.layers.Activation("linear", dtype="float32", name="logits")(logits_bsc)

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        if loss is None:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            if metrics is None:
                kwargs.setdefault("weighted_metrics", [
                    keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        return dict(super().get_config(), num_classes=self.num_classes)
