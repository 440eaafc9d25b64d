"""BertConfig: the model hyper-parameters, in the original bert_config.json format.

The field names and meanings are those of google-research/bert's `bert_config.json`, so
published configs load unchanged and configs written here load in the original code.
The additions are `layer_norm_eps` (the original hard-codes 1e-12) and the BERT-family options
`embedding_size` (ALBERT's factorized embeddings), `share_parameters` (ALBERT's cross-layer
sharing) and `position_embedding_type` (learned or fixed sinusoidal). Each is written out only
when it differs from its default, which is BERT's behaviour, so an original file round-trips
field for field.
"""

import copy
import dataclasses
import json
import math

from bert_tf.fileio import open_file, write_text_atomic

# Activations the encoder implements. In an original bert_config.json "gelu" is the tanh
# approximation; a Hugging Face config's "gelu" (exact erf) is spelled "gelu_exact" here.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_exact", "relu", "tanh", "swish", "silu")

_DEFAULT_LAYER_NORM_EPS = 1e-12

# Which parts of the transformer blocks all layers share (ALBERT): none (BERT), all (ALBERT),
# attention (the self-attention and its LayerNorm) or ffn (the feed-forward and its LayerNorm).
SHARE_PARAMETERS = ("none", "all", "attention", "ffn")
POSITION_EMBEDDING_TYPES = ("learned", "sinusoidal")

# Fields of the BERT-family variants (ALBERT, sinusoidal positions), none in an original file.
_FAMILY_FIELDS = ("embedding_size", "share_parameters", "position_embedding_type")

# Optional fields and the default that leaves them out of bert_config.json.
_OMITTED_DEFAULTS = {
    "layer_norm_eps": _DEFAULT_LAYER_NORM_EPS,
    "embedding_size": None,
    "share_parameters": "none",
    "position_embedding_type": "learned",
}

# A bert_config.json must give the model's shape: a missing one silently built another model
# (BERT-base's 12 layers, 30,522 ids) that no checkpoint of the intended one fits.
REQUIRED_FILE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size")

# Defaults of optional fields a bert_config.json leaves out, where the original BertConfig's
# differ from this dataclass's (the original's type_vocab_size=16 is its constructor default;
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


class ConfigError(ValueError):
    """A bert_config.json (or keyword argument) that cannot describe a BERT model."""


@dataclasses.dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder.

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

    Examples:

    >>> config = BertConfig.from_preset("bert_tiny")
    >>> config.hidden_size, config.num_hidden_layers
    (128, 2)
    >>> BertConfig(vocab_size=100, hidden_size=96, num_attention_heads=5)
    Traceback (most recent call last):
    ...
    bert_tf.config.ConfigError: BertConfig: num_attention_heads=5 does not divide hidden_size=96
    """

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
    embedding_size: int | None = None
    share_parameters: str = "none"
    position_embedding_type: str = "learned"

    def __post_init__(self):
        self.validate()

    def validate(self, source="BertConfig"):
        """Raises ConfigError naming `source` and the field at fault."""
        ints = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size")
        for name in ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{source}: {name}={value!r} must be a positive integer")
        floats = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
                  "layer_norm_eps")
        for name in floats:
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value)):
                raise ConfigError(f"{source}: {name}={value!r} must be a finite number")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{source}: {name}={getattr(self, name)!r} must be in [0, 1)")
        if self.initializer_range <= 0 or self.layer_norm_eps <= 0:
            raise ConfigError(f"{source}: initializer_range and layer_norm_eps must be > 0")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"{source}: num_attention_heads={self.num_attention_heads} does not divide "
                f"hidden_size={self.hidden_size}")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ConfigError(
                f"{source}: hidden_act={self.hidden_act!r} is not one of "
                f"{', '.join(SUPPORTED_ACTIVATIONS)}")
        size = self.embedding_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"{source}: embedding_size={size!r} must be a positive integer "
                              "or absent (null: the embeddings are hidden_size wide)")
        if self.share_parameters not in SHARE_PARAMETERS:
            raise ConfigError(f"{source}: share_parameters={self.share_parameters!r} is not one "
                              f"of {', '.join(SHARE_PARAMETERS)}")
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ConfigError(
                f"{source}: position_embedding_type={self.position_embedding_type!r} is not one "
                f"of {', '.join(POSITION_EMBEDDING_TYPES)}")

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_width(self):
        """Width of the embedding tables: embedding_size when given, else hidden_size."""
        return self.hidden_size if self.embedding_size is None else self.embedding_size

    @classmethod
    def from_dict(cls, values, source="BertConfig"):
        """Builds a config from a dict of bert_config.json fields; unknown fields are an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            family = sorted(known & set(_FAMILY_FIELDS))
            raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}; expected a "
                              f"subset of {', '.join(sorted(known - set(family)))} and the "
                              f"BERT-family options {', '.join(family)}")
        try:
            return cls(**values)
        except ConfigError as e:
            raise ConfigError(str(e).replace("BertConfig:", f"{source}:", 1)) from None

    @classmethod
    def from_json_file(cls, path):
        """Reads an original-format bert_config.json.

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
        """One of bert_tiny, bert_mini, bert_small, bert_medium, bert_base, bert_large."""
        if name not in _PRESET_SHAPES:
            raise ConfigError(f"unknown preset {name!r}; expected one of "
                              f"{', '.join(_PRESET_SHAPES)}")
        layers, hidden = _PRESET_SHAPES[name]
        values = dict(num_hidden_layers=layers, hidden_size=hidden,
                      num_attention_heads=hidden // 64, intermediate_size=4 * hidden)
        values.update(overrides)
        return cls.from_dict(values, source=f"preset {name}")

    @staticmethod
    def preset_names():
        return tuple(_PRESET_SHAPES)

    def to_dict(self):
        """The bert_config.json fields; the optional ones (layer_norm_eps, embedding_size,
        share_parameters, position_embedding_type) only when they differ from their default."""
        values = dataclasses.asdict(self)
        for name, default in _OMITTED_DEFAULTS.items():
            if values[name] == default:
                del values[name]
        return values

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes atomically: a reader never sees a half-written config."""
        write_text_atomic(path, self.to_json_string())

    def replace(self, **changes):
        return dataclasses.replace(copy.deepcopy(self), **changes)

