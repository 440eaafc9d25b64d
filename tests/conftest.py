"""Shared pytest set-up: quiet TensorFlow, the helper modules, and fixtures several folders use.

tests/ mirrors the package: tests/<subpackage>/ tests bert_tf/<subpackage>/, tests/test_<module>.py
a top-level module, tests/finetuning/ the fine-tuning driver and tasks (bert_tf.jobs),
tests/test_notebooks.py the notebooks. Test modules need unique basenames (the folders have no
__init__.py). Helper modules shared across folders (finetuning_helpers, interop_reference,
serving_cases, text_samples, glue_files, and command_batch here, which runs several CLI runs in
one process) are importable from every test.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# Under xdist each worker, and every command it runs (they inherit the environment), gets its
# share of the cores for TensorFlow's intra-op pool. With the default (all cores per process),
# two workers on 2 cores wait on each other's descheduled threads: test_demo and the resume
# kill test side by side took 122 s with the default pools and 71 s with one thread each (2-core
# AMD EPYC). Set before TensorFlow is first imported; explicit tf.config settings still win.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
if _WORKERS > 1:
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))
# The suite run again on JAX (`.ci/run`'s backend matrix) compiles as the tests' JAX processes do.
if os.environ.get("KERAS_BACKEND") == "jax":
    from no_tensorflow import jax_env  # noqa: E402

    os.environ.update(jax_env())

import shutil  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

# Before any test module imports TensorFlow: its start-up lines stay out of the output, as
# `import bert_tf` keeps them out of a user's (bert_tf.quiet_logs).
import bert_tf  # noqa: E402,F401

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS)
for _folder in ("data", "finetuning", "interop", "serving", "text"):
    if os.path.join(TESTS, _folder) not in sys.path:
        sys.path.append(os.path.join(TESTS, _folder))


# The run's own temporary directory, set by the first pytest process (xdist workers inherit it).
SESSION_TMP_VARIABLE = "BERT_TF_TESTS_TMPDIR"
_SESSION_TMP = pytest.StashKey[str]()


def pytest_configure(config):
    """Everything the suite writes to the system temp directory (pytest's tmp_path folders,
    TensorFlow's autograph files, Beam's and TFDS's temporaries, what the commands it runs
    write there, ~445 MB a run) goes to one directory of this run, removed when the run
    passes. A failed run keeps it, for its tmp_path folders, and says where."""
    _PROGRESS["config"] = config
    if os.environ.get(SESSION_TMP_VARIABLE):  # an xdist worker, or a suite run by a test
        return
    root = tempfile.mkdtemp(prefix="bert_tf_tests_")
    os.environ[SESSION_TMP_VARIABLE] = os.environ["TMPDIR"] = root
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    # The JAX runs of the suite (resumes, second processes, the same tiny models in several
    # tests) compile the same programs again and again: one persistent compilation cache for the
    # whole run, every program in it, serves the repeats (tests/test_run_pretraining_jax.py
    # alone: 103 s -> 95 s from an empty cache).
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(root, "jax_cache"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    # A size bound makes JAX take a file lock around each read and write of the cache; without
    # one, a process reading an entry another is still writing warns "Error reading persistent
    # compilation cache entry ... ZstdError" (seen in the JAX matrix), a line in a log the
    # quiet checks read. 8 GiB: nothing is evicted.
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(8 << 30))
    config.stash[_SESSION_TMP] = root


def pytest_sessionfinish(session, exitstatus):
    root = session.config.stash.get(_SESSION_TMP, None)
    if root is None:
        return
    if exitstatus == 0:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"\nThe run's temporary files (tmp_path folders included) are kept in {root}",
              file=sys.stderr)


# --- Progress and Ctrl-C ---------------------------------------------------------------------
# The suite runs ~20 minutes; -q prints a dot per test, a line of dots every few minutes. The
# controller (xdist's, or the only process) writes a line every PROGRESS_SECONDS instead.
PROGRESS_SECONDS = 60
_PROGRESS = {"total": None, "done": 0, "start": None, "last": None}


def _is_worker():
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _PROGRESS["total"] = len(ids)


def pytest_collection_finish(session):
    if not _is_worker():
        _PROGRESS["total"] = _PROGRESS["total"] or len(session.items)


def pytest_runtest_logreport(report):
    if _is_worker() or report.when != "teardown":
        return
    now = time.monotonic()
    if _PROGRESS["start"] is None:
        _PROGRESS["start"] = _PROGRESS["last"] = now
    _PROGRESS["done"] += 1
    if now - _PROGRESS["last"] < PROGRESS_SECONDS:
        return
    _PROGRESS["last"] = now
    done, total, elapsed = _PROGRESS["done"], _PROGRESS["total"], now - _PROGRESS["start"]
    left = (f", about {elapsed / done * (total - done) / 60:.0f} min left"
            if total and done < total else "")
    reporter = _terminal_reporter()
    if reporter is not None:
        reporter.write_line(f"[{done}/{total or '?'} tests, {elapsed / 60:.0f} min{left}]")


def _terminal_reporter():
    config = _PROGRESS.get("config")
    return config.pluginmanager.get_plugin("terminalreporter") if config else None


def _descendants(pid):
    """The processes below `pid` (Linux /proc; none elsewhere), deepest last."""
    children = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(0), ()):
            found.append(child)
            queue.append(child)
    return found


def pytest_keyboard_interrupt(excinfo):
    """One Ctrl-C stops the run: xdist waits 10 s for its workers to leave, and a worker whose
    test is inside TensorFlow (or waits on a command the test runs) may not, so every process
    below this one is killed now (the run's temporary files are kept, as for a failure)."""
    if _is_worker():
        return
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def pretrained_dir(tmp_path_factory):
    """A tiny pre-trained run directory (bert_config.json, vocab.txt, checkpoint)."""
    from finetuning_helpers import make_pretrained_dir

    directory = tmp_path_factory.mktemp("pretrained")
    make_pretrained_dir(str(directory))
    return directory
