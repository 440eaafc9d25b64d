"""sentence-transformers model directories, in and out.

A sentence-transformers directory lists its modules in `modules.json`, in order:

  sentence_transformers.models.Transformer  a Hugging Face BERT folder (config.json,
                                            model.safetensors, vocab.txt, tokenizer_config.json;
                                            a ModernBERT one has tokenizer.json, byte-level BPE)
                                            plus sentence_bert_config.json (max_seq_length,
                                            do_lower_case); "path" "" is the directory itself
  sentence_transformers.models.Pooling      <path>/config.json: the pooling mode(s)
  sentence_transformers.models.Normalize    (optional) L2 normalisation, no files

which is exactly a BertSentenceEmbedder (encoder, pooling, normalize). Other modules (Dense,
LayerNorm, ...) are refused with an error naming modules.json and the module. The encoder is
read by bert_tf.interop.huggingface, so its weights map as any Hugging Face BERT's.
"""

import dataclasses
import json
import os

import tensorflow as tf
from absl import logging

from bert_tf import file_names, fileio, model_directory, run_directory
from bert_tf.fileio import named, write_text_atomic
from bert_tf.interop import huggingface, weights
from bert_tf.interop.weights import InteropError
from bert_tf.modeling import BertSentenceEmbedder
from bert_tf.config import POOLING_MODES, check_pooling_modes
from bert_tf.text import tokenizer_files

MODULES_FILE = model_directory.MODULES_FILE
SENTENCE_BERT_CONFIG_FILE = file_names.SENTENCE_BERT_CONFIG_FILE
# How an encoder checkpoint's vectors are made when nothing says otherwise.
DEFAULT_POOLING = ("mean",)
DEFAULT_NORMALIZE = True
DEFAULT_MAX_SEQ_LENGTH = 128
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
_TRANSFORMER, _POOLING, _NORMALIZE = "Transformer", "Pooling", "Normalize"
# The older configs' one boolean per mode; they concatenate in this order.
_LEGACY_MODE_KEYS = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
                     "mean": "pooling_mode_mean_tokens",
                     "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens"}
_UNSUPPORTED_LEGACY_KEYS = ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


@dataclasses.dataclass
class SentenceTransformer:
    """A loaded sentence-transformers directory.

    Attributes:
      model: the BertSentenceEmbedder.
      vocab_file: the tokenizer file: the transformer folder's vocab.txt, or its
        tokenizer.json (byte-level BPE, e.g. ModernBERT's; see
        bert_tf.text.tokenizer_files.model_tokenizer_file for which one a folder gives).
      do_lower_case: whether texts are lower-cased (the tokenizer's or the module's setting).
      max_seq_length: tokens per text, [CLS] and [SEP] included; longer texts are truncated.
      tokenizer: the WordpieceTokenizer or BpeTokenizer of vocab_file (load_embedder sets it).
    """

    model: BertSentenceEmbedder
    vocab_file: str
    do_lower_case: bool
    max_seq_length: int
    tokenizer: object = None


def is_sentence_transformers_dir(path):
    """True when `path` is a directory with a modules.json."""
    return fileio.isdir(path) and tf.io.gfile.exists(os.path.join(path, MODULES_FILE))


def _read_json(path, what):
    try:
        with tf.io.gfile.GFile(path) as f:
            return json.load(f)
    except tf.errors.NotFoundError:
        raise InteropError(f"{path}: no such file ({what})") from None
    except json.JSONDecodeError as e:
        raise InteropError(f"{path}: not valid JSON ({e})") from None


def _module_kind(entry, index, modules_path):
    """Transformer, Pooling or Normalize from a modules.json entry's "type"."""
    kind = str(entry.get("type", "")).rsplit(".", 1)[-1]
    if not isinstance(entry, dict) or "type" not in entry:
        raise InteropError(f"{modules_path}: module {index} has no \"type\"")
    if kind not in (_TRANSFORMER, _POOLING, _NORMALIZE):
        raise InteropError(f"{modules_path}: module {index} has type {entry['type']!r}, which "
                           "bert_tf cannot build; supported: Transformer, Pooling, Normalize")
    return kind


