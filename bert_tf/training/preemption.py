"""Preemption handling for the training loop: SIGTERM (or Ctrl-C) becomes a checkpoint and a
known exit code.

While train() runs, SIGTERM (what Kubernetes, Slurm and Cloud TPU send before they take a machine
away) or SIGINT (Ctrl-C) sets a stop request that the compiled step loop reads after every step;
under MultiWorkerMirroredStrategy the requests are all-reduced so every worker stops at the same
step. train() then saves a checkpoint at that step and raises TrainingPreempted. A second
Ctrl-C raises KeyboardInterrupt at once, without the checkpoint.
"""

import os
import signal
import socket
import threading

import tensorflow as tf
from absl import logging

# Raised by the loop when the watcher saw a stop signal (imported from here by the drivers).
from bert_tf.training.stops import (PREEMPTED_EXIT_CODE, TrainingPreempted,  # noqa: F401
                                    handled_stop_signals, stop_signal_note)


class SigtermWatcher:
    """Turns SIGTERM and Ctrl-C (STOP_SIGNALS) into a stop request that running training steps
    see within one step.

    A Python signal handler runs only when the main thread is back in the interpreter, which
    may be many steps later (steps_per_loop steps run in one TensorFlow call). So the handler
    is paired with a wake-up file descriptor (written by the C-level handler at once) and a
    thread that sets a host variable the compiled loop reads after every step. Under
    MultiWorkerMirroredStrategy the requests are all-reduced so every worker stops at the same
    step (one scalar all-reduce per step). Outside the main thread signals cannot be caught:
    then nothing is installed and the signals keep their handlers.

    Attributes:
      received: the first stop signal that arrived (None: none).
    """

    def __init__(self, strategy):
        self._strategy = strategy
        self._multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        with tf.init_scope():
            self._flag = tf.Variable(False, trainable=False, name="sigterm_requested")
        self._active = False
        self._pending = False
        self._interrupted = False
        self._lock = threading.Lock()
        self.received = None

    @tf.autograph.experimental.do_not_convert
    def requested(self):
        """bool scalar tensor: has a stop signal arrived (on any worker)? Call inside
        tf.function."""
        flag = self._flag.read_value()
        if not self._multi_worker:
            return flag
        votes = self._strategy.run(lambda f: tf.cast(f, tf.float32), args=(flag,))
        return self._strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None) > 0

    def start(self):
        if threading.current_thread() is not threading.main_thread():
            logging.warning("train() runs outside the main thread: SIGTERM will not save a "
                            "checkpoint before the process ends")
            return
        self._flag.assign(False)
        self._receiver, self._sender = socket.socketpair()
        self._sender.setblocking(False)
        self._previous_handlers = {s: signal.signal(s, self._on_signal)
                                   for s in handled_stop_signals()}
        self._previous_wakeup = signal.set_wakeup_fd(self._sender.fileno(),
                                                     warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="sigterm-watcher", daemon=True)
        self._thread.start()
        self._active = True

    def _on_signal(self, signum, frame):
        # Runs late, in the main thread (the watcher thread has usually acted already), maybe
        # while a tf.function is being traced: init_scope makes the assignment run now.
        if signum == signal.SIGINT:
            if self._interrupted:
                self._pending = False  # acted on: stop() sends it no more
                raise KeyboardInterrupt  # Ctrl-C twice: stop now, without the checkpoint
            self._interrupted = True
        with tf.init_scope():
            self._flag.assign(True)
        self._pending = True
        self._note(signum)

    def _note(self, signum):
        """Records and logs the first stop signal, whichever of the handler and the watcher
        thread sees it first."""
        with self._lock:
            if self.received is not None:
                return
            self.received = signal.Signals(signum)
        logging.warning(stop_signal_note(signum))

    def _watch(self):
        while True:
            try:
                data = self._receiver.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in self._previous_handlers:
                if signum in data:
                    self._note(signum)
                    self._flag.assign(True)
                    self._pending = True

    def stop(self, handled):
        """Restores the previous handlers. A signal that training did not act on (`handled`
        False: it came after the last step, or training failed) is re-sent to them."""
        if not self._active:
            return
        self._active = False
        signal.set_wakeup_fd(self._previous_wakeup)
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._sender.close()
        self._thread.join()
        self._receiver.close()
        if self._pending and not handled:
            os.kill(os.getpid(), self.received or signal.SIGTERM)
