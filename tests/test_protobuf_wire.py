"""bert_tf.protobuf_wire against protobuf's own encoder (the one TensorFlow ships)."""

import pytest
import tensorflow as tf

from bert_tf import protobuf_wire as wire


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**14, 2**35 + 7, 2**63 - 1, -1, -300])
def test_varints_match_protobuf_and_read_back(value):
    example = tf.train.Int64List(value=[value])
    # Int64List{value=1 packed}: key 0x0a, the payload's length, then the varint.
    encoded = example.SerializeToString()
    assert encoded[2:] == wire.varint(value)
    assert wire.read_varint(b"\xff" + wire.varint(value), 1) == (value % 2**64,
                                                                   1 + len(encoded) - 2)


def test_fields_split_a_message_into_its_fields_and_rebuild_it():
    feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b"bc"]))
    message = wire.bytes_field(1, b"key") + wire.varint_field(3, 150) + bytes.fromhex(
        "2d01020304") + bytes.fromhex("310102030405060708") + wire.bytes_field(
        2, feature.SerializeToString())
    fields = wire.fields(message)
    assert [(number, value) for number, value, _ in fields] == [
        (1, b"key"), (3, 150), (5, b"\x01\x02\x03\x04"), (6, bytes(range(1, 9))),
        (2, feature.SerializeToString())]
    assert b"".join(raw for _, _, raw in fields) == message
    assert tf.train.Feature.FromString(fields[-1][1]) == feature


def test_fields_are_the_bytes_protobuf_writes():
    # BytesList{value=1: bytes}; ServerDef{task_index=3: int32}.
    assert wire.bytes_field(1, b"key") == tf.train.BytesList(value=[b"key"]).SerializeToString()
    assert wire.varint_field(3, 150) == tf.train.ServerDef(task_index=150).SerializeToString()
    feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a" * 300]))
    assert wire.bytes_field(1, wire.bytes_field(1, b"a" * 300)) == feature.SerializeToString()


def test_a_group_is_refused_naming_what_was_read():
    with pytest.raises(ValueError, match=r"^SentencePiece model: unexpected protobuf wire "
                                         r"type 3\.$"):
        wire.fields(b"\x0b", "SentencePiece model")
