"""Training: optimizers and schedules, distribution strategies, checkpoints, the train loops.

The names below load on first use: the optimizers and schedules (training.optimization) import
where only JAX and Keras are installed; the tf.distribute loop, strategies and checkpoints need
TensorFlow.
"""

import importlib

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


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bert_tf.training' has no attribute '{name}'")
    return getattr(importlib.import_module(f"bert_tf.training.{module}"), name)


__all__ = sorted(_LAZY)
