"""tf.train.Example's fields and tags, written by hand over bert_tf.protobuf_wire's varints (no
TensorFlow, no protobuf).

What tfrecord_io.serialize_instance and instance_serializer.InstanceSerializer build records from;
both give the bytes TensorFlow's own serializer gives (tests compare them).
"""

import functools
import struct

from bert_tf.protobuf_wire import varint

# The parts tf.train.Example uses. Example{features=1: Features{feature=1:
# map<string, Feature>}}; a map entry is a message {key=1, value=2}; Feature{float_list=2:
# FloatList{value=1 packed fixed32}, int64_list=3: Int64List{value=1 packed varint}}. A field
# key byte is (field_number << 3) | wire_type, and every field here is length-delimited (2).
TAG_1_LEN = b"\x0a"
TAG_2_LEN = b"\x12"
TAG_3_LEN = b"\x1a"
FLOAT_ONE = struct.pack("<f", 1.0)
FLOAT_ZERO = struct.pack("<f", 0.0)


# Varints of 0 .. 2**16 - 1 (lengths, and token ids of any usual vocabulary), looked up rather
# than computed: one and two bytes below 2**14, three bytes above.
SMALL_VARINTS = ([bytes((v,)) for v in range(1 << 7)]
                  + [bytes(((v & 0x7F) | 0x80, v >> 7)) for v in range(1 << 7, 1 << 14)]
                  + [bytes(((v & 0x7F) | 0x80, ((v >> 7) & 0x7F) | 0x80, v >> 14))
                     for v in range(1 << 14, 1 << 16)])


def varint_of_length(n):
    return SMALL_VARINTS[n] if n < (1 << 16) else varint(n)


def packed_varints(values):
    """The payload of a packed repeated int64 field: each value's varint, concatenated."""
    if not values:
        return b""
    low, high = min(values), max(values)
    if low >= 0 and high < 0x80:
        return bytes(values)  # one byte per value, the value itself
    if low >= 0 and high < (1 << 16):
        table = SMALL_VARINTS
        return b"".join([table[v] for v in values])
    return b"".join([varint(v) for v in values])


def length_delimited(tag, payload):
    return b"".join((tag, varint_of_length(len(payload)), payload))


def serialized_feature(list_tag, packed_payload):
    """A serialized Feature whose oneof holds an Int64List (tag 3) or FloatList (tag 2)."""
    # A packed field with no element is omitted, as protobuf does (the list message stays).
    inner = length_delimited(TAG_1_LEN, packed_payload) if packed_payload else b""
    return length_delimited(list_tag, inner)


def int64_feature(values):
    return serialized_feature(TAG_3_LEN, packed_varints(values))


@functools.lru_cache(maxsize=None)
def _entry_key_part(name):
    """The start of a Features map entry for `name`: its key field and the value's tag."""
    key = name.encode("utf-8")
    return TAG_1_LEN + varint_of_length(len(key)) + key + TAG_2_LEN


def map_entry(name, feature):
    """One serialized Features.feature map entry (field 1 of Features) for a serialized Feature."""
    key_part = _entry_key_part(name)
    value_length = varint_of_length(len(feature))
    entry_length = len(key_part) + len(value_length) + len(feature)
    return b"".join((TAG_1_LEN, varint_of_length(entry_length), key_part, value_length,
                     feature))


@functools.lru_cache(maxsize=4096)
def ones_entry(name, num_ones, length, float_list):
    """The map entry of a feature holding num_ones 1s then zeros up to length: input_mask
    (int64) and masked_lm_weights (float). Only S + P + 2 distinct ones exist per run, so they
    are built once."""
    if float_list:
        return map_entry(name, serialized_feature(TAG_2_LEN, FLOAT_ONE * num_ones
                                         + FLOAT_ZERO * (length - num_ones)))
    return map_entry(name, serialized_feature(TAG_3_LEN, b"\x01" * num_ones
                                     + b"\x00" * (length - num_ones)))


def example_from_entries(entries):
    """A serialized Example from its Features' serialized map entries (already in key order)."""
    features = b"".join(entries)
    return b"".join((TAG_1_LEN, varint_of_length(len(features)), features))
