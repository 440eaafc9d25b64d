"""The encoder configs, one class per architecture, in the original bert_config.json format.

`BertConfig` (architecture "bert": BERT's post-LayerNorm blocks with the BERT-family options)
and `ModernBertConfig` (architecture "modernbert": the modern encoder of ModernBERT, Warner et
al. 2024: pre-norm blocks, gated feed-forward, no biases, a final norm, local sliding-window
attention with a global layer every N; see `MODERN_FIELDS`) share `EncoderConfig`'s fields,
whose names and meanings are those of google-research/bert's `bert_config.json`, so published
configs load unchanged and configs written here load in the original code.

The file stays one flat JSON object for both: `architecture` is written only when it is not
"bert", and each option (`layer_norm_eps`, which the original hard-codes to 1e-12, ALBERT's
`embedding_size` and `share_parameters`, `position_embedding_type`, the modern options) only
when it differs from its default, which is BERT's behaviour, so an original file round-trips
field for field. `EncoderConfig.from_dict` / `from_json_file` / `from_preset` read any such file
into the class its architecture names.
"""

import copy
import dataclasses
import functools
import json
import logging
import math
from typing import ClassVar

from bert_tf.fileio import open_file, write_text_atomic

# Activations the encoder implements. In an original bert_config.json "gelu" is the tanh
# approximation; a Hugging Face config's "gelu" (exact erf) is spelled "gelu_exact" here.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_exact", "relu", "tanh", "swish", "silu")

_DEFAULT_LAYER_NORM_EPS = 1e-12

# Which parts of the transformer blocks all layers share (ALBERT): none (BERT), all (ALBERT),
# attention (the self-attention and its LayerNorm) or ffn (the feed-forward and its LayerNorm).
SHARE_PARAMETERS = ("none", "all", "attention", "ffn")
POSITION_EMBEDDING_TYPES = ("learned", "sinusoidal", "rotary")
NORM_PLACEMENTS = ("post", "pre")
FEED_FORWARD_TYPES = ("dense", "gated")
POOLER_TYPES = ("tanh", "head")
CLASSIFIER_POOLINGS = ("cls", "mean")

# A sentence embedder's pooling modes (bert_tf.modeling.pooling.SentencePooling).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens")


def check_pooling_modes(modes, source="pooling"):
    """`modes` (a name or names) as a tuple, in the order given.

    Raises:
      ValueError: an unknown or repeated mode, or none, naming `source`.
    """
    if isinstance(modes, str):
        modes = (modes,)
    modes = tuple(modes)
    unknown = [m for m in modes if m not in POOLING_MODES]
    if unknown or not modes or len(set(modes)) != len(modes):
        raise ValueError(f"{source}: pooling modes {list(modes)}; expected one or more distinct "
                         f"of {', '.join(POOLING_MODES)}")
    return modes


# ELECTRA's weight of the discriminator loss against the generator's (the paper's lambda = 50).
DEFAULT_DISCRIMINATOR_WEIGHT = 50.0

# The encoder's inputs, int32 [batch, seq_length] each, in the Model Garden's names (the original
# TFRecords' input_ids / input_mask / segment_ids are mapped to them where records are read).
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")

# The encoder a config builds: BERT's post-LN blocks (with the BERT-family options) or the
# modern encoder's blocks (ModernBERT). Declared, never inferred from the other fields.
ARCHITECTURES = ("bert", "modernbert")

# The modern encoder's options and the value BERT has (a "bert" config keeps exactly these).
MODERN_FIELDS = {
    "norm_placement": "post",
    "feed_forward_type": "dense",
    "use_bias": True,
    "norm_bias": True,
    "final_layer_norm": False,
    "local_attention_window": 0,
    "global_attn_every_n_layers": 1,
    "global_rope_theta": 160000.0,
    "local_rope_theta": 10000.0,
    "pooler_type": "tanh",
    "classifier_pooling": "cls",
}

# Options of BERT's blocks that the modern encoder does not have, with their BERT value.
BERT_ONLY_FIELDS = {"embedding_size": None, "share_parameters": "none"}

# The fields of the BERT-family variants and of the modern encoder, none in an original file.
_FAMILY_FIELDS = ("architecture", *BERT_ONLY_FIELDS, "position_embedding_type", *MODERN_FIELDS)

