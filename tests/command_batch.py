"""Several runs of bert_tf commands in one Python process, forked from a server that imported
TensorFlow and Keras already (tests/zygote.py): no TensorFlow start-up per run.

A test that runs a command more than once (say a run, then the same with other flags, then a
refused flag) pays no start-up per run. The commands define their flags when they run and start
again from their own defaults on a second run in a process (bert_tf.cli.run), so each run sees
what `python -m <module> <args>` would. Use a real process per run instead where the claim is
about a fresh process.
"""

import json
import os
import subprocess
import sys
import types

import zygote

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RESULTS = "@@command_batch results@@ "

_SCRIPT = r"""
import contextlib, io, json, runpy, sys, traceback
from absl import app as absl_app, logging as absl_logging

results = []
for program, args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    # absl's app.run does a one-time set-up in a process (among others, --verbosity raised to
    # INFO when not given); a rerun only parses the flags, and would log at WARNING. Redo the
    # set-up for each run, as a fresh process would.
    absl_app._run_init.done = False
    absl_app._register_and_parse_flags_with_usage.done = False
    handler = absl_logging.get_absl_handler().python_handler
    old_stream = handler.stream
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        handler.setStream(err)  # absl's handler holds the stream it was made with
        try:
            # As `python <program>.py args` or `python -m <program> args` would run it.
            sys.argv = [program, *args]
            if program.endswith(".py"):
                runpy.run_path(program, run_name="__main__")
            else:
                runpy.run_module(program, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if isinstance(e.code, str):  # sys.exit("message") prints it and exits 1
                print(e.code, file=sys.stderr)
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except KeyboardInterrupt:
            raise  # Ctrl-C stops the batch (and the test run), not just this command
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            handler.setStream(old_stream)
    results.append({"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print(%r + json.dumps(results))
""" % _RESULTS


def run_commands(runs, env=None, timeout=900, cwd=REPO_ROOT, preexec_fn=None):
    """Runs each (program, args) of `runs`, in order, in one process (in directory `cwd`):
    `program` is a module (run as `python -m program args...`) or a .py file
    (`python program args...`). `preexec_fn` runs in that process first (say, a resource
    limit).

    Returns one namespace per run with returncode, stdout and stderr, like subprocess.run's.
    """
    env = dict(os.environ if env is None else env, TF_CPP_MIN_LOG_LEVEL="2")
    # Forked from this process's fork server (tests/zygote.py), which spares the process its
    # imports; one with other import-time settings (another KERAS_BACKEND) starts afresh.
    python = sys.executable if preexec_fn else zygote.shared_python(env)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([python, "-c", _SCRIPT,
                           json.dumps([[module, list(args)] for module, args in runs])],
                          capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd,
                          preexec_fn=preexec_fn)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_RESULTS)]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return [types.SimpleNamespace(**r) for r in json.loads(lines[-1][len(_RESULTS):])]
