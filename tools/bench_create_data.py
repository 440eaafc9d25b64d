"""The `create_data` case of tools/benchmark.py: create_pretraining_data against the original.

tools/create_pretraining_data.py wall time, CPU time and peak RSS on the demo corpus, 3 MB and
20 MB (five files) of CPython's shipped prose, with --num_workers 1 and 2, against the original
script (--original_bert_dir, run on TF 2 by bench_scripts/run_original_create_pretraining_data.py);
on 20 MB the workers curve: 1 and 2 workers pinned to 1 and 2 cores.

This module must not import tools/benchmark.py (run as __main__, importing it again would
define its flags twice): benchmark.py registers WORKERS and passes the flag values in.
"""

import os
import sys

from bench_common import REPO, SCRIPTS, load, log_tail, print_row, time_process


def _count_records(path):
    """Number of records in an uncompressed TFRecord file (length-prefixed framing, no TF)."""
    count = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(12)  # uint64 length + uint32 masked CRC of the length
            if len(header) < 12:
                return count
            f.seek(int.from_bytes(header[:8], "little") + 4, os.SEEK_CUR)
            count += 1


def _shipped_documents():
    """English prose every CPython install carries, as documents (lists of sentences): the
    reference manual (pydoc_data topics, ~0.34 MB) and the standard library's docstrings of
    more than 200 characters (~1.6 MB). Nothing is downloaded."""
    import ast
    import sysconfig

    from bert_tf.data.pretraining.demo_corpus import pydoc_documents, split_sentences

    documents = pydoc_documents()
    stdlib = sysconfig.get_paths()["stdlib"]
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "__pycache__"))
        for name in sorted(f for f in files if f.endswith(".py")):
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue  # test data of the stdlib holds deliberately broken files
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                         ast.AsyncFunctionDef)):
                    continue
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    sentences = [s for p in doc.split("\n\n") for s in split_sentences(p)]
                    if len(sentences) >= 2:
                        documents.append(sentences)
    return documents


def write_shipped_corpus(paths, total_bytes, seed=0):
    """Writes about total_bytes of the shipped prose over `paths` (equal parts, whole documents).

    Past the ~2 MB of distinct text, the documents repeat, each pass with the documents and the
    sentences within each document in a new random order (seeded), so instances differ while the
    vocabulary stays that of real prose. Returns the bytes written.
    """
    import random

    from bert_tf.data.pretraining.demo_corpus import format_documents

    base = _shipped_documents()
    rng = random.Random(seed)
    per_file = total_bytes // len(paths)
    written = 0
    order = []
    for path in paths:
        size = 0
        with open(path, "w", encoding="utf-8") as f:
            while size < per_file:
                if not order:
                    order = [list(d) for d in base]
                    rng.shuffle(order)
                    for doc in order:
                        rng.shuffle(doc)
                text = format_documents([order.pop()]) + "\n"
                f.write(text)
                size += len(text.encode("utf-8"))
        written += size
    return written