# Optional fields and the default that leaves them out of bert_config.json.
_OMITTED_DEFAULTS = {
    "architecture": "bert",
    "layer_norm_eps": _DEFAULT_LAYER_NORM_EPS,
    **BERT_ONLY_FIELDS,
    "position_embedding_type": "learned",
    **MODERN_FIELDS,
}

# A bert_config.json must give the model's shape: a missing one silently built another model
# (BERT-base's 12 layers, 30,522 ids) that no checkpoint of the intended one fits.
REQUIRED_FILE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size")

# What a modern option's BERT value means, for the refusal of the option in a "bert" config.
_BERT_MEANING = {
    "position_embedding_type": "rotary positions are the modern encoder's",
    "norm_placement": "BERT's blocks are post-LayerNorm",
    "feed_forward_type": "BERT's feed-forward is dense",
    "use_bias": "BERT's blocks always have biases",
    "norm_bias": "BERT's LayerNorms always have a beta",
    "final_layer_norm": "BERT has no final LayerNorm",
    "local_attention_window": "every BERT layer attends globally",
    "global_attn_every_n_layers": "every BERT layer attends globally",
    "global_rope_theta": "BERT has no rotary positions",
    "local_rope_theta": "BERT has no rotary positions",
    "pooler_type": "BERT's pooler is dense + tanh",
    "classifier_pooling": "BERT's pooler reads [CLS]",
}
_ALBERT_MEANING = {"embedding_size": "factorized embeddings",
                   "share_parameters": "cross-layer sharing"}

# Defaults of optional fields a bert_config.json leaves out, where the original BertConfig's
# differ from the dataclasses' (the original's type_vocab_size=16 is its constructor default;
# every published file says 2, the dataclass default for configs built in Python).
_FILE_DEFAULTS = {"type_vocab_size": 16}

# name -> (num_hidden_layers, hidden_size); heads = hidden / 64, intermediate = 4 * hidden.
_PRESET_SHAPES = {
    "bert_tiny": (2, 128),
    "bert_mini": (4, 256),
    "bert_small": (4, 512),
    "bert_medium": (8, 512),
    "bert_base": (12, 768),
    "bert_large": (24, 1024),
}

# ModernBERT's published configs (answerdotai/ModernBERT-base and -large config.json), and a
# tiny one of the same shape of options for tests and demos. Dropouts are 0 as published.
_MODERN_PRESET_COMMON = dict(
    architecture="modernbert", vocab_size=50368, hidden_act="gelu_exact", hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, max_position_embeddings=8192, type_vocab_size=0,
    initializer_range=0.02, layer_norm_eps=1e-5, position_embedding_type="rotary",
    norm_placement="pre", feed_forward_type="gated", use_bias=False, norm_bias=False,
    final_layer_norm=True, local_attention_window=128, global_attn_every_n_layers=3,
    global_rope_theta=160000.0, local_rope_theta=10000.0, pooler_type="head",
    classifier_pooling="mean")
_MODERN_PRESETS = {
    "modernbert_tiny": dict(_MODERN_PRESET_COMMON, num_hidden_layers=3, hidden_size=64,
                            num_attention_heads=2, intermediate_size=96, vocab_size=512,
                            max_position_embeddings=1024, local_attention_window=16),
    "modernbert_base": dict(_MODERN_PRESET_COMMON, num_hidden_layers=22, hidden_size=768,
                            num_attention_heads=12, intermediate_size=1152),
    "modernbert_large": dict(_MODERN_PRESET_COMMON, num_hidden_layers=28, hidden_size=1024,
                             num_attention_heads=16, intermediate_size=2624),
}


class ConfigError(ValueError):
    """A bert_config.json (or keyword argument) that cannot describe a BERT model."""


def _legacy_architecture(values):
    """The architecture of a dict without an `architecture` field (bert_config.json files of
    bert_tf 0.1, which inferred it): "modernbert" when a modern option or rotary positions
    differ from BERT's value, else "bert". Returns (architecture, the modern fields set)."""
    modern = [name for name, bert_value in MODERN_FIELDS.items()
              if name in values and values[name] != bert_value]
    if values.get("position_embedding_type") == "rotary":
        modern.append("position_embedding_type")
    return ("modernbert" if modern else "bert"), modern


