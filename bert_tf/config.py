"""BertConfig: the model hyper-parameters, in the original bert_config.json format.

The field names and meanings are those of google-research/bert's `bert_config.json`, so
published configs load unchanged and configs written here load in the original code.
The additions are `layer_norm_eps` (the original hard-codes 1e-12) and the BERT-family options
`embedding_size` (ALBERT's factorized embeddings), `share_parameters` (ALBERT's cross-layer
sharing), `position_embedding_type` (learned, fixed sinusoidal or rotary) and the options of the
modern encoder (ModernBERT, Warner et al. 2024: pre-norm blocks, gated feed-forward, no biases, a
final norm, local sliding-window attention with a global layer every N; see `MODERN_FIELDS`).
Each is written out only when it differs from its default, which is BERT's behaviour, so an
original file round-trips field for field.
"""

import copy
import dataclasses
import json
import logging
import math

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

# Fields of the BERT-family variants (ALBERT, sinusoidal positions), none in an original file.
_FAMILY_FIELDS = ("architecture", "embedding_size", "share_parameters",
                  "position_embedding_type", *MODERN_FIELDS)

# Optional fields and the default that leaves them out of bert_config.json.
_OMITTED_DEFAULTS = {
    "architecture": "bert",
    "layer_norm_eps": _DEFAULT_LAYER_NORM_EPS,
    "embedding_size": None,
    "share_parameters": "none",
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


@dataclasses.dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder.

    Args:
      architecture: the encoder this config builds: "bert" (BERT's post-LayerNorm blocks with
        the BERT-family options: ALBERT's factorized embeddings and sharing, sinusoidal
        positions) or "modernbert" (the modern encoder's blocks and the options listed below).
        A field of the other architecture set to anything but BERT's value is refused.
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
        may then be longer than max_position_embeddings) or "rotary" (RoPE on queries and
        keys, no variables; inputs may still not exceed max_position_embeddings).

    Options of the modern encoder (architecture "modernbert"; defaults are BERT's):
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
      type_vocab_size may be 0 with these options: no segment embeddings; input_type_ids is
      then accepted and ignored.

    Examples:

    >>> config = BertConfig.from_preset("bert_tiny")
    >>> config.hidden_size, config.num_hidden_layers
    (128, 2)
    >>> BertConfig(vocab_size=100, hidden_size=96, num_attention_heads=5)
    Traceback (most recent call last):
    ...
    bert_tf.config.ConfigError: BertConfig: num_attention_heads=5 does not divide hidden_size=96
    >>> BertConfig.from_preset("bert_tiny", use_bias=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bert_tf.config.ConfigError: preset bert_tiny: use_bias=False is an option of architecture ...
    """

    architecture: str = "bert"
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

    def __post_init__(self):
        self.validate()

    def validate(self, source="BertConfig"):
        """Raises ConfigError naming `source` and the field at fault."""
        ints = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size")
        for name in ints:
            value = getattr(self, name)
            if name == "type_vocab_size" and value == 0 and self.architecture == "modernbert":
                continue
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
        self._validate_modern(source)

    def _validate_architecture(self, source):
        if self.architecture not in ARCHITECTURES:
            raise ConfigError(f"{source}: architecture={self.architecture!r} is not one of "
                              f"{', '.join(ARCHITECTURES)}")
        if self.architecture == "bert":
            foreign = [(name, bert_value) for name, bert_value in MODERN_FIELDS.items()
                       if getattr(self, name) != bert_value]
            if self.position_embedding_type == "rotary":
                foreign.insert(0, ("position_embedding_type", "learned or sinusoidal"))
            if foreign:
                name, bert_value = foreign[0]
                raise ConfigError(
                    f"{source}: {name}={getattr(self, name)!r} is an option of architecture "
                    f"'modernbert'; this config's architecture is 'bert' "
                    f"({_BERT_MEANING.get(name, f'BERT has {name}={bert_value!r}')})")
        else:
            for name, bert_value in BERT_ONLY_FIELDS.items():
                if getattr(self, name) != bert_value:
                    raise ConfigError(
                        f"{source}: {name}={getattr(self, name)!r} is an option of architecture "
                        f"'bert' (ALBERT's {_ALBERT_MEANING[name]}); the modern encoder "
                        f"(architecture 'modernbert') has none")

    def _validate_modern(self, source):
        self._validate_architecture(source)
        choices = (("norm_placement", NORM_PLACEMENTS), ("feed_forward_type", FEED_FORWARD_TYPES),
                   ("pooler_type", POOLER_TYPES), ("classifier_pooling", CLASSIFIER_POOLINGS))
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{source}: {name}={getattr(self, name)!r} is not one of "
                                  f"{', '.join(allowed)}")
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
    def from_dict(cls, values, source="BertConfig", warn_legacy=True):
        """Builds a config from a dict of bert_config.json fields; unknown fields are an error.

        A dict without `architecture` is "bert", unless it was written by bert_tf 0.1 (which
        inferred the architecture): then modern options mean "modernbert", and (warn_legacy) a
        warning says to add the field.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            family = sorted(known & set(_FAMILY_FIELDS))
            raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}; expected a "
                              f"subset of {', '.join(sorted(known - set(family)))} and the "
                              f"BERT-family options {', '.join(family)}")
        if "architecture" not in values:
            architecture, modern = _legacy_architecture(values)
            if architecture != "bert" and warn_legacy:
                logging.getLogger("bert_tf").warning(
                    "%s: no \"architecture\" field; read as \"modernbert\" from its modern "
                    "encoder options (%s), as bert_tf 0.1 wrote it. Add \"architecture\": "
                    "\"modernbert\" to the file to silence this.", source, ", ".join(modern))
            values = dict(values, architecture=architecture)
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
        """One of bert_tiny, bert_mini, bert_small, bert_medium, bert_base, bert_large,
        modernbert_tiny, modernbert_base, modernbert_large."""
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
        """The bert_config.json fields; the optional ones (architecture, layer_norm_eps,
        embedding_size, share_parameters, position_embedding_type, the modern options) only
        when they differ from their default, so an original BERT file round-trips."""
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

