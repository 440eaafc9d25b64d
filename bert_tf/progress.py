"""Progress a person can read: a live bar on a terminal or in a notebook, plain lines elsewhere.

Keras' progress bar writes ANSI colour codes and backspaces whatever the output is, which a
redirected log keeps as noise. `interactive()` tells a terminal or a notebook from a file or a
pipe; `progress_bar` and `keras_verbose` choose by it (the bert_tf Keras models' fit, evaluate
and predict take their default verbosity from it). Standard library only at import.
"""

import sys
import time

# Seconds between two progress lines in a log.
LOG_INTERVAL = 10.0


def interactive():
    """True when standard output is a terminal or a notebook's (the live bar reads well)."""
    if "ipykernel" in sys.modules:
        return True
    stream = sys.stdout
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def keras_verbose():
    """The `verbose` for Keras fit / evaluate / predict: 1 (the live bar) when interactive,
    else 2 (one plain line per epoch)."""
    return 1 if interactive() else 2


class _LoggedProgress:
    """Progress as log lines, one every LOG_INTERVAL seconds and one at the end."""

    def __init__(self, total, unit_name):
        self.total = total
        self.unit_name = unit_name
        self.start = self.last = time.monotonic()

    def update(self, done):
        now = time.monotonic()
        if done < self.total and now - self.last < LOG_INTERVAL:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        eta = f", {(self.total - done) / rate:.0f} s left" if done < self.total and rate else ""
        from absl import logging

        logging.info("%d/%d %ss (%.1f/s%s)", done, self.total, self.unit_name, rate, eta)


def progress_bar(total, unit_name):
    """An object with `update(done)`: Keras' Progbar when interactive, else log lines.

    Args:
      total: the number of units of the whole job.
      unit_name: what a unit is ("text").
    """
    if interactive():
        import keras

        return keras.utils.Progbar(total, unit_name=unit_name)
    return _LoggedProgress(total, unit_name)
