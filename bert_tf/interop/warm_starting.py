"""Warm-starting any bert_tf model from any BERT checkpoint format: what --init_checkpoint reads.

`warm_start(init_checkpoint, model)` accepts
  - an original TF1 checkpoint prefix (`.../bert_model.ckpt`),
  - a Hugging Face directory (config.json + model.safetensors),
  - a keras-hub preset directory or a `.keras` file of a keras-hub BertBackbone/BertMaskedLM,
  - a bert_tf training checkpoint (prefix, or the directory run_pretraining writes:
    tf.train.Checkpoint(model=..., optimizer=...); the newest checkpoint is used),
  - a bert_tf directory without checkpoints this backend reads: the model saved in it
    (model.keras, else pretrainer.keras, else encoder.keras: a task's save, a finished JAX
    run, what bert-tf-convert-checkpoint writes),
  - a `.keras` file of a bert_tf model, or a `.weights.h5` file,
and loads it into a BertPretrainer, ElectraPretrainer, BertEncoder or any task model (an
ELECTRA run's discriminator is its encoder). The encoder must load
completely; heads load where the checkpoint has a matching one and otherwise stay newly
initialised. What was loaded, newly initialised and unused is logged and returned.
"""

import json
import os
import warnings

import keras
import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf import fileio, keras_files, model_directory, run_directory
from bert_tf.config import EncoderConfig
from bert_tf.fileio import named
from bert_tf.interop import albert, huggingface, kerashub, tf1, weights
from bert_tf.interop.weights import InteropError
from bert_tf.modeling import BertPretrainer, ElectraPretrainer, Encoder, build_encoder
from bert_tf.text import validate_case_matches_checkpoint

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_BERT_CONFIG_FILE = run_directory.CONFIG_FILE
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# An ElectraPretrainer's generator head kernel [G, E] in a training checkpoint.
_ELECTRA_GENERATOR_KERNEL = "model/generator_head/transform/_kernel"
# Structural fields: a difference means the weights cannot mean the same thing.
_STRUCTURE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size",
                     "embedding_width", "share_parameters", "position_embedding_type",
                     "norm_placement", "feed_forward_type", "use_bias", "norm_bias",
                     "final_layer_norm", "pooler_type")
# Fields that change what the weights compute without changing them (the model's own apply).
_BEHAVIOUR_FIELDS = ("local_attention_window", "global_attn_every_n_layers", "global_rope_theta",
                     "local_rope_theta", "classifier_pooling")


def warm_start(init_checkpoint, model, do_lower_case=None, allow_pickle=False, *,
               flag="--init_checkpoint"):
    """Loads the weights of `init_checkpoint` into `model` and reports what it did.

    Args:
      init_checkpoint: a path in any format listed in the module docstring.
      model: a BertPretrainer, BertEncoder, BertClassifier, BertSpanLabeler,
        BertTokenClassifier or BertSentenceEmbedder, built (as all bert_tf models are on
        construction).
      do_lower_case: the tokenizer casing the caller uses; checked against the checkpoint's
        (tokenizer_config.json do_lower_case, a keras-hub tokenizer's lowercase, or an original
        checkpoint's directory name such as uncased_L-12_H-768_A-12). None skips the check.
      allow_pickle: let a Hugging Face directory with only pytorch_model.bin load (needs torch).
      flag: the flag `init_checkpoint` came from, named in errors (None: the path alone).

    Returns:
      weights.WarmStartReport (also logged): variables loaded, variables newly initialized,
      checkpoint tensors unused (optimizer slots included).

    Raises:
      InteropError (a bert_tf.training.CheckpointError): no checkpoint at the path, a casing
        or config mismatch, a missing encoder weight, or a shape that differs from the model's.
    """
    init_checkpoint = str(init_checkpoint)
    if do_lower_case is not None:
        _check_casing(init_checkpoint, do_lower_case)
    source = open_source(init_checkpoint, model, allow_pickle=allow_pickle, flag=flag)
    _check_config(source, weights.encoder_of(model).config)
    return weights.transfer(source, model, strict=False)