def _foreign_option_error(source, architecture, name, value):
    """The refusal of option `name`=`value`, which only the other architecture has."""
    if architecture == "bert":
        return ConfigError(
            f"{source}: {name}={value!r} is an option of architecture 'modernbert'; this "
            f"config's architecture is 'bert' "
            f"({_BERT_MEANING.get(name, f'BERT has {name}={MODERN_FIELDS.get(name)!r}')})")
    return ConfigError(f"{source}: {name}={value!r} is an option of architecture 'bert' "
                       f"(ALBERT's {_ALBERT_MEANING[name]}); the modern encoder (architecture "
                       "'modernbert') has none")


def _check_positive_int(source, name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{source}: {name}={value!r} must be a positive integer")


def _check_choice(source, name, value, allowed):
    if value not in allowed:
        raise ConfigError(f"{source}: {name}={value!r} is not one of {', '.join(allowed)}")


def _check_common_fields(source, values, segments_optional):
    """Checks EncoderConfig's fields in `values` (name -> value). A reader calls it before
    the architecture and its options, the order in which a file's errors have always come."""
    for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size"):
        value = values[name]
        if name == "type_vocab_size" and value == 0 and segments_optional:
            continue
        _check_positive_int(source, name, value)
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
                 "layer_norm_eps"):
        value = values[name]
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value)):
            raise ConfigError(f"{source}: {name}={value!r} must be a finite number")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if not 0.0 <= values[name] < 1.0:
            raise ConfigError(f"{source}: {name}={values[name]!r} must be in [0, 1)")
    if values["initializer_range"] <= 0 or values["layer_norm_eps"] <= 0:
        raise ConfigError(f"{source}: initializer_range and layer_norm_eps must be > 0")
    if values["hidden_size"] % values["num_attention_heads"]:
        raise ConfigError(f"{source}: num_attention_heads={values['num_attention_heads']} does "
                          f"not divide hidden_size={values['hidden_size']}")
    _check_choice(source, "hidden_act", values["hidden_act"], SUPPORTED_ACTIVATIONS)


