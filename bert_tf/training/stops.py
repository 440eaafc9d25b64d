"""How training stops early, on either backend's loop: a preemption (SIGTERM) after its
checkpoint, or a NaN/Inf before any save."""

import signal

# 128 + SIGTERM: the exit status a shell gives a process SIGTERM ended.
PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss or the updated weights became NaN or Inf."""


# The signals that stop training after a checkpoint of the step reached: SIGTERM (what
# Kubernetes, Slurm and Cloud TPU send before they take a machine away) and SIGINT (Ctrl-C).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def handled_stop_signals():
    """The STOP_SIGNALS training takes over now: SIGINT only while Python's own handler has it
    (a background job of a shell script ignores Ctrl-C, and a host such as a notebook kernel
    may handle it itself: both keep theirs)."""
    return tuple(s for s in STOP_SIGNALS
                 if s != signal.SIGINT or signal.getsignal(s) is signal.default_int_handler)


def stop_signal_note(signum):
    """The warning training logs when stop signal `signum` arrives."""
    if signum == signal.SIGINT:
        return ("Ctrl-C: saving a checkpoint after this step (Ctrl-C again stops at once, "
                "without it)")
    return "SIGTERM received: saving a checkpoint after this step"


class TrainingPreempted(SystemExit):
    """SIGTERM (or Ctrl-C) stopped training after a checkpoint was saved; exits with 128 + the
    signal's number: PREEMPTED_EXIT_CODE (143) for SIGTERM, 130 for Ctrl-C, as a shell reports
    a process the signal ended.

    A SystemExit, so that a CLI which does not catch it still ends with the documented code
    (and nothing after training, such as evaluation or export, runs on a machine being taken).

    Attributes:
      step: the global step the checkpoint was saved at.
      checkpoint: its path (the chief's; a non-chief worker's copy is removed).
      signum: the signal (SIGTERM or SIGINT).
    """

    def __init__(self, step, checkpoint, signum=None):
        # None: another worker's signal stopped this one, which stops as for SIGTERM.
        signum = signum or signal.SIGTERM
        super().__init__(128 + int(signum))
        self.step = step
        self.checkpoint = checkpoint
        self.signum = signum

    def __str__(self):
        if self.signum == signal.SIGINT:
            return (f"interrupted by Ctrl-C at step {self.step}; saved checkpoint "
                    f"{self.checkpoint}; the same command resumes it; exit code {self.code}")
        return (f"preempted by SIGTERM at step {self.step}; saved checkpoint {self.checkpoint}; "
                f"exit code {PREEMPTED_EXIT_CODE}")