def checkpoint_config(init_checkpoint, *, flag="--init_checkpoint"):
    """The config a checkpoint was written with (a BertConfig or ModernBertConfig), or None
    when the checkpoint does not say.

    Reads bert_config.json beside a TF1 or bert_tf checkpoint (or the albert_config.json of an
    original ALBERT release), a Hugging Face config.json, a keras-hub preset's config, or the
    config stored in a `.keras` file; so a CLI can build the model for `warm_start` when no
    --bert_config_file is given. `flag`: as warm_start's.
    """
    path = _resolve(str(init_checkpoint), flag)
    if path.endswith(".keras"):
        return _keras_file_config(path, flag)
    if fileio.isdir(path):
        if kerashub.is_preset_dir(path):
            return kerashub.config_from_backbone(kerashub.load_keras_hub(path)[0])
        return huggingface.read_config(path)[0]
    config = _config_beside(path)
    if config is not None:
        return config
    albert_config = file_beside(path, albert.ALBERT_CONFIG_FILE)
    if albert_config:
        return albert.read_albert_config(albert_config)
    return None


def file_beside(path, name):
    """The file `name` beside checkpoint `path` (a prefix or file), or in its run's directory
    for RUN/best/model-N (best/ holds only weights and metrics.json); None when neither has
    it."""
    for directory in run_directory.model_runs(None, path):
        candidate = os.path.join(directory, name)
        if tf.io.gfile.exists(candidate):
            return candidate
    return None


def check_weights_readable(init_checkpoint, *, flag="--init_checkpoint"):
    """Refuses, before a command takes its output directory, an --init_checkpoint it would
    misread or cannot start from (InteropError, or model_directory.ModelFileError for a
    .keras file that is no readable archive): a directory holding models of two formats, an
    export, only checkpoints this backend cannot read (_resolve), a truncated or corrupt
    Hugging Face weights file; other formats are checked when loaded. `flag`: as
    warm_start's."""
    path = _resolve(str(init_checkpoint), flag)
    if path.endswith(".keras") and fileio.exists(path):
        _keras_file_module(path, flag)
    elif fileio.isdir(path) and not kerashub.is_preset_dir(path):
        huggingface.check_weight_files(path)


def _resolve(path, flag):
    """Turns a directory into the file or prefix to read; HF and keras-hub dirs stay dirs.

    A directory without training checkpoints gives its saved model, as bert_tf.load_model
    reads it (run_directory.MODEL_FILES: a task's save or a run's model.keras, then
    pretrainer.keras, encoder.keras).

    Raises:
      InteropError naming the directory (as `flag` gave it): models of two formats in it (one
      would be read without a word), an export, or only checkpoints this backend's Keras
      cannot read.
    """
    if os.path.basename(path) in (huggingface.SAFETENSORS_FILE, huggingface.PICKLE_FILE,
                                  huggingface.SAFETENSORS_INDEX_FILE):
        return os.path.dirname(path)
    if not fileio.isdir(path):
        return path
    _check_one_model(path, flag)
    if kerashub.is_preset_dir(path) or tf.io.gfile.exists(
            os.path.join(path, huggingface.CONFIG_FILE)):
        return path
    latest = tf.train.latest_checkpoint(path)
    if latest:
        return (latest if keras.backend.backend() == "tensorflow"
                else _model_file_of_run(path, flag))
    # A task's save, a conversion, a finished JAX run (tf.train lists no Orbax checkpoint).
    model_file = _saved_model_file(path)
    if model_file:
        return model_file
    indexes = tf.io.gfile.glob(os.path.join(path, "*.index"))
    if len(indexes) == 1:
        return indexes[0][:-len(".index")]
    where = named(path, flag)
    if run_directory.checkpoint_backend(path) == "jax":
        raise InteropError(
            f"{where} holds only training checkpoints of the JAX loop "
            f"({', '.join(run_directory.checkpoint_names(path))}), which only that run reads, "
            f"to resume (bert-tf-pretrain --backend=jax --output_dir={path}); a model starts "
            f"from the {', '.join(run_directory.MODEL_FILES[:-1])} or "
            f"{run_directory.MODEL_FILES[-1]} that a run writes when it ends, "
            f"and this run has not ended: finish it, then give {where}")
    raise InteropError(
        f"{where}: the directory holds no checkpoint: expected a Hugging Face model "
        f"(config.json + model.safetensors), a keras-hub preset, a `checkpoint` state file, "
        f"{', '.join(run_directory.MODEL_FILES[:-1])} or {run_directory.MODEL_FILES[-1]} "
        "(a bert_tf run's or a saved task's), or one <prefix>.index")


