"""The training checkpoints a run directory holds: TensorFlow's ckpt-<step> prefixes and the JAX
step runner's ckpt-<step>.orbax (or an older bert_tf's .npz), and which backend wrote them."""

import os

from bert_tf import fileio
from bert_tf.file_names import (JAX_CHECKPOINT_SUFFIX, JAX_CHECKPOINT_SUFFIXES,
                                JAX_NPZ_CHECKPOINT_SUFFIX, checkpoint_name,
                                checkpoint_name_step, path)


def checkpoint_prefixes(directory):
    """Prefixes of the ckpt-<step> training checkpoints in `directory`, oldest first."""
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    found = []
    for name in fileio.listdir(directory):
        step = checkpoint_name_step(name, ".index")
        if step is not None:
            found.append((step, path(directory, name[:-len(".index")])))
    return [prefix for _, prefix in sorted(found)]


def jax_checkpoint_file(directory, step):
    """The path of the JAX step runner's checkpoint of `step` in `directory`: the Orbax
    directory, or a .npz file of an older bert_tf when only that exists."""
    orbax = path(directory, checkpoint_name(step, JAX_CHECKPOINT_SUFFIX))
    npz = path(directory, checkpoint_name(step, JAX_NPZ_CHECKPOINT_SUFFIX))
    return npz if not fileio.exists(orbax) and fileio.exists(npz) else orbax


def jax_checkpoint_steps(directory):
    """Steps of the JAX step runner's checkpoints in `directory` (ckpt-<step>.orbax, or an older
    bert_tf's ckpt-<step>.npz), oldest first."""
    directory = str(directory)
    if not fileio.isdir(directory):
        return []
    steps = set()
    for name in fileio.listdir(directory):
        name = name.rstrip("/")
        for suffix in JAX_CHECKPOINT_SUFFIXES:
            step = checkpoint_name_step(name, suffix)
            if step is not None:
                steps.add(step)
    return sorted(steps)


def checkpoint_names(directory):
    """The names of `directory`'s training checkpoints, oldest first: ckpt-<step> (TensorFlow's
    prefixes), then the JAX step runner's (ckpt-<step>.orbax, or .npz)."""
    return ([os.path.basename(prefix) for prefix in checkpoint_prefixes(directory)]
            + [os.path.basename(jax_checkpoint_file(directory, step))
               for step in jax_checkpoint_steps(directory)])


def checkpoint_backend(directory):
    """The Keras backend whose training loop wrote `directory`'s checkpoints: "tensorflow"
    (ckpt-<step>.index), "jax" (ckpt-<step>.orbax or .npz), or None when there is none."""
    if checkpoint_prefixes(directory):
        return "tensorflow"
    if jax_checkpoint_steps(directory):
        return "jax"
    return None


def has_checkpoint(directory):
    """True when `directory` holds a training checkpoint to resume from (ckpt-<step>.index,
    or the JAX step runner's ckpt-<step>.orbax / .npz)."""
    return checkpoint_backend(directory) is not None

