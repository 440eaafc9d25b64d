"""How training stops early, on either backend's loop: a preemption (SIGTERM) after its
checkpoint, or a NaN/Inf before any save."""

import signal

# 128 + SIGTERM: the exit status a shell gives a process SIGTERM ended.
PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss or the updated weights became NaN or Inf."""


class TrainingPreempted(SystemExit):
    """SIGTERM stopped training after a checkpoint was saved; exits with PREEMPTED_EXIT_CODE.

    A SystemExit, so that a CLI which does not catch it still ends with the documented code
    (and nothing after training, such as evaluation or export, runs on a machine being taken).

    Attributes:
      step: the global step the checkpoint was saved at.
      checkpoint: its path (the chief's; a non-chief worker's copy is removed).
    """

    def __init__(self, step, checkpoint):
        super().__init__(PREEMPTED_EXIT_CODE)
        self.step = step
        self.checkpoint = checkpoint

    def __str__(self):
        return (f"preempted by SIGTERM at step {self.step}; saved checkpoint {self.checkpoint}; "
                f"exit code {PREEMPTED_EXIT_CODE}")