def _check_one_model(directory, flag):
    """A directory holding models of two formats (model_directory.check_one_model), or an
    export, is refused."""
    model_directory.check_one_model(directory, flag)
    found = model_directory.recognise(directory)
    if found is not None and found.kind in (model_directory.SAVED_MODEL, model_directory.LITERT):
        raise InteropError(
            f"{named(directory, flag)} holds {found}, a serving graph that a model "
            "does not start from: give the run or .keras model it was exported from (the "
            "--model_dir of bert-tf-export)")


def _saved_model_file(directory):
    """The .keras model a run saved in `directory` when it ended (run_directory.model_file),
    or None."""
    try:
        return run_directory.model_file(directory)
    except FileNotFoundError:
        return None


def _model_file_of_run(directory, flag):
    """The .keras model of a run whose training checkpoints are TensorFlow's, for a Keras on
    another backend, which cannot restore them."""
    candidate = _saved_model_file(directory)
    if candidate:
        logging.info("%s: reading %s, the model its run saved when it "
                     "ended (its TensorFlow training checkpoints are read on the TensorFlow "
                     "backend only)", named(directory, flag), os.path.basename(candidate))
        return candidate
    raise InteropError(
        f"{named(directory, flag)} holds only TensorFlow training checkpoints "
        f"({', '.join(run_directory.checkpoint_names(directory))}), which Keras on "
        f"{keras.backend.backend()} cannot restore, and none of the "
        f"{', '.join(run_directory.MODEL_FILES)} its run writes when it ends: finish the run "
        "(rerun its command on --backend=tensorflow), then give this directory again")


def open_source(init_checkpoint, model, allow_pickle=False, *, flag="--init_checkpoint"):
    """The WeightSource of any supported checkpoint path (see the module docstring).

    `model` is the model to be loaded: a bert_tf checkpoint or `.weights.h5` is restored into
    a model of the kind it holds, built from the config beside it (else `model`'s config).
    `flag`: as warm_start's.
    """
    path = _resolve(init_checkpoint, flag)
    if fileio.isdir(path):
        if kerashub.is_preset_dir(path):
            backbone, masked_lm, _, _ = kerashub.load_keras_hub(path)
            return kerashub.keras_hub_source(backbone, masked_lm, description=path)
        return huggingface.read_huggingface(path, allow_pickle=allow_pickle)
    if path.endswith(".keras") and str(_keras_file_module(path, flag)).startswith("keras_hub"):
        backbone, masked_lm, _, _ = kerashub.load_keras_hub(path)
        return kerashub.keras_hub_source(backbone, masked_lm, description=path)
    if not path.endswith((".keras", ".weights.h5")):
        _check_prefix(init_checkpoint, path, flag)
        if _OBJECT_GRAPH_KEY not in dict(fileio.list_checkpoint_variables(path)):
            return tf1.read_tf1_checkpoint(path)
    config = _config_beside(path) or weights.encoder_of(model).config
    loaded, unused, format = _load_bert_tf(path, config, model, flag)
    return weights.source_from_model(loaded, description=path, format=format, unused=unused)