def read_modules(model_dir):
    """[(kind, directory)] of modules.json, checked to be Transformer, Pooling[, Normalize].

    Raises:
      InteropError: naming modules.json and the module at fault.
    """
    modules_path = os.path.join(model_dir, MODULES_FILE)
    entries = _read_json(modules_path, "a sentence-transformers directory lists its modules "
                                       "there")
    if not isinstance(entries, list):
        raise InteropError(f"{modules_path}: expected a list of modules")
    modules = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InteropError(f"{modules_path}: module {index} is not an object")
        path = entry.get("path", "")
        if not isinstance(path, str) or os.path.isabs(path) or ".." in path.split("/"):
            raise InteropError(f"{modules_path}: module {index} has path {path!r}; expected a "
                               "folder inside the directory")
        kind = _module_kind(entry, index, modules_path)
        modules.append((kind, os.path.join(model_dir, path) if path else model_dir))
    kinds = [kind for kind, _ in modules]
    if kinds not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
        raise InteropError(f"{modules_path}: modules {kinds}; bert_tf builds Transformer, "
                           "Pooling and an optional Normalize, in that order")
    return modules


def read_pooling_config(path):
    """The pooling modes of a Pooling module's config.json (older or newer format).

    Raises:
      InteropError: an unknown mode or none, naming the file and the field.
    """
    values = _read_json(path, "the Pooling module's settings")
    if not isinstance(values, dict):
        raise InteropError(f"{path}: expected a JSON object")
    if "pooling_mode" in values:
        modes = values["pooling_mode"]
        modes = [modes] if isinstance(modes, str) else modes
        field = "pooling_mode"
    else:
        used = [key for key in _UNSUPPORTED_LEGACY_KEYS if values.get(key)]
        if used:
            raise InteropError(f"{path}: {used[0]} is true; bert_tf pools with "
                               f"{', '.join(POOLING_MODES)}")
        modes = [mode for mode, key in _LEGACY_MODE_KEYS.items() if values.get(key)]
        field = "pooling_mode_*"
    try:
        return check_pooling_modes(modes, f"{path}: {field}")
    except (ValueError, TypeError) as e:
        raise InteropError(str(e)) from None


def pooling_of(modules):
    """(pooling modes, normalize) of a sentence-transformers directory's modules (what
    read_modules returns).

    Raises:
      InteropError: as read_pooling_config.
    """
    modes = read_pooling_config(os.path.join(modules[1][1], "config.json"))
    return modes, modules[-1][0] == _NORMALIZE


