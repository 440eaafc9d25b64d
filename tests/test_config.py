"""Tests of bert_tf.config: the original bert_config.json format, presets and validation."""

import copy
import dataclasses
import json
import os

import pytest

from bert_tf.config import (
    BERT_ONLY_FIELDS,
    MODERN_FIELDS,
    BertConfig,
    ConfigError,
    EncoderConfig,
    ModernBertConfig,
)

ORIGINAL_BASE = {  # google-research/bert's uncased_L-12_H-768_A-12/bert_config.json
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
    "type_vocab_size": 2, "vocab_size": 30522,
}


def write_json(path, values):
    path.write_text(json.dumps(values))
    return str(path)


def test_original_json_round_trips_field_for_field(tmp_path):
    config = BertConfig.from_json_file(write_json(tmp_path / "bert_config.json", ORIGINAL_BASE))
    assert config.layer_norm_eps == 1e-12
    assert config.head_size == 64
    assert config.to_dict() == ORIGINAL_BASE
    out = tmp_path / "out" / "bert_config.json"
    out.parent.mkdir()
    config.to_json_file(str(out))
    assert json.loads(out.read_text()) == ORIGINAL_BASE
    assert BertConfig.from_json_file(str(out)) == config
    assert not [p for p in os.listdir(out.parent) if p != "bert_config.json"]  # no temp left


def test_layer_norm_eps_written_only_when_not_default(tmp_path):
    config = BertConfig(vocab_size=100, layer_norm_eps=1e-6)
    assert config.to_dict()["layer_norm_eps"] == 1e-6
    path = str(tmp_path / "c.json")
    config.to_json_file(path)
    assert BertConfig.from_json_file(path) == config
    assert json.loads(config.to_json_string()) == config.to_dict()


@pytest.mark.parametrize("name", BertConfig.preset_names())
def test_presets_equal_official_configs(name, repo_root):
    path = os.path.join(repo_root, "official_configs", "models", f"{name}.json")
    assert BertConfig.from_preset(name) == BertConfig.from_json_file(path)


def test_preset_names_and_overrides():
    assert BertConfig.preset_names() == ("bert_tiny", "bert_mini", "bert_small", "bert_medium",
                                         "bert_base", "bert_large", "modernbert_tiny",
                                         "modernbert_base", "modernbert_large")
    config = BertConfig.from_preset("bert_mini", vocab_size=8192, hidden_act="gelu_exact")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
            config.intermediate_size, config.vocab_size, config.hidden_act) == (
        4, 256, 4, 1024, 8192, "gelu_exact")


def test_replace_validates_and_copies():
    config = BertConfig.from_preset("bert_tiny")
    other = config.replace(num_hidden_layers=3)
    assert other.num_hidden_layers == 3 and config.num_hidden_layers == 2
    with pytest.raises(ConfigError, match=r"^BertConfig: num_hidden_layers=0 must be a "
                                          r"positive integer$"):
        config.replace(num_hidden_layers=0)


@pytest.mark.parametrize("field, value, message", [
    ("vocab_size", 0, "BertConfig: vocab_size=0 must be a positive integer"),
    ("hidden_size", 12.0, "BertConfig: hidden_size=12.0 must be a positive integer"),
    ("num_hidden_layers", True, "BertConfig: num_hidden_layers=True must be a positive integer"),
    ("hidden_dropout_prob", float("nan"),
     "BertConfig: hidden_dropout_prob=nan must be a finite number"),
    ("attention_probs_dropout_prob", 1.0,
     "BertConfig: attention_probs_dropout_prob=1.0 must be in [0, 1)"),
    ("initializer_range", 0.0,
     "BertConfig: initializer_range and layer_norm_eps must be > 0"),
    ("num_attention_heads", 5, "BertConfig: num_attention_heads=5 does not divide hidden_size=768"),
    ("hidden_act", "gelu_fast", "BertConfig: hidden_act='gelu_fast' is not one of gelu, "
                                "gelu_new, gelu_exact, relu, tanh, swish, silu"),
])
def test_validation_messages(field, value, message):
    with pytest.raises(ConfigError) as info:
        BertConfig(**{field: value})
    assert str(info.value) == message