def load_bert_tf(path, config=None, *, flag="--init_checkpoint"):
    """Loads a model saved by bert_tf: a .keras or .weights.h5 file, a training checkpoint.

    Args:
      path: a `.keras` file (any bert_tf model), a `.weights.h5` file (a BertPretrainer or
        BertEncoder), a tf.train.Checkpoint(model=...) prefix, or a directory: a run's is
        read as bert_tf.load_model reads it (the model its run saved when it ended:
        model.keras, else pretrainer.keras, else encoder.keras; else its newest checkpoint),
        another's the one checkpoint or weights file it holds.
      config: the config (BertConfig or ModernBertConfig) for files that hold no config
        (default: the bert_config.json beside them).
      flag: the flag `path` came from, named in errors (None: the path alone).

    Returns:
      The model: of the saved class for .keras files (a fine-tuning run's task model with its
      head); a BertPretrainer or BertEncoder for weights files and checkpoints (a task
      model's checkpoint gives its encoder, with a warning: it does not record its head's
      class; an ELECTRA run's its ElectraPretrainer).
    """
    path = str(path)
    # A run's saved model first, as load_model and bert-tf-export read a run: its newest
    # checkpoint holds a fine-tuned head under no class name, which would be dropped.
    resolved = ((_run_model_file(path, flag) if fileio.isdir(path) else None)
                or _resolve(path, flag))
    if not resolved.endswith(".keras"):
        config = config or _config_beside(resolved)
        if config is None:
            raise InteropError(f"{named(path, flag)}: no {_BERT_CONFIG_FILE} beside it; pass "
                               "the config")
        if not resolved.endswith(".weights.h5"):
            _check_prefix(path, resolved, flag)
            _check_object_based(path, resolved, flag)
    model, unused, _ = _load_bert_tf(resolved, config, None, flag)
    if any(name.startswith("model/") for name in unused):
        logging.warning("%s is a task model's training checkpoint, which does not record its "
                        "head's class: read its encoder only, without the head (the %s its run "
                        "saves when it ends holds both)", resolved, run_directory.MODEL_FILE)
    return model


def _run_model_file(directory, flag):
    """The .keras model a run saved in `directory` (load_model's choice), or None; a
    directory of two formats or an export is refused first."""
    _check_one_model(directory, flag)
    model_file = _saved_model_file(directory)
    if model_file:
        logging.info("%s: reading its saved model, %s", directory, os.path.basename(model_file))
    return model_file


def load_checkpoint(path, *, flag="--init_checkpoint"):
    """The model a checkpoint holds (bert_tf.load_model's reader of checkpoints).

    Args:
      path: a bert_tf training checkpoint (a prefix, or a run directory: the newest one) or
        .weights.h5 file, read as `load_bert_tf` reads it; or an original TF1 BERT checkpoint
        (a prefix, or the directory holding one), read by `tf1.load_tf1_checkpoint`. The
        bert_config.json beside it gives the model.
      flag: the flag `path` came from, named in errors (None: the path alone, as
        bert_tf.load_model names it).

    Returns:
      A BertPretrainer (a TF1 checkpoint with the MLM head, or a pre-training run's) or a
      BertEncoder.

    Raises:
      InteropError: naming the path and what is missing.
    """
    resolved = _resolve(str(path), flag)
    if not resolved.endswith((".keras", ".weights.h5")):
        _check_prefix(path, resolved, flag)
        if _OBJECT_GRAPH_KEY not in dict(fileio.list_checkpoint_variables(resolved)):
            return tf1.load_tf1_checkpoint(resolved)
    return load_bert_tf(resolved, flag=flag)


def _check_object_based(given, prefix, flag):
    """bert_tf writes object-based (TF2) checkpoints; a name-based one is another format."""
    names = {name for name, _ in tf.train.list_variables(prefix)}
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in names:
        return
    if any(name.startswith("bert/") for name in names):
        kind = "an original (TF1) BERT or ALBERT checkpoint"
        hint = "read it with --from=tf1 (or --from=albert)"
    else:
        kind = "a name-based checkpoint"
        hint = "bert_tf writes object-based checkpoints (tf.train.Checkpoint)"
    raise InteropError(f"{named(given, flag)} is {kind}, not a bert_tf checkpoint; {hint}")


def _check_prefix(given, prefix, flag):
    if not tf.io.gfile.exists(prefix + ".index"):
        raise InteropError(
            f"{named(given, flag)}: no checkpoint at {prefix} (expected a TF1 or "
            "bert_tf checkpoint prefix with a .index file, a Hugging Face or keras-hub "
            "directory, a .keras or a .weights.h5 file)")


