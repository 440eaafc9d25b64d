"""The error raised for unusable task data, naming the file, line and column at fault."""


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
