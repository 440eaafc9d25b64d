"""Opening plain-text corpora: gzip and bzip2 read transparently, binary files refused by name.

A corpus file is recognised by its first bytes, not its name, so a gzip file called corpus.txt
is decompressed and a text file called corpus.gz is read as text. Before any work starts,
`check_corpus_file` reads the first 64 KiB of (decompressed) content and refuses a file that is
not text: more than 10% (and at least 16) of those bytes NUL or other control bytes, or not
decodable as UTF-8. A few bad bytes, as in a mostly-UTF-8 file, are left to the readers, which
replace them and warn.

No TensorFlow: only paths with a scheme (gs://, ...) import it, to open them with tf.io.gfile.
"""

import bz2
import codecs
import contextlib
import functools
import gzip
import weakref
import zlib

GZIP_MAGIC = b"\x1f\x8b"
# "BZh", the block size '1'-'9', then a block header (pi) or the end of stream (sqrt(pi)): a
# text line that happens to start with "BZh" is not taken for bzip2.
_BZIP2_BLOCK_MAGICS = (bytes.fromhex("314159265359"), bytes.fromhex("177245385090"))
SNIFF_BYTES = 64 * 1024
# Latin-1 prose has ~1-3% non-ASCII bytes; binary data (numbers, pixels, compressed streams)
# has far more NUL, control and undecodable bytes.
MAX_BAD_FRACTION = 0.1
MIN_BAD_BYTES = 16
# C0 control bytes that text never holds (tab, newlines, form feed and escape excepted).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\v\f\r\x1b") + b"\x7f"
# What a damaged or truncated gzip/bzip2 stream raises while it is read (BadGzipFile is an
# OSError); opening one that is not the format it starts like can also raise ValueError.
STREAM_ERRORS = (EOFError, OSError, zlib.error)
READ_ERRORS = STREAM_ERRORS + (ValueError,)


def _open_raw(path):
    if "://" in path:
        import tensorflow as tf  # only remote file systems need it

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def compression_of(path):
    """'GZIP', 'BZIP2' or '' from the file's first bytes (magic numbers), whatever its name."""
    with _open_raw(path) as f:
        head = f.read(10)
    if head.startswith(GZIP_MAGIC):
        return "GZIP"
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:] in _BZIP2_BLOCK_MAGICS:
        return "BZIP2"
    return ""


class _CountingReader:
    """The file under a decompressor, counting the (compressed) bytes read from it."""

    def __init__(self, raw):
        self._raw = raw
        self.bytes_read = 0

    def read(self, size=-1):
        data = self._raw.read(size)
        self.bytes_read += len(data)
        return data


@contextlib.contextmanager
def open_corpus(path):
    """A binary file object of the file's text, decompressed if it is gzip or bzip2.

    A context manager: the decompressor and the file under it are both closed on exit. For
    progress reports, `stored_bytes_read(f)` tells how much of the file as stored has been read.
    """
    compression = compression_of(path)
    with _open_raw(path) as raw:
        if not compression:
            yield raw
            return
        counting = _CountingReader(raw)
        decompress = (functools.partial(gzip.GzipFile, fileobj=counting) if compression == "GZIP"
                      else functools.partial(bz2.BZ2File, counting))
        with decompress(mode="rb") as f:
            _STORED_COUNTERS[f] = counting
            yield f


# Decompressor -> its _CountingReader; weak, so a closed file does not linger here.
_STORED_COUNTERS = weakref.WeakKeyDictionary()


def stored_bytes_read(f):
    """Bytes of the stored (compressed) file read so far through a gzip/bzip2 `f` from
    open_corpus; None for an uncompressed file (count its lines' bytes instead)."""
    counting = _STORED_COUNTERS.get(f)
    return None if counting is None else counting.bytes_read


def check_corpus_file(path):
    """Raises ValueError naming `path` unless its first 64 KiB of content look like UTF-8 text.

    Returns:
      the compression found ('GZIP', 'BZIP2' or ''), so callers need not sniff again.

    Raises:
      ValueError: a compressed file that cannot be decompressed, or content that is binary
        (NUL and other control bytes) or mostly not UTF-8.
    """
    compression = compression_of(path)
    kind = {"GZIP": "gzip", "BZIP2": "bzip2"}.get(compression)
    try:
        with open_corpus(path) as f:
            sample = f.read(SNIFF_BYTES)
    except READ_ERRORS as e:
        raise ValueError(f"{path}: cannot read it as {kind} ({e}); the file is truncated or "
                         "corrupt.") from None
    what = f"{path} (after {kind} decompression)" if kind else path
    control = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    # Incremental and not final: a character cut by the 64 KiB limit is not counted as bad.
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(sample)
    undecodable = text.count("\ufffd") - sample.count("\ufffd".encode("utf-8"))
    if not _looks_binary(control + undecodable, len(sample)):
        _check_line_breaks(what, sample)
        return compression
    if control >= undecodable:
        raise ValueError(f"{what} is binary, not text: {control} of its first {len(sample)} "
                         "bytes are NUL or other control bytes; expected UTF-8 text, one "
                         "sentence per line (gzip and bzip2 files are read as such).")
    raise ValueError(f"{what} is not UTF-8 text: {undecodable} of its first {len(sample)} "
                     "bytes cannot be decoded; expected UTF-8 text, one sentence per line "
                     "(convert it, e.g. iconv -f latin1 -t utf-8).")


# A whole file on one line longer than this is text without its line breaks (hundreds of
# words), not a sentence: it would become one truncated instance.
LONGEST_SENTENCE_BYTES = 4096


def _check_line_breaks(what, sample):
    """One sentence per line means "\\n" line breaks: a file of CR-only breaks (classic Mac),
    or with none in its first 64 KiB, would be read as one giant line (one instance)."""
    if b"\n" in sample:
        return
    if b"\r" in sample.rstrip(b"\r"):
        raise ValueError(f"{what} ends its lines with CR only (\\r); expected one sentence per "
                         "line ending in \\n (convert it, e.g. tr '\\r' '\\n').")
    if len(sample) == SNIFF_BYTES:
        raise ValueError(f"{what} has no line break in its first {SNIFF_BYTES // 1024} KiB; "
                         "expected one sentence per line.")
    if len(sample) > LONGEST_SENTENCE_BYTES:
        raise ValueError(f"{what} is one line of {len(sample)} bytes with no line break; "
                         "expected one sentence per line.")


def check_stream_complete(path):
    """Reads a gzip or bzip2 `path` to its end; raises ValueError naming it when the stream is
    cut short or corrupt. Readers that end silently at a truncated stream (tf.data's
    TextLineDataset) need this before the work; a plain file passes unread.

    Raises:
      ValueError: the stream ends early, fails its CRC, or cannot be decompressed.
    """
    kind = {"GZIP": "gzip", "BZIP2": "bzip2"}.get(compression_of(path))
    if kind is None:
        return
    try:
        with open_corpus(path) as f:
            while f.read(1 << 20):
                pass
    except READ_ERRORS as e:
        raise ValueError(f"{path}: cannot read it as {kind} ({e}); the file is truncated or "
                         "corrupt.") from None


def _looks_binary(num_bad, num_bytes):
    # A few stray bad bytes (in a tiny file, or a web crawl) do not make a file binary.
    return num_bad >= MIN_BAD_BYTES and num_bad > MAX_BAD_FRACTION * num_bytes