@dataclasses.dataclass
class EncoderConfig:
    """What every encoder's config holds: the fields of the original bert_config.json.

    Build a `BertConfig` or a `ModernBertConfig` (this class is their common part); the readers
    `EncoderConfig.from_dict`, `from_json_file` and `from_preset` return the one a file's
    `architecture` field names. Every option of the other architecture reads as BERT's value
    on each class (`BertConfig.use_bias` is True, `ModernBertConfig.embedding_size` None), so
    code that serves both reads any option of any config.

    Args:
      vocab_size: number of WordPiece ids; the word-embedding table is [vocab_size, hidden_size].
      hidden_size: width H of every transformer block.
      num_hidden_layers: number of transformer blocks L.
      num_attention_heads: heads A; must divide hidden_size.
      intermediate_size: width of the feed-forward inner layer (4H in the paper).
      hidden_act: feed-forward and MLM-transform activation; "gelu" is the tanh approximation
        (as in the original code), "gelu_exact" the erf form, "gelu_new" an alias of "gelu".
      hidden_dropout_prob: dropout on embeddings and on every sub-layer output.
      attention_probs_dropout_prob: dropout on attention probabilities.
      max_position_embeddings: length of the learned position table (longest input).
      type_vocab_size: number of segment ids (2 for sentence pairs).
      initializer_range: stddev of the truncated-normal initializer of every kernel.
      layer_norm_eps: epsilon of every LayerNorm.

    Examples:

    >>> config = EncoderConfig.from_preset("modernbert_tiny")
    >>> type(config).__name__, config.architecture, config.to_dict()["architecture"]
    ('ModernBertConfig', 'modernbert', 'modernbert')
    >>> type(EncoderConfig.from_dict(BertConfig(vocab_size=100).to_dict())).__name__
    'BertConfig'
    """

    # "bert" or "modernbert": the class, never a field (`to_dict` writes it for the file).
    architecture: ClassVar[str | None] = None
    # A modern encoder may have no segment embeddings (type_vocab_size 0).
    _segments_optional: ClassVar[bool] = False

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = _DEFAULT_LAYER_NORM_EPS

    def __post_init__(self):
        if self.architecture is None:
            raise TypeError("EncoderConfig holds what every architecture shares; build a "
                            "BertConfig or a ModernBertConfig (EncoderConfig.from_dict, "
                            "from_json_file and from_preset read either)")
        self.validate()

    def validate(self, source=None):
        """Raises ConfigError naming `source` (default: the class name) and the field at
        fault."""
        source = source or type(self).__name__
        _check_common_fields(source, {name: getattr(self, name) for name in _COMMON_DEFAULTS},
                             self._segments_optional)
        self._validate_options(source)

    def _validate_options(self, source):
        """The architecture's own options (a subclass's fields)."""
        raise NotImplementedError

    def layer_is_global(self, index):
        """True when layer `index` attends to the whole input (ModernBERT: i % N == 0)."""
        return (self.local_attention_window == 0
                or index % self.global_attn_every_n_layers == 0)

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_width(self):
        """Width of the embedding tables: embedding_size when given, else hidden_size."""
        return self.hidden_size if self.embedding_size is None else self.embedding_size

    @classmethod
    def from_dict(cls, values, source=None, warn_legacy=True):
        """Builds the config a dict of bert_config.json fields describes; unknown fields are an
        error.

        The dict's `architecture` picks the class: "bert" (or no field) a BertConfig,
        "modernbert" a ModernBertConfig. A dict without `architecture` written by bert_tf 0.1
        (which inferred it) is read as before: modern options mean "modernbert", and
        (warn_legacy) a warning says to add the field. An option of the other architecture set
        to anything but BERT's value is refused, naming it. Called on ModernBertConfig, a dict
        without `architecture` is "modernbert" and a "bert" one is refused.

        Args:
          values: dict of bert_config.json fields.
          source: what errors and the warning name (a file, a preset); default the class name.
          warn_legacy: log the warning for a bert_tf 0.1 dict.
        """
        source = source or cls.__name__
        unknown = sorted(set(values) - set(_FILE_FIELDS))
        if unknown:
            family = sorted(_FAMILY_FIELDS)
            common = sorted(set(_FILE_FIELDS) - set(family))
            raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}; expected a "
                              f"subset of {', '.join(common)} and the BERT-family options "
                              f"{', '.join(family)}")
        values = dict(values)
        if "architecture" in values:
            architecture = values.pop("architecture")
        elif cls.architecture == "modernbert":
            architecture = "modernbert"
        else:
            architecture, modern = _legacy_architecture(values)
            if architecture != "bert" and warn_legacy:
                logging.getLogger("bert_tf").warning(
                    "%s: no \"architecture\" field; read as \"modernbert\" from its modern "
                    "encoder options (%s), as bert_tf 0.1 wrote it. Add \"architecture\": "
                    "\"modernbert\" to the file to silence this.", source, ", ".join(modern))
        _check_common_fields(source, {**_COMMON_DEFAULTS, **values},
                             segments_optional=architecture == "modernbert")
        if architecture not in ARCHITECTURES:
            raise ConfigError(f"{source}: architecture={architecture!r} is not one of "
                              f"{', '.join(ARCHITECTURES)}")
        target = config_class(architecture)
        # BertConfig's readers read any bert_config.json, as they did before the split.
        if cls not in (EncoderConfig, BertConfig) and target is not cls:
            raise ConfigError(f"{source}: architecture '{architecture}' is a "
                              f"{target.__name__}, not a {cls.__name__} (EncoderConfig's readers "
                              "read either)")
        own = {f.name for f in dataclasses.fields(target)}
        foreign = [name for name in _FILE_FIELDS if name in values and name not in own
                   and values[name] != _OMITTED_DEFAULTS[name]]
        if foreign and architecture == "modernbert":
            raise _foreign_option_error(source, architecture, foreign[0], values[foreign[0]])
        try:
            config = target(**{name: value for name, value in values.items() if name in own})
        except ConfigError as e:
            raise ConfigError(str(e).replace(f"{target.__name__}:", f"{source}:", 1)) from None
        if foreign:  # after BertConfig's own options, as a "bert" file's errors always came
            raise _foreign_option_error(source, architecture, foreign[0], values[foreign[0]])
        return config

    @classmethod
    def from_json_file(cls, path):
        """Reads an original-format bert_config.json into the class its architecture names.

        The fields of REQUIRED_FILE_FIELDS must be present; the others default to the original
        BertConfig's values (hidden_act gelu, dropouts 0.1, max_position_embeddings 512,
        type_vocab_size 16, initializer_range 0.02).
        """
        try:
            with open_file(path, encoding="utf-8") as f:
                values = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such bert_config file") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a JSON object of bert_config fields")
        missing = [name for name in REQUIRED_FILE_FIELDS if name not in values]
        if missing:
            raise ConfigError(f"{path}: required field(s) {', '.join(missing)} missing (a "
                              f"bert_config.json gives {', '.join(REQUIRED_FILE_FIELDS)}; the "
                              "other fields default to the original BERT's values)")
        return cls.from_dict({**_FILE_DEFAULTS, **values}, source=str(path))

    @classmethod
    def from_preset(cls, name, **overrides):
        """One of bert_tiny, bert_mini, bert_small, bert_medium, bert_base, bert_large (a
        BertConfig), modernbert_tiny, modernbert_base, modernbert_large (a ModernBertConfig);
        `overrides` are bert_config.json fields."""
        if name in _MODERN_PRESETS:
            return cls.from_dict(dict(_MODERN_PRESETS[name], **overrides),
                                 source=f"preset {name}")
        if name not in _PRESET_SHAPES:
            raise ConfigError(f"unknown preset {name!r}; expected one of "
                              f"{', '.join(cls.preset_names())}")
        layers, hidden = _PRESET_SHAPES[name]
        values = dict(architecture="bert", num_hidden_layers=layers, hidden_size=hidden,
                      num_attention_heads=hidden // 64, intermediate_size=4 * hidden)
        values.update(overrides)
        return cls.from_dict(values, source=f"preset {name}")

    @staticmethod
    def preset_names():
        return tuple(_PRESET_SHAPES) + tuple(_MODERN_PRESETS)

    def to_dict(self):
        """The flat bert_config.json fields; the optional ones (architecture, layer_norm_eps,
        embedding_size, share_parameters, position_embedding_type, the modern options) only
        when they differ from their default, so an original BERT file round-trips."""
        values = {"architecture": self.architecture, **dataclasses.asdict(self)}
        return {name: value for name, value in values.items()
                if name not in _OMITTED_DEFAULTS or value != _OMITTED_DEFAULTS[name]}

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes atomically: a reader never sees a half-written config."""
        write_text_atomic(path, self.to_json_string())

    def replace(self, **changes):
        return dataclasses.replace(copy.deepcopy(self), **changes)


class _OtherArchitectureOption:
    """An option of the other architecture on a config class: BERT's value, read-only, on the
    class and its instances."""

    def __init__(self, name, value, architecture):
        self.name, self.value, self.architecture = name, value, architecture

    def __get__(self, instance, owner=None):
        return self.value

    def __set__(self, instance, value):
        raise AttributeError(f"{type(instance).__name__}.{self.name} is {self.value!r}: "
                             f"{self.name} is an option of architecture '{self.architecture}'")


def _with_other_architecture_options(options, architecture):
    """Class decorator: `options` (name -> BERT's value) of `architecture` become read-only
    class values, and the constructor refuses them (and `architecture`) with a TypeError."""

    def decorate(cls):
        for name, value in options.items():
            setattr(cls, name, _OtherArchitectureOption(name, value, architecture))
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            if "architecture" in kwargs:
                raise TypeError(f"{cls.__name__}: the architecture is the class "
                                f"('{cls.architecture}'); build BertConfig or ModernBertConfig, "
                                "or read a dict with EncoderConfig.from_dict")
            for name in kwargs:
                if name in options:
                    raise TypeError(f"{cls.__name__}: {name} is an option of architecture "
                                    f"'{architecture}' ({_CLASS_NAMES[architecture]}); a "
                                    f"{cls.__name__} has {name}={options[name]!r}")
            init(self, *args, **kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


@_with_other_architecture_options(MODERN_FIELDS, "modernbert")
@dataclasses.dataclass
class BertConfig(EncoderConfig):
    """Hyper-parameters of a BERT encoder (architecture "bert": BERT's post-LayerNorm blocks).

    The fields of `EncoderConfig` (vocab_size, hidden_size, ..., layer_norm_eps; see there),
    and the BERT-family options:
      embedding_size: None (BERT: the embedding tables are H wide), or E: tables of width E,
        LayerNorm and dropout at width E, then (when E != H) a dense projection E -> H before
        the first block (ALBERT's factorized embeddings; as in ALBERT, E == H means no
        projection). The masked-LM head then maps H to E before scoring against the tied
        [V, E] table.
      share_parameters: "none" (BERT), "all" (ALBERT: one block applied L times), "attention"
        or "ffn" (every layer uses layer 0's attention, or feed-forward, sub-layers and their
        LayerNorm; the other half is per layer).
      position_embedding_type: "learned" (BERT: a trained [max_position_embeddings, width]
        table) or "sinusoidal" (the fixed closed form of Vaswani et al., no variables; inputs
        may then be longer than max_position_embeddings).

    The modern encoder's options (`MODERN_FIELDS`) are not fields: they read as BERT's values
    (`use_bias` True, `final_layer_norm` False, ...), and passing one is a TypeError.

    The readers `BertConfig.from_dict`, `from_json_file` and `from_preset` read any
    bert_config.json, as they did when one class held both architectures: a file or preset
    of architecture "modernbert" gives a `ModernBertConfig`.

    Examples:

    >>> config = BertConfig.from_preset("bert_tiny")
    >>> config.hidden_size, config.num_hidden_layers, config.use_bias
    (128, 2, True)
    >>> BertConfig(vocab_size=100, hidden_size=96, num_attention_heads=5)
    Traceback (most recent call last):
    ...
    bert_tf.config.ConfigError: BertConfig: num_attention_heads=5 does not divide hidden_size=96
    >>> BertConfig.from_preset("bert_tiny", use_bias=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bert_tf.config.ConfigError: preset bert_tiny: use_bias=False is an option of architecture ...
    >>> BertConfig(use_bias=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: BertConfig: use_bias is an option of architecture 'modernbert' (ModernBertConfig)...
    >>> type(BertConfig.from_preset("modernbert_tiny")).__name__
    'ModernBertConfig'
    """

    architecture: ClassVar[str] = "bert"

    embedding_size: int | None = None
    share_parameters: str = "none"
    position_embedding_type: str = "learned"

    def _validate_options(self, source):
        size = self.embedding_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"{source}: embedding_size={size!r} must be a positive integer "
                              "or absent (null: the embeddings are hidden_size wide)")
        _check_choice(source, "share_parameters", self.share_parameters, SHARE_PARAMETERS)
        _check_choice(source, "position_embedding_type", self.position_embedding_type,
                      POSITION_EMBEDDING_TYPES)
        if self.position_embedding_type == "rotary":
            raise _foreign_option_error(source, "bert", "position_embedding_type", "rotary")


@_with_other_architecture_options(BERT_ONLY_FIELDS, "bert")
@dataclasses.dataclass
class ModernBertConfig(EncoderConfig):
    """Hyper-parameters of the modern encoder (architecture "modernbert", ModernBERT's blocks).

    The fields of `EncoderConfig` (vocab_size, hidden_size, ..., layer_norm_eps; see there;
    type_vocab_size may be 0: no segment embeddings, input_type_ids is then accepted and
    ignored), and the modern options, whose defaults are BERT's values (those a
    bert_config.json leaves out; the presets modernbert_base / _large hold ModernBERT's):
      position_embedding_type: "rotary" (RoPE on queries and keys, no variables; inputs may
        still not exceed max_position_embeddings), "learned" or "sinusoidal" (as BertConfig's).
      norm_placement: "post" (BERT: add, then LayerNorm) or "pre" (LayerNorm on each sub-layer's
        input; block 0 skips it, as the embeddings are already normalised).
      feed_forward_type: "dense" (BERT) or "gated": one [H, 2I] projection split into input and
        gate, act(input) * gate, then [I, H] (GeGLU with a GELU hidden_act).
      use_bias: biases on every dense layer of the blocks, the MLM transform and the pooler.
      norm_bias: a beta on every LayerNorm.
      final_layer_norm: a LayerNorm after the last block (sequence_output is normalised).
      local_attention_window: 0 (every layer global) or an even W: local layers attend to keys
        within W / 2 tokens either side (ModernBERT: 128 = 64 each side).
      global_attn_every_n_layers: layer i is global when i % N == 0, else local (with a window).
      global_rope_theta, local_rope_theta: rotary bases of global and local layers.
      pooler_type: "tanh" (BERT: dense + tanh) or "head" (ModernBERT's classifier head: dense,
        hidden_act, LayerNorm).
      classifier_pooling: what the pooler reads: "cls" (the first token) or "mean" (the mean
        over input_mask).

    ALBERT's options (`BERT_ONLY_FIELDS`) are not fields: `embedding_size` reads None and
    `share_parameters` "none", and passing one is a TypeError.

    Examples:

    >>> config = ModernBertConfig.from_preset("modernbert_base")
    >>> config.num_hidden_layers, config.local_attention_window, config.embedding_size
    (22, 128, None)
    >>> [config.layer_is_global(i) for i in range(4)]
    [True, False, False, True]
    >>> ModernBertConfig.from_preset("modernbert_tiny", embedding_size=32)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bert_tf.config.ConfigError: preset modernbert_tiny: embedding_size=32 is an option of ...
    """

    architecture: ClassVar[str] = "modernbert"
    _segments_optional: ClassVar[bool] = True

    position_embedding_type: str = "learned"
    norm_placement: str = "post"
    feed_forward_type: str = "dense"
    use_bias: bool = True
    norm_bias: bool = True
    final_layer_norm: bool = False
    local_attention_window: int = 0
    global_attn_every_n_layers: int = 1
    global_rope_theta: float = 160000.0
    local_rope_theta: float = 10000.0
    pooler_type: str = "tanh"
    classifier_pooling: str = "cls"

    def _validate_options(self, source):
        _check_choice(source, "position_embedding_type", self.position_embedding_type,
                      POSITION_EMBEDDING_TYPES)
        choices = (("norm_placement", NORM_PLACEMENTS), ("feed_forward_type", FEED_FORWARD_TYPES),
                   ("pooler_type", POOLER_TYPES), ("classifier_pooling", CLASSIFIER_POOLINGS))
        for name, allowed in choices:
            _check_choice(source, name, getattr(self, name), allowed)
        for name in ("use_bias", "norm_bias", "final_layer_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{source}: {name}={getattr(self, name)!r} must be true or "
                                  "false")
        window = self.local_attention_window
        if (isinstance(window, bool) or not isinstance(window, int) or window < 0
                or window % 2):
            raise ConfigError(f"{source}: local_attention_window={window!r} must be 0 (no local "
                              "layers) or a positive even number of tokens (W / 2 either side)")
        every = self.global_attn_every_n_layers
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ConfigError(f"{source}: global_attn_every_n_layers={every!r} must be a "
                              "positive integer (1: every layer global)")
        for name in ("global_rope_theta", "local_rope_theta"):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value <= 1):
                raise ConfigError(f"{source}: {name}={value!r} must be a number > 1")
        if self.position_embedding_type == "rotary" and self.head_size % 2:
            raise ConfigError(f"{source}: position_embedding_type='rotary' needs an even head "
                              f"size; hidden_size / num_attention_heads = {self.head_size}")


_CONFIG_CLASSES = {"bert": BertConfig, "modernbert": ModernBertConfig}
_CLASS_NAMES = {name: cls.__name__ for name, cls in _CONFIG_CLASSES.items()}

_COMMON_DEFAULTS = {f.name: f.default for f in dataclasses.fields(EncoderConfig)}

# Every field a bert_config.json may hold, in the order to_dict writes them.
_FILE_FIELDS = ("architecture", *(f.name for f in dataclasses.fields(BertConfig)),
                *(f.name for f in dataclasses.fields(ModernBertConfig)
                  if f.name not in {g.name for g in dataclasses.fields(BertConfig)}))


def config_class(architecture):
    """The config class of `architecture` ("bert" or "modernbert")."""
    return _CONFIG_CLASSES[architecture]
