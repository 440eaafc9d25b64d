"""Lines of output a user cannot act on: TensorFlow's C++ log lines (start-up, oneDNN, XLA,
CUDA probing), its Python warnings, and terminal control codes in a log. The tests of the
commands, the docs' examples and the notebooks fail on them (bert_tf.quiet_logs keeps them
away: `import bert_tf` first, as every command does)."""

import re

_NOISE = re.compile(
    # absl's log line format from C++ sources (bert_tf's own Python lines share the format).
    r"^[IWEF]\d{4} \d\d:\d\d:[\d.]+\s+\d+ \S+\.(cc|h|cpp):\d+\] "
    r"|^WARNING: All log messages before absl::InitializeLog"
    r"|^To enable the following instructions: "  # cpu_feature_guard's second line
    r"|oneDNN (custom operations|supports DT_)"
    r"|Compiled cluster using XLA"
    r"|cuInit|cudart_stub|Could not find cuda drivers"
    r"|unsaved custom gradients"
    r"|^WARNING:tensorflow:"
    r"|\x1b\[")  # ANSI colour and cursor codes


# Lines bert_tf still causes, each with where it comes from (to be removed with its cause).
KNOWN = {}


def noisy_lines(text):
    """The lines of `text` (str) that match the patterns above, in order (KNOWN ones left out)."""
    return [line for line in text.splitlines()
            if _NOISE.search(line) and not any(known in line for known in KNOWN)]
