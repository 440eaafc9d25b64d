"""Keras layers of BERT: the embedding sum, the post-LN transformer block, the pre-training heads.

The BERT-family options live here too: fixed sinusoidal position embeddings, blocks that share
sub-layers across depth (ALBERT), a masked-LM head over narrower (factorized) embeddings, and
SpanBERT's span-boundary head.

Every layer works on the TensorFlow backend of Keras 3, serializes through `get_config`, and
keeps LayerNorm and softmax in float32 under a mixed (bfloat16/float16) dtype policy.
Sub-layer names mirror the original TF1 checkpoint names (see each class) so that a checkpoint
converter can map `bert/encoder/layer_3/attention/self/query/kernel` to
`transformer_layer_3/query/kernel` without guesswork.
"""

# The layers live in one module per part; this module re-exports them so that
# `from bert_tf.modeling import layers; layers.TransformerBlock` keeps working. The Keras
# registered names ("bert_tf>TransformerBlock", ...) do not depend on the module.
from bert_tf.modeling.activations import get_activation  # noqa: F401
from bert_tf.modeling.embeddings import (  # noqa: F401
    BertEmbeddings, PositionEmbedding, SinusoidalPositionEmbedding)
from bert_tf.modeling.heads import MaskedLMHead, SpanBoundaryHead  # noqa: F401
from bert_tf.modeling.initializers import truncated_normal  # noqa: F401
from bert_tf.modeling.layer_norm import FusedLayerNorm  # noqa: F401
from bert_tf.modeling.transformer_block import AttentionBias, TransformerBlock  # noqa: F401