def _config_beside(path):
    config_file = file_beside(path, _BERT_CONFIG_FILE)
    return EncoderConfig.from_json_file(config_file) if config_file else None


def _load_bert_tf(path, config, template, flag):
    """(model, unused checkpoint names, format) of a bert_tf .keras, .weights.h5 or checkpoint.

    `template` (a model or None): for files that do not record the model class, a model of
    its class and head shapes is tried first, so a task model's head can load.
    """
    if path.endswith(".keras"):
        _keras_file_module(path, flag)
        return keras_files.load_keras_file(path, named(path, flag)), [], "keras"
    if path.endswith(".weights.h5"):
        return _load_weights_file(path, config, template, flag), [], "weights_h5"
    if keras.backend.backend() != "tensorflow":
        raise InteropError(
            f"{named(path, flag)} is a TensorFlow training checkpoint, which Keras on "
            f"{keras.backend.backend()} cannot restore: give the .keras model its run wrote "
            f"when it ended (or its directory, {os.path.dirname(path) or '.'}), or run on "
            "--backend=tensorflow")
    shapes = {name.replace(_VALUE_SUFFIX, ""): tuple(shape)
              for name, shape in fileio.list_checkpoint_variables(path)}
    shapes.update(_model_variable_shapes(path))
    loaded, unused = _load_training_checkpoint(path, shapes, config, template, flag)
    return loaded, unused, "bert_tf_checkpoint"


def _model_variable_shapes(path):
    """{"model/<path>": shape} of every variable under the checkpoint's `model` object.

    A checkpoint stores each variable once, under the first path its writer found; when the
    optimizer tracks the trainable variables (as Keras optimizers do) that key is
    `optimizer/_trainable_variables/N`, so the model's own paths are read from the object graph.
    """
    reader = fileio.checkpoint_reader(path)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    checkpoint_shapes = reader.get_variable_to_shape_map()
    roots = [(c.node_id, "model") for c in graph.nodes[0].children if c.local_name == "model"]
    found, seen = {}, set()
    while roots:
        node_id, prefix = roots.pop(0)
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                found[prefix] = tuple(checkpoint_shapes[attribute.checkpoint_key])
        roots.extend((c.node_id, f"{prefix}/{c.local_name}") for c in node.children)
    return found


def _load_training_checkpoint(path, shapes, config, template, flag):
    """Restores a bert_tf tf.train.Checkpoint(model=...) into a model of the kind it holds."""
    model_names = [n for n in shapes if n.startswith("model/")]
    if any(n.startswith("model/masked_lm/") for n in model_names):
        has_nsp = any(n.startswith("model/next_sentence/") for n in model_names)
        candidates = [BertPretrainer(build_encoder(config), use_next_sentence_label=has_nsp)]
    elif _ELECTRA_GENERATOR_KERNEL in shapes:
        # An ELECTRA run's: the generator's width is its head's input width.
        candidates = [ElectraPretrainer(build_encoder(config),
                                        generator_hidden_size=shapes[_ELECTRA_GENERATOR_KERNEL][0])]
    elif any(n.startswith("model/embedding_layer/") for n in model_names):
        candidates = [build_encoder(config)]
    elif any(n.startswith("model/encoder/") for n in model_names):
        # A task model. The checkpoint does not record the head's class, so its head loads
        # into a model of the template's class whose head has the same shapes; else only the
        # encoder loads.
        candidates = [None]
        head_shapes = sorted(shapes[n] for n in model_names if not n.startswith("model/encoder/"))
        if (template is not None and not isinstance(template, Encoder)
                and _task_matches(path, template)):
            clone = weights.same_kind(template, build_encoder(config))
            encoder_ids = {id(v) for v in clone.encoder.weights}
            clone_head = [tuple(v.shape) for v in clone.weights if id(v) not in encoder_ids]
            if sorted(clone_head) == head_shapes:
                candidates.insert(0, clone)
    else:
        raise InteropError(f"{named(path, flag)}: a TF2 checkpoint without a bert_tf "
                           "model under `model` (expected tf.train.Checkpoint(model=...))")
    # optimizer/_trainable_variables/N are the model's own variables, listed under that key.
    optimizer_state = sorted(n for n in shapes if n.startswith("optimizer/")
                             and not n.startswith("optimizer/_trainable_variables/"))
    error = ""
    for donor in candidates:
        if donor is None:
            # Only the encoder of a task model: its head is reported as unused.
            donor = build_encoder(config)
            root = tf.Module()
            root.encoder = donor
            other = sorted(n for n in model_names if not n.startswith("model/encoder/"))
        else:
            root, other = donor, []
        try:
            # read(), not restore(): restore() adds a save_counter, which checkpoints written
            # with write() lack, and the match check would then fail on it.
            tf.train.Checkpoint(model=root).read(path).expect_partial(
            ).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as e:
            error = str(e).splitlines()[0][:300]
            continue
        return donor, optimizer_state + other
    raise InteropError(f"{named(path, flag)}: the checkpoint's model does not match a "
                       f"bert_tf model built from {_BERT_CONFIG_FILE} or the model's config "
                       f"({error})")


