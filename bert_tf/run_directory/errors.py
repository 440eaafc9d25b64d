"""The errors of a run directory that cannot be used as asked."""

class RunDirectoryError(ValueError):
    """A run directory that cannot be used as asked: in use, another run's, unreadable."""


class DirectoryInUseError(RunDirectoryError):
    """Another live run owns the directory."""


class ResumeMismatchError(RunDirectoryError):
    """A run would resume checkpoints written with other settings."""


class TrainedFileError(RunDirectoryError):
    """A file a run writes once its training is done (a model, the results) could not be
    written; the training is kept in the run's checkpoints."""
