"""The small problem the training tests share (tests/training, tests/backends): 96 points in 6
dimensions labelled by the sign of x0 * x1, which no linear model separates, so a fit shows the
hidden layer trained. Backend-neutral (keras.ops), so the backend matrix runs it on JAX too.
"""

import dataclasses

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert_tf.training import runtime as runtime_module
from bert_tf.training.controller import train as controller_train
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.optimization import create_optimizer

_RNG = np.random.RandomState(0)
X = _RNG.randn(96, 6).astype("float32")
Y = (X[:, 0] * X[:, 1] > 0).astype("int32")
GLOBAL_BATCH = 16
LOOP_FIELDS = {f.name for f in dataclasses.fields(TrainLoopConfig)}


def make_runtime():
    """The runtime of the Keras backend this process runs on, one process."""
    class Settings:
        backend = keras.backend.backend()
        coordinator_address = num_processes = process_id = None
    return runtime_module.create(Settings())


def build(scope, num_train_steps=200, learning_rate=1e-2, seed=0, dropout=0.0, budget=False):
    """(model, optimizer) made under `scope` (a strategy's or a runtime's), initialised from
    `seed`: Dense(32, tanh) [-> Dropout] -> LayerNorm -> Dense(2) logits; the optimizer
    warms up for 10 steps (for 10% of a time budget when `budget`)."""
    keras.utils.set_random_seed(seed)
    with scope:
        inputs = keras.Input((6,))
        hidden = keras.layers.Dense(32, activation="tanh", name="hidden")(inputs)
        if dropout:
            hidden = keras.layers.Dropout(dropout, name="dropout")(hidden)
        hidden = keras.layers.LayerNormalization(name="layer_norm")(hidden)
        model = keras.Model(inputs, keras.layers.Dense(2, name="logits")(hidden))
        optimizer = create_optimizer(learning_rate, num_train_steps, 10,
                                     budget_warmup_proportion=0.1 if budget else None)
    # The input's shuffle reads TensorFlow's global seed: the same whatever `seed` initialised.
    tf.random.set_seed(0)
    return model, optimizer


def tf_build(strategy, num_train_steps=300, **settings):
    """build() under a tf.distribute strategy's scope (the TensorFlow runner's tests)."""
    return build(strategy.scope(), num_train_steps=num_train_steps, **settings)


def tf_train(model, optimizer, strategy, output_dir, num_train_steps, steps_per_loop=25,
             **settings):
    """train() on the TensorFlow runtime of `strategy`."""
    return train(runtime_module.on_tensorflow(strategy), model, optimizer, output_dir,
                 num_train_steps, steps_per_loop=steps_per_loop, **settings)


def dataset_fn(input_context):
    """The training input: shuffled, repeated batches of GLOBAL_BATCH split over replicas."""
    batch = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
    # The runners iterate it without autotuning (bert_tf.tf_data_options.without_autotuning).
    dataset = tf.data.Dataset.from_tensor_slices({"x": X, "y": Y})
    return dataset.shuffle(96, seed=3).repeat().batch(batch, drop_remainder=True)


def eval_dataset_fn(input_context):
    """Every point once, in 3 batches of 32."""
    del input_context
    return tf.data.Dataset.from_tensor_slices({"x": X, "y": Y}).batch(32)


def loss_fn(model, batch, training):
    """The controller's per-batch contract: mean loss, correct predictions, examples."""
    logits = ops.cast(model(batch["x"], training=training), "float32")
    labels = ops.cast(batch["y"], "int32")
    nll = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    correct = ops.cast(ops.equal(ops.cast(ops.argmax(logits, -1), "int32"), labels), "float32")
    return {"loss": ops.mean(nll), "correct": ops.sum(correct),
            "count": ops.cast(ops.shape(labels)[0], "float32")}


def metrics(sums, count):
    return {"loss": sums["loss"] / count, "accuracy": sums["correct"] / sums["count"]}


def train(runtime, model, optimizer, output_dir, num_train_steps, steps_per_loop=20,
          save_checkpoints_steps=50, **settings):
    """controller.train on the toy problem: TrainLoopConfig fields among `settings` go to the
    loop config, the rest to train()."""
    loop = dict(steps_per_loop=steps_per_loop, save_checkpoints_steps=save_checkpoints_steps,
                global_batch_size=GLOBAL_BATCH)
    loop.update({k: settings.pop(k) for k in list(settings) if k in LOOP_FIELDS})
    settings.setdefault("loss_fn", loss_fn)
    settings.setdefault("dataset_fn", dataset_fn)
    return controller_train(
        runtime=runtime, model=model, optimizer=optimizer,
        output_dir=str(output_dir), metrics_fn=metrics,
        loop_config=TrainLoopConfig(num_train_steps, **loop), **settings)


def weights(model):
    """The model's weights as NumPy arrays."""
    return [ops.convert_to_numpy(v) for v in model.weights]