# The tasks (task_info.json "task") whose heads each task model class has.
_TASKS_OF_MODEL = {"BertClassifier": ("classification", "regression"),
                   "BertTokenClassifier": ("tagging",), "BertSpanLabeler": ("squad",)}


def _task_matches(path, template):
    """False when the run that wrote checkpoint `path` recorded another task than `template`'s
    (a tagging head has the shapes of a classifier head with as many classes, so the shapes
    alone cannot tell); True when nothing is recorded."""
    for candidate in run_directory.model_runs(None, path):  # and RUN for RUN/best/model-N
        info = run_directory.path(candidate, run_directory.TASK_INFO_FILE)
        if fileio.isfile(info):
            try:
                with fileio.open_file(info, encoding="utf-8") as f:
                    task = json.load(f).get("task")
            except (ValueError, AttributeError):
                return True
            # A softmax and a multi-label head have the same shapes: only the record tells.
            wanted = (("multi_label",) if getattr(template, "multi_label", False)
                      else _TASKS_OF_MODEL.get(type(template).__name__))
            if wanted and task and task not in wanted:
                logging.warning("%s holds a %s head (%s); a %s gets a new head", path, task,
                                info, type(template).__name__)
                return False
            return True
    return True


def _load_weights_file(path, config, template, flag):
    """A .weights.h5 holds no architecture: try the template's kind, then pretrainer, encoder."""
    if not tf.io.gfile.exists(path):
        raise InteropError(f"{named(path, flag)}: no such file")
    builders = [lambda: BertPretrainer(build_encoder(config), use_next_sentence_label=True),
                lambda: BertPretrainer(build_encoder(config), use_next_sentence_label=False),
                lambda: build_encoder(config)]
    if template is not None:
        builders.insert(0, lambda: weights.same_kind(template, build_encoder(config)))
    for build in builders:
        donor = build()
        try:
            with warnings.catch_warnings():
                # Keras warns about every layer it cannot match before raising.
                warnings.simplefilter("ignore")
                donor.load_weights(path)
        except ValueError:
            continue
        return donor
    raise InteropError(f"{named(path, flag)}: the weights fit no BertPretrainer (with or "
                       f"without NSP) or BertEncoder built from {_BERT_CONFIG_FILE} or the "
                       "model's config")


def _keras_file_module(path, flag):
    """The `module` of the top-level object in a .keras file (to tell keras-hub models apart).

    Raises:
      InteropError: no such file; model_directory.ModelFileError: not a readable archive.
    """
    if not tf.io.gfile.exists(path):
        raise InteropError(f"{named(path, flag)}: no such file")
    return keras_files.read_keras_config(path, named(path, flag)).get("module", "")


