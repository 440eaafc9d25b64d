"""The protobuf wire format, by hand (no protobuf package, no TensorFlow): the one owner of
varints and fields, for what bert_tf writes or edits without a schema compiler
(tf.train.Example records in data/pretraining/example_proto.py, SentencePiece model protos in
text/sentencepiece_prepared.py). A leaf: it imports nothing of bert_tf.

A field is its key (number << 3 | wire type, a varint), then a varint value, a length-delimited
payload (a varint length, then the bytes) or 4 / 8 fixed bytes.
"""

WIRE_VARINT, WIRE_64BIT, WIRE_BYTES, WIRE_32BIT = 0, 1, 2, 5
_UINT64_MASK = (1 << 64) - 1
_FIXED_SIZES = {WIRE_64BIT: 8, WIRE_32BIT: 4}


def varint(value):
    """The base-128 varint of a non-negative int below 2**64 (negatives as their two's
    complement, as protobuf stores int64): bytes, least significant group first."""
    value &= _UINT64_MASK
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf, pos):
    """(value, position after it) of the varint at buf[pos]."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def bytes_field(number, payload):
    """A length-delimited field (a string, bytes or a nested message): bytes."""
    return varint(number << 3 | WIRE_BYTES) + varint(len(payload)) + payload


def varint_field(number, value):
    """A varint field (an int, enum or bool): bytes."""
    return varint(number << 3 | WIRE_VARINT) + varint(value)


def fields(buf, what="protobuf message"):
    """A message's fields in order: list of (number, value, the field's own bytes), the value an
    int (varint) or bytes (length-delimited or fixed). A wire type this reader does not know
    (the deprecated groups) is a ValueError naming `what`."""
    out, pos = [], 0
    while pos < len(buf):
        start = pos
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == WIRE_VARINT:
            value, pos = read_varint(buf, pos)
        else:
            if wire == WIRE_BYTES:
                size, pos = read_varint(buf, pos)
            elif wire in _FIXED_SIZES:
                size = _FIXED_SIZES[wire]
            else:
                raise ValueError(f"{what}: unexpected protobuf wire type {wire}.")
            value, pos = bytes(buf[pos:pos + size]), pos + size
        out.append((number, value, bytes(buf[start:pos])))
    return out