def read_sentence_bert_config(directory, max_position_embeddings):
    """The settings of directory/sentence_bert_config.json: {"max_seq_length": int,
    "do_lower_case": bool}, each only where the file holds it; {} without the file.

    Raises:
      InteropError: not a JSON object, or a max_seq_length that is not an int in
        [3, max_position_embeddings], naming the file.
    """
    path = os.path.join(directory, SENTENCE_BERT_CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        return {}
    values = _read_json(path, "")
    if not isinstance(values, dict):
        raise InteropError(f"{path}: expected a JSON object")
    settings = {}
    length = values.get("max_seq_length")
    if length is not None:
        if (isinstance(length, bool) or not isinstance(length, int)
                or not 3 <= length <= max_position_embeddings):
            raise InteropError(f"{path}: max_seq_length={length!r}; expected an int in "
                               f"[3, max_position_embeddings={max_position_embeddings}]")
        settings["max_seq_length"] = length
    if values.get("do_lower_case") is not None:
        settings["do_lower_case"] = bool(values["do_lower_case"])
    return settings


def transformer_settings(transformer_dir, max_position_embeddings):
    """(max_seq_length, do_lower_case) of a Transformer module: its sentence_bert_config.json's,
    else max_position_embeddings and false (as sentence-transformers reads it)."""
    settings = read_sentence_bert_config(transformer_dir, max_position_embeddings)
    return (settings.get("max_seq_length", max_position_embeddings),
            settings.get("do_lower_case", False))


def write_sentence_bert_config(directory, max_seq_length):
    """Writes directory/sentence_bert_config.json atomically. Its do_lower_case is false:
    casing is the tokenizer's (tokenizer_config.json or tokenizer.json say it)."""
    write_text_atomic(os.path.join(directory, SENTENCE_BERT_CONFIG_FILE), json.dumps(
        {"max_seq_length": int(max_seq_length), "do_lower_case": False}, indent=2) + "\n")


def load_sentence_transformers(model_dir, allow_pickle=False):
    """Builds a BertSentenceEmbedder from a sentence-transformers directory.

    Args:
      model_dir: the directory with modules.json.
      allow_pickle: accept a pytorch_model.bin (see bert_tf.interop.huggingface).

    Returns:
      SentenceTransformer (model, vocab_file, do_lower_case, max_seq_length).

    Raises:
      InteropError: a module bert_tf cannot build, an unknown pooling mode, a transformer
        folder that is not BERT or ModernBERT, or no vocab.txt or tokenizer.json; each naming
        the file and field.

    Examples:

    >>> st = load_sentence_transformers("all-MiniLM-L6-v2/")  # doctest: +SKIP
    >>> st.model.embedding_dim, st.max_seq_length  # doctest: +SKIP
    (384, 256)
    """
    modules = read_modules(model_dir)
    transformer_dir = modules[0][1]
    modes, normalize = pooling_of(modules)
    source, config, _ = huggingface.load_huggingface(transformer_dir, allow_pickle)
    encoder = weights.encoder_of(source)
    vocab_file = tokenizer_files.model_tokenizer_file(transformer_dir)
    if vocab_file is None:
        raise InteropError(f"{transformer_dir}: no {huggingface.VOCAB_FILE} or "
                           f"{huggingface.TOKENIZER_JSON_FILE} (the transformer module's "
                           "tokenizer)")
    settings_path = os.path.join(transformer_dir, SENTENCE_BERT_CONFIG_FILE)
    max_seq_length, module_lower_case = transformer_settings(transformer_dir,
                                                             config.max_position_embeddings)
    # A tokenizer.json records its casing. A vocab.txt is lower-cased when the module says so
    # (its do_lower_case lower-cases before the tokenizer) or the transformer folder does.
    tokenizer = _read_tokenizer(vocab_file, tokenizer_files.casing_to_load(
        vocab_file, vocab_txt_casing=lambda: module_lower_case or bool(
            huggingface.do_lower_case_of(transformer_dir))), vocab_file)
    do_lower_case = tokenizer.do_lower_case
    if module_lower_case and not do_lower_case:
        # Lower-casing before a tokenizer.json that keeps case is not what its normalizer
        # does, and bert_tf's in-graph tokenizer follows the normalizer only.
        raise InteropError(f"{settings_path}: do_lower_case is true but {vocab_file} keeps "
                           "case; bert_tf lower-cases only as the tokenizer.json says")
    model = BertSentenceEmbedder(encoder, pooling=modes, normalize=normalize)
    return SentenceTransformer(model=model, vocab_file=vocab_file, do_lower_case=do_lower_case,
                               max_seq_length=int(max_seq_length), tokenizer=tokenizer)


def _read_tokenizer(path, do_lower_case, name):
    """bert_tf.text.load_tokenizer with its errors as InteropError naming `name`."""
    try:
        return tokenizer_files.load_tokenizer(path, do_lower_case)
    except (OSError, ValueError) as e:
        raise InteropError(f"{name}: {e}") from None


def _pooling_config(model):
    width = model.encoder.config.hidden_size
    canonical = tuple(m for m in _LEGACY_MODE_KEYS if m in model.pooling)
    if model.pooling == canonical:
        # The older format, which every sentence-transformers version reads.
        values = {key: mode in model.pooling for mode, key in _LEGACY_MODE_KEYS.items()}
        return dict(values, word_embedding_dimension=width)
    return {"embedding_dimension": width, "pooling_mode": list(model.pooling),
            "include_prompt": True}


def layout_problem(model):
    """None when `model`'s encoder can be written as a sentence-transformers directory (its
    transformer is Hugging Face BERT or ModernBERT); else why not (str: an ALBERT-style
    factorized or shared encoder, say)."""
    config = weights.encoder_of(model).config
    if config.architecture == "modernbert":
        return None
    try:
        weights.require_plain_bert(model, "sentence-transformers (Hugging Face BERT)")
    except InteropError as e:
        return str(e)
    return None


def save_sentence_transformers(model, output_dir, vocab_file, do_lower_case, max_seq_length):
    """Writes a BertSentenceEmbedder as a sentence-transformers directory.

    The transformer is written at the top (config.json, model.safetensors, vocab.txt,
    tokenizer_config.json, sentence_bert_config.json, as all-MiniLM-L6-v2 is laid out; a
    modern encoder with a byte-level BPE: tokenizer.json and a tokenizer_config.json naming
    its special tokens, as ModernBERT is laid out), the
    pooling config in 1_Pooling/, a Normalize module when the model normalises, and
    modules.json last, so a directory with modules.json is complete. Every file is written
    atomically.

    Args:
      model: a BertSentenceEmbedder (a BERT or ModernBERT-style encoder).
      output_dir: created if needed.
      vocab_file: the model's vocab.txt or tokenizer.json.
      do_lower_case: the tokenizer's casing (a tokenizer.json's own, which it records).
      max_seq_length: tokens per text the model was trained for.

    Returns:
      output_dir.
    """
    if not isinstance(model, BertSentenceEmbedder):
        raise InteropError(f"cannot write a {type(model).__name__} as a sentence-transformers "
                           "model: expected a BertSentenceEmbedder")
    # A tokenizer.json is read with its own casing (which do_lower_case repeats).
    tokenizer = _read_tokenizer(
        vocab_file, tokenizer_files.casing_to_load(vocab_file, vocab_txt_casing=do_lower_case),
        vocab_file)
    fileio.makedirs(output_dir)
    written = tokenizer_files.write_tokenizer_file(output_dir, tokenizer, vocab_file)
    # A tokenizer.json (byte-level BPE) records its casing; a vocab.txt needs
    # tokenizer_config.json to say it.
    records_casing = tokenizer_files.records_casing(written)
    # A SentencePiece model (already written) gets the tokenizer_config.json naming its class.
    huggingface.save_huggingface(
        model.encoder, output_dir,
        vocab_file=written if tokenizer_files.is_sentencepiece_model(written) else None,
        do_lower_case=None if records_casing else do_lower_case)
    if records_casing:
        # transformers reads a tokenizer.json's special tokens (padding needs pad_token)
        # from tokenizer_config.json; bert_tf's BpeTokenizer reads the same roles.
        roles = tokenizer_files.special_tokens(tokenizer)
        write_text_atomic(os.path.join(output_dir, huggingface.TOKENIZER_CONFIG_FILE),
                          json.dumps(dict({f"{role}_token": token for role, token
                                           in roles.items()},
                                          tokenizer_class="PreTrainedTokenizerFast",
                                          model_max_length=int(max_seq_length)),
                                     indent=2, sort_keys=True) + "\n")
    write_sentence_bert_config(output_dir, max_seq_length)
    fileio.makedirs(os.path.join(output_dir, POOLING_DIR))
    write_text_atomic(os.path.join(output_dir, POOLING_DIR, "config.json"),
                      json.dumps(_pooling_config(model), indent=2) + "\n")
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": POOLING_DIR,
                "type": "sentence_transformers.models.Pooling"}]
    if model.normalize:
        fileio.makedirs(os.path.join(output_dir, NORMALIZE_DIR))
        modules.append({"idx": 2, "name": "2", "path": NORMALIZE_DIR,
                        "type": "sentence_transformers.models.Normalize"})
    write_text_atomic(os.path.join(output_dir, MODULES_FILE), json.dumps(modules, indent=2) + "\n")
    return output_dir