def test_file_errors_name_the_file(tmp_path):
    missing = str(tmp_path / "nope.json")
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(missing)
    assert str(info.value) == f"{missing}: no such bert_config file"

    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(ConfigError, match=r"bad\.json: not valid JSON \("):
        BertConfig.from_json_file(str(bad_json))

    a_list = write_json(tmp_path / "list.json", [1, 2])
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(a_list)
    assert str(info.value) == f"{a_list}: expected a JSON object of bert_config fields"

    unknown = write_json(tmp_path / "unknown.json", dict(ORIGINAL_BASE, hidden_layers=3))
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(unknown)
    assert str(info.value).startswith(f"{unknown}: unknown field(s) hidden_layers; expected a "
                                      f"subset of attention_probs_dropout_prob, hidden_act")

    wrong = write_json(tmp_path / "wrong.json", dict(ORIGINAL_BASE, num_attention_heads=7))
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(wrong)
    assert str(info.value) == (f"{wrong}: num_attention_heads=7 does not divide "
                               f"hidden_size=768")


def test_unknown_preset():
    with pytest.raises(ConfigError) as info:
        BertConfig.from_preset("bert_huge")
    assert str(info.value) == ("unknown preset 'bert_huge'; expected one of bert_tiny, "
                               "bert_mini, bert_small, bert_medium, bert_base, bert_large, "
                               "modernbert_tiny, modernbert_base, modernbert_large")


def test_preset_override_errors_name_the_preset():
    with pytest.raises(ConfigError) as info:
        BertConfig.from_preset("bert_tiny", type_vocab_size=-1)
    assert str(info.value) == "preset bert_tiny: type_vocab_size=-1 must be a positive integer"


def test_docstring_examples_run():
    import doctest

    import bert_tf.config

    result = doctest.testmod(bert_tf.config)
    assert result.attempted >= 3 and result.failed == 0


def test_family_fields_written_only_when_set_and_round_trip(tmp_path):
    config = BertConfig(vocab_size=30000, embedding_size=128, share_parameters="all",
                        position_embedding_type="sinusoidal")
    values = config.to_dict()
    assert (values["embedding_size"], values["share_parameters"],
            values["position_embedding_type"]) == (128, "all", "sinusoidal")
    path = str(tmp_path / "albert.json")
    config.to_json_file(path)
    assert BertConfig.from_json_file(path) == config
    assert config.embedding_width == 128 and BertConfig().embedding_width == 768
    assert not set(BertConfig().to_dict()) - set(ORIGINAL_BASE)


@pytest.mark.parametrize("field, value, message", [
    ("embedding_size", 0, "embedding_size=0 must be a positive integer or absent (null: the "
                          "embeddings are hidden_size wide)"),
    ("share_parameters", "layers", "share_parameters='layers' is not one of none, all, "
                                   "attention, ffn"),
    ("position_embedding_type", "alibi", "position_embedding_type='alibi' is not one of "
                                         "learned, sinusoidal, rotary"),
    ("local_attention_window", 15, "local_attention_window=15 must be 0 (no local layers) or a "
                                   "positive even number of tokens (W / 2 either side)"),
    ("local_attention_window", -2, "local_attention_window=-2 must be 0 (no local layers) or a "
                                   "positive even number of tokens (W / 2 either side)"),
    ("global_attn_every_n_layers", 0, "global_attn_every_n_layers=0 must be a positive integer "
                                      "(1: every layer global)"),
    ("norm_placement", "middle", "norm_placement='middle' is not one of post, pre"),
    ("feed_forward_type", "moe", "feed_forward_type='moe' is not one of dense, gated"),
    ("use_bias", "no", "use_bias='no' must be true or false"),
    ("local_rope_theta", 0.5, "local_rope_theta=0.5 must be a number > 1"),
])
def test_family_field_errors_name_the_field(tmp_path, field, value, message):
    path = write_json(tmp_path / "bad.json", dict(ORIGINAL_BASE, **{field: value}))
    with pytest.raises(ConfigError) as info:
        BertConfig.from_json_file(path)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("missing", [("num_hidden_layers",), ("vocab_size",),
                                     ("hidden_size", "intermediate_size")])
