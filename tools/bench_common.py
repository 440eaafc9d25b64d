"""Shared pieces of tools/benchmark.py's cases: the worker runner, process timing, the shared
corpus and vocabulary (Setup), machine information and the table's common lines.

Every measurement runs as `benchmark.py --worker=<name>` in a fresh process (the mixed-precision
policy is global, and memory is measured per process) and prints one BENCH_RESULT JSON line.
This module must not import tools/benchmark.py (run as __main__, importing it again would
define its flags twice): benchmark.py collects the case modules' WORKERS.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time

RESULT_PREFIX = "BENCH_RESULT "
TOOLS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TOOLS)
# The scripts the cases run in their own interpreters (a launcher, peers' reference runs).
SCRIPTS = os.path.join(TOOLS, "bench_scripts")
MODELS = {"tiny": "bert_tiny", "small": "bert_small", "base": "bert_base"}


def median_rate(fn, units, warmup, repeats):
    """Runs fn() `warmup` times, then `repeats` timed times; returns (median seconds, units/s)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return seconds, units / seconds


def load():
    """The 1-minute load average, recorded with every result so a noisy number is visible."""
    return round(os.getloadavg()[0], 2)


def emit(result):
    """Prints a worker's result as the BENCH_RESULT line run_worker reads."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_worker(name, args, timeout=1800, env=None):
    """Runs `benchmark.py --worker=name` in a fresh Python process (with `env` added to the
    environment); returns its result (or an error) dict."""
    cmd = [sys.executable, os.path.join(TOOLS, "benchmark.py"), f"--worker={name}",
           f"--worker_args={json.dumps(args)}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO + os.pathsep
               + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return run_command(name, cmd, env, timeout)


def run_command(name, cmd, env, timeout):
    """Runs cmd; returns the dict of its last BENCH_RESULT line, or {"error": ...}."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"worker {name} timed out after {timeout} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"error": f"worker {name} exited {proc.returncode}: " + " | ".join(tail)}


def time_process(cmd, cwd, log_path, env=None, cores=None):
    """Runs cmd to completion and measures it.

    The command runs under a minimal launcher (bench_scripts/rss_launcher.py under python -S,
    about 10 MB) whose wait4 gives the rusage of exactly that child: ru_maxrss covers the
    process and the children it waited for, and neither this process's memory nor earlier
    cases leak into the number.
    cores: None, or the CPU ids the command (and its children) may run on (sched_setaffinity).
    Returns (wall seconds, peak RSS MB, returncode, CPU seconds): the CPU seconds (user +
    system, children included), unlike wall time, do not grow when other work shares the CPU.
    """
    result_path = log_path + ".rusage"
    launcher = [sys.executable, "-S", os.path.join(SCRIPTS, "rss_launcher.py"), result_path,
                ",".join(str(c) for c in cores) if cores else ""]
    with open(log_path, "w") as log:
        start = time.perf_counter()
        subprocess.run(launcher + list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                       env=env, check=False)
        wall = time.perf_counter() - start
    with open(result_path) as f:
        returncode, maxrss_kb, cpu_s = f.read().split()
    return wall, int(maxrss_kb) / 1024.0, int(returncode), float(cpu_s)


def log_tail(path, lines=4):
    with open(path, errors="replace") as f:
        return " | ".join(f.read().strip().splitlines()[-lines:])


def print_row(row):
    print(json.dumps(row), flush=True)


class Setup:
    """The shared inputs: the demo corpus (real text) and a WordPiece vocabulary learned on it."""

    def __init__(self, workdir, quick):
        self.workdir = workdir
        self.corpus = os.path.join(workdir, "corpus.txt")
        self.vocab = os.path.join(workdir, "vocab.txt")
        self._quick = quick
        self._ready = False

    def ensure(self):
        if self._ready:
            return
        result = run_worker("setup", {"corpus": self.corpus, "vocab": self.vocab,
                                      "quick": self._quick})
        if "error" in result:
            raise RuntimeError(f"setup failed: {result['error']}")
        self.info = result
        self._ready = True


def worker_setup(args):
    from bert_tf.data.pretraining.demo_corpus import format_documents, pydoc_documents
    from bert_tf.fileio import write_text_atomic
    from bert_tf.text import build_vocab, write_vocab

    documents = pydoc_documents()
    if args["quick"]:
        documents = documents[:20]
    write_text_atomic(args["corpus"], format_documents(documents))
    write_vocab(build_vocab(args["corpus"], 1000 if args["quick"] else 4000, True), args["vocab"])
    emit({"documents": len(documents), "corpus_bytes": os.path.getsize(args["corpus"])})


WORKERS = {"setup": worker_setup}


def machine_info():
    """The machine line: the CPU (bert_tf.cpu.describe: model name, vendor, family, type and
    the flags that decide the kernels), core count, platform, versions, load."""
    from bert_tf import cpu

    import importlib.metadata as md
    versions = {}
    for pkg in ("tensorflow", "keras", "keras-hub", "tensorflow-text", "jax", "jaxlib", "torch",
                "transformers"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {**cpu.describe(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "versions": versions,
            "load_avg_start": list(os.getloadavg())}


def cpu_label(info):
    """The CPU a figure was measured on, as every result row records it: model name and
    type, e.g. "AMD EPYC (AMD EPYC with AVX512_BF16 (Zen 4, Zen 5), family 26)"."""
    family = f", family {info['cpu_family']}" if info.get("cpu_family") is not None else ""
    return f"{info['cpu'] or 'unknown CPU'} ({info['cpu_type']}{family})"


def format_table(rows, format_lines):
    """A plain-text table of the main numbers of every case.

    Args:
      rows: the result rows of every case (dicts with "case" and usually "kind").
      format_lines: dict case -> `(row) -> list of lines` for the rows that are not errors or
        notes.
    """
    lines = []
    for r in rows:
        case, kind = r["case"], r.get("kind")
        if "error" in r:
            lines.append(f"{case:14} ERROR {r.get('impl', '')} {r['error']}")
        elif kind == "note":
            lines.append(f"{case:14} note: {r['note']}")
        elif case in format_lines:
            lines.extend(format_lines[case](r))
    return "\n".join(lines)