def _option(name, flag):
    """How messages name the setting `name`: as its flag (--name) where the checkpoint came
    from one (`flag`), else as load_embedder's argument."""
    return f"--{name}" if flag else name


def _check_own_pooling(model, pooling, normalize, init_checkpoint, what, flag):
    """A pooling or normalize given for a model that carries its own must equal it."""
    for name, given, own in (("pooling", pooling, model.pooling),
                             ("normalize", normalize, model.normalize)):
        if given is None:
            continue
        given, own = (",".join(given), ",".join(own)) if name == "pooling" else (
            str(bool(given)).lower(), str(bool(own)).lower())
        if given != own:
            option = _option(name, flag)
            raise InteropError(
                f"{option}={given} contradicts {named(init_checkpoint, flag)}, {what} "
                f"trained with {option}={own}, which its vectors keep (leave {option} out: it "
                "sets how an encoder checkpoint's vectors are made)")


def _log_default_length(init_checkpoint, length, flag):
    logging.info("max_seq_length=%d, the default: %s records no sequence length for sentence "
                 "embeddings (%s sets one)", length, named(init_checkpoint, flag),
                 _option("max_seq_length", flag))


def load_embedder(init_checkpoint, *, pooling=None, normalize=None, vocab_file=None,
                  do_lower_case=None, max_seq_length=None, flag="--init_checkpoint"):
    """A BertSentenceEmbedder from any model source, with its tokenizer settings.

    Args:
      init_checkpoint: a sentence-transformers directory (pooling and normalisation from it);
        a bert_tf embedding run or a saved TextEmbedder (its model.keras holds a
        BertSentenceEmbedder, its run record or task_info.json its casing and length) or such
        a .keras file; or any encoder checkpoint bert_tf.interop.warm_start reads (original
        TF1, Hugging Face, keras-hub, bert_tf pre-training and fine-tuning runs, a saved task:
        their encoder), then pooled by `pooling` / `normalize`, tokenized with the casing
        it records (bert_tf.interop.casing_of) unless do_lower_case says, and truncated to the
        max_seq_length of a sentence_bert_config.json beside it (what a conversion of a
        sentence-transformers model carries), else to 128.
      pooling, normalize: how an encoder checkpoint's vectors are made (None: mean pooling,
        normalised); a model that carries its own (a sentence-transformers directory or an
        embedding run) refuses another value, naming both.
      vocab_file, do_lower_case, max_seq_length: override what the source says (needed where
        it says nothing: vocab_file beside a TF1 checkpoint, max_seq_length default 128, which
        is logged).
        The tokenizer file is a vocab.txt or a tokenizer.json (byte-level BPE, e.g. a
        ModernBERT's; found beside the model as bert_tf.text.tokenizer_files.
        model_tokenizer_file says); a tokenizer.json records its casing, which an unset
        do_lower_case takes and a set one must agree with.
      flag: the flag `init_checkpoint` came from, named in errors with the other settings'
        flags (--pooling, ...); None (a Python caller): the path and these arguments' names.

    Returns:
      SentenceTransformer (model, vocab_file, do_lower_case, max_seq_length, tokenizer).

    Raises:
      InteropError / FileNotFoundError / ValueError naming the source and what is missing.
    """
    from bert_tf import keras_files
    from bert_tf.interop.warm_starting import (casing_of, check_weights_readable,
                                               checkpoint_config, warm_start)
    from bert_tf.modeling import build_encoder

    check_weights_readable(init_checkpoint, flag=flag)
    if is_sentence_transformers_dir(init_checkpoint):
        loaded = load_sentence_transformers(init_checkpoint)
        _check_own_pooling(loaded.model, pooling, normalize, init_checkpoint,
                           "a sentence-transformers model", flag)
    else:
        model_file = None
        try:
            model_file = run_directory.model_file(init_checkpoint)
        except (FileNotFoundError, ValueError):
            pass
        model = (keras_files.load_keras_file(model_file, named(model_file, flag))
                 if model_file else None)
        if isinstance(model, BertSentenceEmbedder):
            _check_own_pooling(model, pooling, normalize, init_checkpoint,
                               "a sentence embedding model", flag)
            directory = os.path.dirname(fileio.abspath(model_file))
            try:
                record = run_directory.read_record(directory)
            except run_directory.RunDirectoryError as e:
                raise InteropError(str(e)) from None
            casing = casing_of(do_lower_case, init_checkpoint)
            length = (record.settings if record else {}).get("max_seq_length")
            if not (length or max_seq_length):
                _log_default_length(init_checkpoint, DEFAULT_MAX_SEQ_LENGTH, flag)
            loaded = SentenceTransformer(
                model=model, vocab_file=tokenizer_files.model_tokenizer_file(directory),
                do_lower_case=True if casing is None else casing,
                max_seq_length=length or DEFAULT_MAX_SEQ_LENGTH)
        else:
            config = checkpoint_config(init_checkpoint, flag=flag)
            if config is None:
                raise InteropError(f"{named(init_checkpoint, flag)}: not a "
                                   "sentence-transformers directory, a bert_tf embedding run "
                                   "or a checkpoint with a model config beside it")
            model = BertSentenceEmbedder(
                build_encoder(config), pooling=pooling or DEFAULT_POOLING,
                normalize=DEFAULT_NORMALIZE if normalize is None else normalize)
            casing = casing_of(do_lower_case, init_checkpoint)
            warm_start(init_checkpoint, model, do_lower_case=casing, flag=flag)
            directory = (init_checkpoint if fileio.isdir(init_checkpoint)
                         else os.path.dirname(init_checkpoint))
            length = read_sentence_bert_config(
                directory, config.max_position_embeddings).get("max_seq_length")
            if length is None:
                length = min(DEFAULT_MAX_SEQ_LENGTH, config.max_position_embeddings)
                if not max_seq_length:
                    _log_default_length(init_checkpoint, length, flag)
            elif not max_seq_length:
                logging.info("max_seq_length=%d, from %s", length,
                             os.path.join(directory, SENTENCE_BERT_CONFIG_FILE))
            loaded = SentenceTransformer(
                model=model, vocab_file=tokenizer_files.model_tokenizer_file(directory),
                do_lower_case=True if casing is None else casing, max_seq_length=length)
    if vocab_file:
        loaded.vocab_file = (tokenizer_files.model_tokenizer_file(vocab_file) or vocab_file
                             if fileio.isdir(vocab_file) else vocab_file)
    if max_seq_length:
        limit = loaded.model.encoder.config.max_position_embeddings
        if not 3 <= max_seq_length <= limit:
            raise InteropError(f"{_option('max_seq_length', flag)}={max_seq_length} must be in "
                               f"[3, max_position_embeddings={limit}] of the model")
        loaded.max_seq_length = max_seq_length
    if not loaded.vocab_file:
        raise InteropError(f"{named(init_checkpoint, flag)} has no vocab.txt or "
                           f"tokenizer.json beside it; give {_option('vocab_file', flag)}")
    # A tokenizer.json records its casing: unset do_lower_case takes it, a contradicting one
    # is an error; a vocab.txt tokenizes as do_lower_case (else the source) says.
    loaded.tokenizer = _read_tokenizer(
        loaded.vocab_file,
        tokenizer_files.casing_to_load(loaded.vocab_file, do_lower_case, loaded.do_lower_case),
        f"{_option('vocab_file', flag)}={loaded.vocab_file}")
    loaded.do_lower_case = loaded.tokenizer.do_lower_case
    vocab_size = loaded.model.encoder.config.vocab_size
    if loaded.tokenizer.vocab_size > vocab_size:
        raise InteropError(f"{_option('vocab_file', flag)}={loaded.vocab_file} has "
                           f"{loaded.tokenizer.vocab_size} tokens but the model's vocab_size is "
                           f"{vocab_size}")
    return loaded
