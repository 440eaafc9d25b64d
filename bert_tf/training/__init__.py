"""Training: optimizers and schedules, distribution strategies, checkpoints, the train loop."""

from bert_tf.training.checkpointing import CheckpointError, warm_start
from bert_tf.training.distribute import get_strategy
from bert_tf.training.loop import (NonFiniteLossError, TrainingPreempted, TrainLoopConfig,
                                   evaluate, train)
from bert_tf.training.optimization import (AdamWeightDecay, Lamb, WarmupLinearDecay,
                                           create_optimizer)
from bert_tf.training.precision import DynamicLossScaleOptimizer

__all__ = ["AdamWeightDecay", "CheckpointError", "DynamicLossScaleOptimizer", "Lamb",
           "NonFiniteLossError", "TrainLoopConfig", "TrainingPreempted", "WarmupLinearDecay",
           "create_optimizer",
           "evaluate", "get_strategy", "train", "warm_start"]
