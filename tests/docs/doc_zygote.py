"""A fork server for the doc-example scripts: TensorFlow is imported once, each command forks.

The doc examples run ~50 Python processes (bert_tf CLIs, console scripts, example scripts);
each would spend ~4 s importing TensorFlow and Keras. The server imports them once and forks a
child per command, which runs exactly as `python ARGS` would (sys.argv, cwd, environment,
stdin/stdout/stderr, exit status). `python` and the bert-tf-* console scripts on the page's
PATH are clients (see `write_clients`); commands that are not bert_tf code (pip, ruff, pytest)
exec the real interpreter.

  python doc_zygote.py serve SOCKET BIN_DIR    # prints "ready" when it accepts commands

In a command, sys.executable is BIN_DIR/python (the client), so the Python processes it starts
(tools/benchmark.py's workers) fork from the server too.
"""

import array
import atexit
import json
import os
import signal
import socket
import sys
import traceback

# A client is a tiny script run by the real interpreter without site-packages (-S: ~20 ms).
_CLIENT = r'''#!{python} -S
import array, json, os, signal, socket, sys
ENTRY = {entry!r}
args = sys.argv[1:]
# The server imported Keras on TensorFlow; another backend needs its own interpreter.
if (os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow"
        or ENTRY is None and not (args and (args[0] in ("-", "-c") or args[0].endswith(".py")
                                            or (args[0] == "-m" and len(args) > 1
                                                and args[1].startswith("bert_tf"))))):
    os.execv({python!r}, [{python!r}] + args)
sock = socket.socket(socket.AF_UNIX)
sock.connect({socket_path!r})
request = json.dumps({{"argv": [sys.argv[0]] + args, "entry": ENTRY, "cwd": os.getcwd(),
                      "env": dict(os.environ)}}).encode()
sock.sendmsg([len(request).to_bytes(8, "big") + request],
             [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
reply = b""
while not reply.endswith(b"\n"):
    chunk = sock.recv(64)
    if not chunk:
        break
    reply += chunk
first, _, status = reply.partition(b"\n")
pid = int(first) if first.strip() else 0
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda s, f: pid and os.kill(pid, s))
while True:
    chunk = sock.recv(64)
    if not chunk:
        break
    status += chunk
sys.exit(int(status) if status.strip() else 1)
'''


def write_clients(bin_dir, socket_path, console_scripts):
    """`python` and one client per console script ({name: "module:function"}) in bin_dir."""
    os.makedirs(bin_dir, exist_ok=True)
    for name, entry in [("python", None), *console_scripts.items()]:
        path = os.path.join(bin_dir, name)
        with open(path, "w") as f:
            f.write(_CLIENT.format(python=sys.executable, entry=entry, socket_path=socket_path))
        os.chmod(path, 0o755)


def _recv_request(conn):
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    size = int.from_bytes(data[:8], "big")
    data = data[8:]
    while len(data) < size:
        data += conn.recv(size - len(data))
    return json.loads(data), list(fds)


def _run(request):
    """Runs the command in this (forked) process; returns the exit status."""
    import runpy

    argv = request["argv"]
    try:
        if request["entry"]:
            module, function = request["entry"].split(":")
            sys.argv = argv
            result = getattr(__import__(module, fromlist=[function]), function)()
            return result if isinstance(result, int) else 0
        args = argv[1:]
        if args[0] == "-m":
            sys.argv = [args[1]] + args[2:]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif args[0] == "-c":
            sys.argv = ["-c"] + args[2:]
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        elif args[0] == "-":
            sys.argv = ["-"] + args[1:]
            exec(compile(sys.stdin.read(), "<stdin>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = args
            sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
            runpy.run_path(args[0], run_name="__main__")
        return 0
    except SystemExit as exit:
        if exit.code is None:
            return 0
        if isinstance(exit.code, int):
            return exit.code
        print(exit.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _log_cpu():
    """Appends this command's CPU seconds (with its own children) to $DOC_ZYGOTE_CPU_LOG: the
    server's children are reaped by no one who would count them."""
    import resource
    path = os.environ.get("DOC_ZYGOTE_CPU_LOG")
    if path:
        usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                      resource.RUSAGE_CHILDREN)]
        with open(path, "a") as f:
            f.write(f"{sum(u.ru_utime + u.ru_stime for u in usage):.2f} {sys.argv[:2]}\n")


def _exec_as_child(path, args):
    import subprocess

    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(subprocess.call(list(args), executable=path))


def _child(conn, request, fds, client):
    conn.sendall(f"{os.getpid()}\n".encode())
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.setpgid(0, 0)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]
    sys.executable = client
    # A command that re-executes itself (bert-tf-pretrain --backend=jax runs again under
    # KERAS_BACKEND) would take this process's image and its status reply with it: run the new
    # program as a child instead and report its status.
    os.execv = _exec_as_child
    status = 1
    try:
        status = _run(request)
    finally:
        try:
            atexit._run_exitfuncs()
            _log_cpu()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            conn.sendall(f"{status}".encode())
            os._exit(status if 0 <= status < 256 else 1)


def serve(socket_path, bin_dir):
    import keras  # noqa: F401
    import numpy  # noqa: F401
    import tensorflow

    # The CUDA probing (its "failed call to cuInit" where there is no GPU) happens here, once
    # for all the children, as a fresh process does it inside bert_tf.quiet_logs' filter. (No
    # bert_tf here: the scripts of the export clients run without it.)
    tensorflow.config.list_physical_devices()

    server = socket.socket(socket.AF_UNIX)
    server.bind(socket_path)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        request, fds = _recv_request(conn)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            server.close()
            _child(conn, request, fds, os.path.join(bin_dir, "python"))
        for fd in fds:
            os.close(fd)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[2], sys.argv[3])