def test_missing_required_fields_are_named_with_the_file(tmp_path, missing):
    values = {k: v for k, v in ORIGINAL_BASE.items() if k not in missing}
    path = write_json(tmp_path / "bert_config.json", values)
    with pytest.raises(ConfigError) as error:
        BertConfig.from_json_file(path)
    assert str(error.value).startswith(f"{path}: required field(s) {', '.join(missing)} missing")


def test_missing_optional_fields_take_the_original_defaults(tmp_path):
    shape = {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 4, "intermediate_size": 128}
    config = BertConfig.from_json_file(write_json(tmp_path / "bert_config.json", shape))
    # google-research/bert's BertConfig defaults (type_vocab_size=16 is its constructor's).
    assert (config.hidden_act, config.hidden_dropout_prob, config.attention_probs_dropout_prob,
            config.max_position_embeddings, config.type_vocab_size, config.initializer_range,
            config.layer_norm_eps) == ("gelu", 0.1, 0.1, 512, 16, 0.02, 1e-12)
    assert (config.num_hidden_layers, config.vocab_size) == (2, 100)


def test_modern_options_round_trip_and_combinations(tmp_path):
    config = BertConfig.from_preset("modernbert_base")
    assert config.architecture == "modernbert" and BertConfig().architecture == "bert"
    assert [config.layer_is_global(i) for i in range(6)] == [True, False, False] * 2
    path = str(tmp_path / "modern.json")
    config.to_json_file(path)
    assert BertConfig.from_json_file(path) == config
    with pytest.raises(ConfigError) as info:
        BertConfig.from_preset("modernbert_tiny", num_attention_heads=64)
    assert str(info.value) == ("preset modernbert_tiny: position_embedding_type='rotary' needs "
                               "an even head size; hidden_size / num_attention_heads = 1")
    with pytest.raises(ConfigError) as info:
        BertConfig.from_preset("modernbert_tiny", share_parameters="all")
    assert str(info.value) == (
        "preset modernbert_tiny: share_parameters='all' is an option of architecture 'bert' "
        "(ALBERT's cross-layer sharing); the modern encoder (architecture 'modernbert') has "
        "none")
    with pytest.raises(ConfigError) as info:
        BertConfig(vocab_size=100, type_vocab_size=0)
    assert str(info.value) == "BertConfig: type_vocab_size=0 must be a positive integer"


@pytest.mark.parametrize("field, value, meaning", [
    ("use_bias", False, "BERT's blocks always have biases"),
    ("global_rope_theta", 1e4, "BERT has no rotary positions"),
    ("position_embedding_type", "rotary", "rotary positions are the modern encoder's"),
    ("local_attention_window", 8, "every BERT layer attends globally"),
])
def test_a_bert_config_refuses_modern_options_naming_the_field(field, value, meaning):
    """The architecture is declared: a modern option never turns a BERT preset modern."""
    with pytest.raises(ConfigError) as info:
        BertConfig.from_preset("bert_tiny", **{field: value})
    assert str(info.value) == (f"preset bert_tiny: {field}={value!r} is an option of "
                               f"architecture 'modernbert'; this config's architecture is "
                               f"'bert' ({meaning})")
    if field == "position_embedding_type":  # a BertConfig field, whose "rotary" is refused
        with pytest.raises(ConfigError) as info:
            BertConfig(**{field: value})
        assert str(info.value) == (f"BertConfig: {field}={value!r} is an option of "
                                   f"architecture 'modernbert'; this config's architecture is "
                                   f"'bert' ({meaning})")
    else:  # not a BertConfig field at all
        with pytest.raises(TypeError) as info:
            BertConfig(**{field: value})
        assert str(info.value) == (f"BertConfig: {field} is an option of architecture "
                                   f"'modernbert' (ModernBertConfig); a BertConfig has "
                                   f"{field}={MODERN_FIELDS[field]!r}")
    with pytest.raises(ConfigError) as info:
        EncoderConfig.from_dict({"architecture": "albert"}, source="x.json")
    assert str(info.value) == "x.json: architecture='albert' is not one of bert, modernbert"


