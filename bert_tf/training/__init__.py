"""Training: optimizers and schedules, distribution strategies, checkpoints, the train loops.

The names below load on first use: the optimizers and schedules (training.optimization) import
where only JAX and Keras are installed; the tf.distribute loop, strategies and checkpoints need
TensorFlow.
"""

from bert_tf import lazy_names

_LAZY = {
    "CheckpointError": "checkpointing", "warm_start": "checkpointing",
    "get_strategy": "distribute",
    "NonFiniteLossError": "stops", "TrainingPreempted": "stops", "TrainLoopConfig": "loop_config",
    "evaluate": "loop", "train": "loop",
    "AdamWeightDecay": "optimization", "Lamb": "optimization", "StableAdamW": "optimization",
    "WarmupLinearDecay": "optimization", "WarmupStableDecay": "optimization",
    "create_optimizer": "optimization",
    "DynamicLossScaleOptimizer": "precision",
}


__getattr__ = lazy_names.module_getattr(
    __name__, {name: f"bert_tf.training.{module}" for name, module in _LAZY.items()})


__all__ = sorted(_LAZY)
