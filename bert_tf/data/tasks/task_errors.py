"""The error raised for unusable task data, naming the file, line and column at fault, and a
line reader that raises it for text that is not UTF-8."""

import csv
import re


class DataError(ValueError):
    """A task data file that cannot be used as given (missing column, unknown label, ...)."""


def where(path, line=None, column=None):
    """'path:line (column x)' for error messages; line is 1-based as editors show it."""
    text = str(path)
    if line is not None:
        text += f":{line}"
    if column is not None:
        text += f" (column {column!r})"
    return text


def decoded_lines(f, path):
    """The lines of a binary file object as str, each with its ending (\\n or \\r\\n; a
    file without \\n, as classic Mac files are, has its lines end at \\r), a \\r inside a
    line kept; DataError naming the first line not UTF-8.

    Open `f` with bert_tf.fileio.open_file: tf.io.gfile.GFile's line iterator drops every
    \\r, joining the words on either side of one.
    """
    number = 0
    for chunk in f:
        # Only the first chunk can be a whole file without \n.
        lines = (chunk.splitlines(keepends=True) if number == 0 and b"\n" not in chunk
                 else (chunk,))
        for raw in lines:
            number += 1
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{where(path, number)}: not UTF-8 (byte 0x{raw[e.start]:02x} "
                                f"at byte {e.start + 1} of the line); save the file as UTF-8 "
                                "(from Latin-1: iconv -f latin1 -t utf-8)") from None


# A carriage return that does not end its line.
_INNER_CR = re.compile(r"\r(?!\n?\Z)")


def tsv_lines(lines):
    """`lines` (decoded_lines') with a \\r inside a line read as a space: a TSV cannot quote
    one, and the csv module refuses it (GLUE's files were read with tf.io.gfile, which drops
    it)."""
    for line in lines:
        yield _INNER_CR.sub(" ", line) if "\r" in line else line


def next_row(reader, path):
    """The next row of a csv.reader over `path`, or None at the end; DataError naming the file
    and line for what the csv module refuses (a field over its size limit, a \\r outside
    quotes)."""
    try:
        return next(reader, None)
    except csv.Error as e:
        if "new-line character" in str(e):
            raise DataError(f"{where(path, reader.line_num)}: a carriage return (\\r) inside a "
                            "field that is not quoted: quote the field or remove it") from None
        if "field limit" not in str(e):
            raise DataError(f"{where(path, reader.line_num)}: {e}") from None
        raise DataError(f"{where(path, reader.line_num)}: a field of more than "
                        f"{csv.field_size_limit()} characters, the most a row may hold (a quote "
                        "never closed, or a whole document where one text was expected?)")\
            from None