def test_architecture_is_written_for_modern_configs_and_read_back(tmp_path):
    modern = BertConfig.from_preset("modernbert_tiny")
    assert modern.to_dict()["architecture"] == "modernbert"
    assert "architecture" not in BertConfig.from_preset("bert_tiny").to_dict()
    path = tmp_path / "bert_config.json"
    modern.to_json_file(str(path))
    assert BertConfig.from_json_file(str(path)) == modern


def test_a_release_0_1_modern_file_without_architecture_reads_as_modern(caplog):
    """bert_tf 0.1 inferred the architecture and wrote none: its files still load, with a
    warning that names the fields and the fix."""
    path = os.path.join(os.path.dirname(__file__), "modeling", "fixtures", "release_0_1",
                        "modern_bert_config.json")
    with caplog.at_level("WARNING", logger="bert_tf"):
        config = BertConfig.from_json_file(path)
    assert config.architecture == "modernbert" and config.use_bias is False
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert message.startswith(f'{path}: no "architecture" field; read as "modernbert" from its '
                              "modern encoder options (norm_placement, feed_forward_type, ")
    assert message.endswith('Add "architecture": "modernbert" to the file to silence this.')


MODERN_TINY_FILE = {  # official_configs/models/modernbert_tiny.json, field for field
    "architecture": "modernbert", "attention_probs_dropout_prob": 0.0,
    "classifier_pooling": "mean", "feed_forward_type": "gated", "final_layer_norm": True,
    "global_attn_every_n_layers": 3, "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.0,
    "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
    "layer_norm_eps": 1e-05, "local_attention_window": 16, "max_position_embeddings": 1024,
    "norm_bias": False, "norm_placement": "pre", "num_attention_heads": 2,
    "num_hidden_layers": 3, "pooler_type": "head", "position_embedding_type": "rotary",
    "type_vocab_size": 0, "use_bias": False, "vocab_size": 512,
}


def test_a_bert_file_gives_a_bert_config_without_the_modern_fields(tmp_path):
    config = EncoderConfig.from_json_file(write_json(tmp_path / "bert_config.json",
                                                     ORIGINAL_BASE))
    assert type(config) is BertConfig and config.architecture == "bert"
    fields = {f.name for f in dataclasses.fields(config)}
    assert not fields & set(MODERN_FIELDS)
    assert fields >= set(BERT_ONLY_FIELDS) | {"position_embedding_type"}
    # The modern options read as BERT's values, on the class and on the instance, read-only.
    assert {name: getattr(config, name) for name in MODERN_FIELDS} == MODERN_FIELDS
    assert (BertConfig.use_bias, BertConfig.final_layer_norm) == (True, False)
    assert [config.layer_is_global(i) for i in range(3)] == [True] * 3
    with pytest.raises(AttributeError, match="^BertConfig.use_bias is True: use_bias is an "
                                             "option of architecture 'modernbert'$"):
        config.use_bias = False