def case_create_data(setup, quick, original_bert_dir=None):
    """tools/create_pretraining_data.py against the original at several corpus sizes.

    Sizes: the demo corpus (0.34 MB), one 3 MB file and a 20 MB corpus of five 4 MB files
    (--quick: the 20-document demo corpus and 1 MB in two files). Every row records wall
    seconds, CPU seconds (user + system, workers included: per-core cost, which other load on
    the machine does not inflate) and peak RSS; ratios against the original are by both. On the
    largest corpus, the workers curve: 1 and 2 workers pinned to 1 and 2 cores.
    original_bert_dir: a google-research/bert checkout to run the original from, or None.
    """
    setup.ensure()
    workdir = os.path.join(setup.workdir, "create_data")
    os.makedirs(workdir, exist_ok=True)
    corpora = {round(os.path.getsize(setup.corpus) / 1e6, 3): setup.corpus}
    for mb, num_files in ((1, 2),) if quick else ((3, 1), (20, 5)):
        paths = [os.path.join(workdir, f"shipped_{mb}mb_{i}.txt") for i in range(num_files)]
        size = write_shipped_corpus(paths, mb * 1_000_000)
        corpora[round(size / 1e6, 3)] = ",".join(paths)
    flags_common = ["--vocab_file=" + setup.vocab, "--do_lower_case=true", "--max_seq_length=128",
                    "--max_predictions_per_seq=20", "--dupe_factor=5", "--random_seed=12345",
                    "--masked_lm_prob=0.15", "--short_seq_prob=0.1"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    shim = os.path.join(SCRIPTS, "run_original_create_pretraining_data.py")
    all_cores = sorted(os.sched_getaffinity(0))
    largest = max(corpora)
    rows = []
    for corpus_mb, corpus in corpora.items():
        # (impl, workers, cores): cores None = unpinned.
        runs = [("bert_tf", 1, None), ("bert_tf", 2, None)]
        if corpus_mb == largest and len(all_cores) >= 2:
            runs = [("bert_tf", w, all_cores[:c]) for c in (1, 2) for w in (1, 2)]
        if original_bert_dir:
            runs.append(("original", 1, None))
        for impl, workers, cores in runs:
            tag = f"{impl}_w{workers}_c{len(cores) if cores else 0}_{corpus_mb}"
            out = os.path.join(workdir, tag + ".tfrecord")
            if impl == "bert_tf":
                cmd = [sys.executable, os.path.join(REPO, "tools", "create_pretraining_data.py"),
                       "--input_file=" + corpus, "--output_file=" + out,
                       f"--num_workers={workers}"] + flags_common
            else:
                script = os.path.join(original_bert_dir, "create_pretraining_data.py")
                cmd = [sys.executable, shim, script, "--input_file=" + corpus,
                       "--output_file=" + out] + flags_common
            log = out + ".log"
            load_avg = load()
            wall, rss_mb, rc, cpu_s = time_process(cmd, workdir, log, env, cores)
            row = {"case": "create_data", "kind": "run", "impl": impl, "num_workers": workers,
                   "cores": len(cores) if cores else len(all_cores), "pinned": bool(cores),
                   "corpus_mb": corpus_mb, "corpus_files": corpus.count(",") + 1,
                   "wall_s": round(wall, 2), "cpu_s": round(cpu_s, 2),
                   "peak_rss_mb": round(rss_mb, 1), "load_avg": load_avg, "returncode": rc}
            if rc != 0:
                row["error"] = log_tail(log)
            if rc == 0:
                row["records"] = _count_records(out)
                worker_rss = _worker_peak_rss_mb(log)
                if worker_rss is not None:
                    row["worker_peak_rss_mb"] = worker_rss
            if os.path.exists(out):
                os.remove(out)  # 20 MB of text makes ~300 MB of records per run
            rows.append(row)
            print_row(row)
    originals = {r["corpus_mb"]: r for r in rows
                 if r["impl"] == "original" and r["returncode"] == 0}
    for r in rows:
        base = originals.get(r["corpus_mb"])
        if base and r["returncode"] == 0:
            r["speedup_vs_original"] = round(base["wall_s"] / r["wall_s"], 2)
            r["cpu_speedup_vs_original"] = round(base["cpu_s"] / r["cpu_s"], 2)
            r["memory_ratio_vs_original"] = round(r["peak_rss_mb"] / base["peak_rss_mb"], 2)
    curve = {(r["num_workers"], r["cores"]): r for r in rows
             if r["corpus_mb"] == largest and r["impl"] == "bert_tf" and r["pinned"]
             and r["returncode"] == 0}
    if (1, 1) in curve:
        for r in curve.values():
            r["speedup_vs_1_worker_1_core"] = round(curve[(1, 1)]["wall_s"] / r["wall_s"], 2)
    return rows


def _worker_peak_rss_mb(log_path):
    """The largest worker's peak RSS that create_pretraining_data logs with --num_workers > 1."""
    import re

    with open(log_path, errors="replace") as f:
        match = re.search(r"largest worker ([0-9.]+) MB", f.read())
    return float(match.group(1)) if match else None


# The measured commands are the CLIs themselves (under time_process), not workers.
WORKERS = {}


def format_lines(r):
    """The table lines of one create_data row (errors and notes aside)."""
    extra = (f"  x{r['speedup_vs_original']} faster" if "speedup_vs_original" in r else "")
    return [f"{r['case']:14} {r['impl']:8} workers={r['num_workers']} corpus "
            f"{r['corpus_mb']:.2f} MB: {r['wall_s']:7.1f} s, peak RSS "
            f"{r['peak_rss_mb']:7.0f} MB{extra}"]