def _keras_file_config(path, flag):
    if str(_keras_file_module(path, flag)).startswith("keras_hub"):
        return kerashub.config_from_backbone(kerashub.load_keras_hub(path)[0])
    return weights.encoder_of(keras_files.load_keras_file(path, named(path, flag))).config


def checkpoint_casing(init_checkpoint):
    """(do_lower_case, where it was read) of a checkpoint, else (None, None): a keras-hub
    preset's tokenizer, a Hugging Face tokenizer_config.json, or the record of the bert_tf run
    (bert_tf.run_directory.recorded_casing) in or beside which it lies."""
    path = str(init_checkpoint)
    directory = path if fileio.isdir(path) else os.path.dirname(path)
    if kerashub.is_preset_dir(directory):
        return kerashub.preset_lowercase(directory), "tokenizer.json lowercase"
    value = huggingface.do_lower_case_of(directory)
    if value is not None:
        return value, f"{huggingface.TOKENIZER_CONFIG_FILE} do_lower_case"
    if os.path.basename(directory) == run_directory.BEST_DIR:
        directory = os.path.dirname(directory)
    return run_directory.recorded_casing(directory)


def casing_of(do_lower_case, init_checkpoint):
    """The casing to tokenize with: `do_lower_case` when given (it must not contradict what
    --init_checkpoint records), else the casing --init_checkpoint records, else None (the
    tokenizer file's: a tokenizer.json records it, a vocab.txt is lower-cased).

    Raises:
      InteropError naming --do_lower_case and the file that records the other casing.
    """
    if do_lower_case is not None:
        if init_checkpoint:
            _check_casing(init_checkpoint, do_lower_case)
        return bool(do_lower_case)
    if not init_checkpoint:
        return None
    value, where = checkpoint_casing(init_checkpoint)
    if value is not None:
        logging.info("--do_lower_case unset: %s, as --init_checkpoint=%s records (its %s)",
                     value, init_checkpoint, where)
    return value


def check_casing(init_checkpoint, do_lower_case):
    """Raises InteropError when `do_lower_case` contradicts what --init_checkpoint records (its
    name, tokenizer files, or a bert_tf run's records); before any work."""
    _check_casing(init_checkpoint, do_lower_case)


def _check_casing(init_checkpoint, do_lower_case):
    try:
        validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    except ValueError as e:
        raise InteropError(str(e)) from None
    value, where = checkpoint_casing(init_checkpoint)
    if value is not None and value != bool(do_lower_case):
        raise InteropError(
            f"--do_lower_case={bool(do_lower_case)} contradicts --init_checkpoint="
            f"{init_checkpoint}: its {where} is {value}, so pass --do_lower_case={value} to "
            "tokenize as the model was trained (or leave it unset to use it)")


def _normal_activation(name):
    return "gelu" if name == "gelu_new" else name


def _check_config(source, config):
    """Structural differences are errors; activation or epsilon differences are warnings."""
    if source.config is None:
        return
    found = source.config
    if found.architecture != config.architecture:
        raise InteropError(f"{source.description}: the checkpoint holds architecture "
                           f"'{found.architecture}', the model is '{config.architecture}'")
    mismatches = [f"{name}={getattr(found, name)} in the checkpoint but {getattr(config, name)} "
                  "in the model" for name in _STRUCTURE_FIELDS
                  if getattr(found, name) != getattr(config, name)]
    if mismatches:
        raise InteropError(f"{source.description}: the checkpoint's config does not match the "
                           f"model's: {'; '.join(mismatches)}")
    if _normal_activation(found.hidden_act) != _normal_activation(config.hidden_act):
        logging.warning("%s was trained with hidden_act=%r but the model uses %r",
                        source.description, found.hidden_act, config.hidden_act)
    for name in _BEHAVIOUR_FIELDS:
        if getattr(found, name) != getattr(config, name):
            logging.warning("%s was trained with %s=%r but the model uses %r",
                            source.description, name, getattr(found, name), getattr(config, name))
    if found.layer_norm_eps != config.layer_norm_eps:
        logging.warning("%s was trained with layer_norm_eps=%g but the model uses %g",
                        source.description, found.layer_norm_eps, config.layer_norm_eps)