def test_a_modern_file_gives_a_modern_config_from_every_reader(tmp_path):
    path = write_json(tmp_path / "bert_config.json", MODERN_TINY_FILE)
    for reader in (EncoderConfig, BertConfig, ModernBertConfig):
        config = reader.from_json_file(path)
        assert type(config) is ModernBertConfig, reader
    fields = {f.name for f in dataclasses.fields(config)}
    assert not fields & set(BERT_ONLY_FIELDS)
    assert fields >= set(MODERN_FIELDS)
    assert (config.embedding_size, config.share_parameters) == (None, "none")
    assert (ModernBertConfig.embedding_size, config.embedding_width) == (None, 64)
    assert config == ModernBertConfig.from_preset("modernbert_tiny")
    assert config != BertConfig.from_preset("bert_tiny")


@pytest.mark.parametrize("values", [ORIGINAL_BASE, MODERN_TINY_FILE])
def test_both_architectures_write_back_the_identical_flat_file(tmp_path, values):
    source = tmp_path / "in.json"
    source.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")
    config = EncoderConfig.from_json_file(str(source))
    out = tmp_path / "out.json"
    config.to_json_file(str(out))
    assert out.read_text() == source.read_text()
    assert config.to_dict() == values
    copied = copy.deepcopy(config)
    assert copied == config and type(copied) is type(config)
    assert dataclasses.replace(config, vocab_size=7).to_dict() == dict(values, vocab_size=7)


def test_a_bert_only_option_on_a_modern_dict_is_refused_naming_it():
    with pytest.raises(ConfigError) as info:
        EncoderConfig.from_dict(dict(MODERN_TINY_FILE, embedding_size=32), source="m.json")
    assert str(info.value) == (
        "m.json: embedding_size=32 is an option of architecture 'bert' (ALBERT's factorized "
        "embeddings); the modern encoder (architecture 'modernbert') has none")
    # BERT's own value is no option at all: accepted, as a file that spells it out.
    explicit = EncoderConfig.from_dict(dict(MODERN_TINY_FILE, share_parameters="none",
                                            embedding_size=None))
    assert explicit == ModernBertConfig.from_preset("modernbert_tiny")
    with pytest.raises(ConfigError) as info:
        ModernBertConfig.from_dict(ORIGINAL_BASE | {"architecture": "bert"}, source="b.json")
    assert str(info.value) == ("b.json: architecture 'bert' is a BertConfig, not a "
                               "ModernBertConfig (EncoderConfig's readers read either)")
    # ModernBertConfig's reader takes a dict without the field as its own architecture.
    assert ModernBertConfig.from_dict(ORIGINAL_BASE).to_dict() == dict(
        ORIGINAL_BASE, architecture="modernbert")


def test_an_option_of_the_other_architecture_is_a_type_error_when_constructed():
    with pytest.raises(TypeError) as info:
        ModernBertConfig(vocab_size=100, share_parameters="all")
    assert str(info.value) == ("ModernBertConfig: share_parameters is an option of "
                               "architecture 'bert' (BertConfig); a ModernBertConfig has "
                               "share_parameters='none'")
    with pytest.raises(TypeError, match="^BertConfig: final_layer_norm is an option of "):
        dataclasses.replace(BertConfig(), final_layer_norm=True)
    with pytest.raises(TypeError, match=r"^BertConfig: the architecture is the class \('bert'\)"):
        BertConfig(architecture="modernbert")
    with pytest.raises(TypeError, match="^EncoderConfig holds what every architecture shares"):
        EncoderConfig(vocab_size=100)
    # type_vocab_size 0 (no segment embeddings) is the modern encoder's only.
    assert ModernBertConfig(vocab_size=100, type_vocab_size=0).type_vocab_size == 0


def test_every_option_defaults_to_the_value_a_file_leaves_out():
    """What makes a file round-trip: a class's default for each option is the value to_dict
    omits, so a default config writes the original fields only (and its architecture)."""
    assert set(BertConfig().to_dict()) == set(ORIGINAL_BASE)
    assert set(ModernBertConfig().to_dict()) == set(ORIGINAL_BASE) | {"architecture"}
