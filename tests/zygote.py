"""A fork server for the Python processes the tests start: TensorFlow is imported once, each
command forks.

A test's command would spend 3-5 s importing TensorFlow and Keras before doing anything. The
server imports them once and forks a child per command, which runs exactly as `python ARGS`
would (sys.argv, cwd, environment, PYTHONPATH, stdin/stdout/stderr, exit status; killing the
client kills the command). `python` and the bert-tf-* console scripts in the server's bin
directory are clients (see `write_clients`). A client forks `-c`, `-`, a `.py` script,
`-m bert_tf...` and a Jupyter kernel (`-m ipykernel_launcher`), and runs the rest with the real
interpreter: other modules (pip, pytest), other programs, and every command whose import-time
environment (KERAS_BACKEND, TF_*, XLA_*, JAX_*, ...) differs from the server's.

  python zygote.py serve SOCKET BIN_DIR    # prints "ready" when it accepts commands

In a command, sys.executable is BIN_DIR/python (the client), so the Python processes it starts
(tools/benchmark.py's workers) fork from the server too. `shared_python(env)` is the client of
this process's own server for env (TensorFlow's or JAX's settings); the doc-example test starts
one with the console scripts.
"""

import array
import atexit
import functools
import glob
import inspect
import json
import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import types

# Variables read when TensorFlow, Keras or JAX are imported (a command with other values needs
# its own interpreter), less those read when a program runs.
_PINNED_PREFIXES = ("TF_", "KERAS_", "XLA_", "JAX_", "CUDA_", "OMP_", "MKL_", "ONEDNN_",
                    "DNNL_", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONIOENCODING", "PYTHONUTF8")
_RUN_TIME = ("TF_CONFIG", "JAX_COORDINATOR_ADDRESS", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES")


def pinned(env):
    """The import-time part of an environment, as a client compares it with the server's."""
    found = {k: v for k, v in env.items()
             if k.startswith(_PINNED_PREFIXES) and k not in _RUN_TIME
             and not k.startswith("KERAS_DISTRIBUTION_")}
    found.setdefault("KERAS_BACKEND", "tensorflow")
    return found


# A client is a tiny script run by the real interpreter without site-packages (-S: ~20 ms).
_CLIENT = r'''#!{python} -S
import array, json, os, signal, socket, sys
ENTRY = {entry!r}
_PINNED_PREFIXES, _RUN_TIME = {prefixes!r}, {run_time!r}
{pinned_source}
args = sys.argv[1:]
# The server imported TensorFlow, Keras and JAX with its own settings; other settings (another
# backend, TF_* or XLA_* flags) need their own interpreter, as do other modules (pip, pytest).
if (pinned(os.environ) != {pinned!r}
        or ENTRY is None and not (args and (args[0] in ("-", "-c") or args[0].endswith(".py")
                                            or (args[0] == "-m" and len(args) > 1
                                                and (args[1].startswith("bert_tf")
                                                     or args[1] == "ipykernel_launcher"))))):
    os.execv({python!r}, [{python!r}] + args)
sock = socket.socket(socket.AF_UNIX)
try:
    sock.connect({socket_path!r})
except OSError:  # the server is gone (its test process ended, or it was killed): run afresh
    os.execv({python!r}, [{python!r}] + args)
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


def write_clients(bin_dir, socket_path, console_scripts, server_env):
    """`python` and one client per console script ({name: "module:function"}) in bin_dir, for
    the server started with the environment server_env."""
    os.makedirs(bin_dir, exist_ok=True)
    for name, entry in [("python", None), *console_scripts.items()]:
        path = os.path.join(bin_dir, name)
        with open(path, "w") as f:
            # The client compares with this module's `pinned`, its source copied in: the
            # client runs without importing anything it need not.
            f.write(_CLIENT.format(python=sys.executable, entry=entry, socket_path=socket_path,
                                   pinned=pinned(server_env), prefixes=_PINNED_PREFIXES,
                                   run_time=_RUN_TIME, pinned_source=inspect.getsource(pinned)))
        os.chmod(path, 0o755)


def start(root, console_scripts=None, env=None):
    """Starts a server in directory root (its socket and bin/) with environment env (this
    process's by default) and waits until it accepts commands.

    Returns (the bin directory of its clients, the server's Popen).
    """
    env = dict(os.environ if env is None else env)
    socket_path = os.path.join(root, "sock")
    bin_dir = os.path.join(root, "bin")
    write_clients(bin_dir, socket_path, console_scripts or {}, env)
    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", socket_path,
                               bin_dir], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, text=True)
    if server.stdout.readline().strip() != "ready":
        server.kill()
        raise RuntimeError(f"the fork server in {root} did not start (exit {server.wait()})")
    return bin_dir, server


_SHARED = {}  # {import-time settings: the client's path, or how often they were asked for}


def shared_python(env=None, now=False):
    """A `python` for a command run with environment env (this process's with
    TF_CPP_MIN_LOG_LEVEL=2 by default, as the tests' commands run): the client of this
    process's server for env's import-time settings (see `pinned`), started when they are
    asked for a second time (a server costs one interpreter's start-up), or at once with
    now=True (a caller with several commands to run), and stopped when this process exits;
    the real interpreter before that."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2") if env is None else dict(env)
    key = tuple(sorted(pinned(env).items()))
    found = _SHARED.get(key, 0)
    if isinstance(found, str):
        return found
    if found == 0 and not now:
        _SHARED[key] = 1
        return sys.executable
    root = tempfile.mkdtemp(prefix="zygote_")
    bin_dir, server = start(root, env=env)

    def stop():
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)
    atexit.register(stop)
    _SHARED[key] = os.path.join(bin_dir, "python")
    return _SHARED[key]


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
        elif args[0] in ("-c", "-"):
            # The code runs in a module of its own that is sys.modules["__main__"], as in a
            # fresh `python -c` (code that looks itself up there finds itself, not this file).
            main = types.ModuleType("__main__")
            main.__builtins__ = __builtins__
            sys.modules["__main__"] = main
            if args[0] == "-c":
                sys.argv = ["-c"] + args[2:]
                code = compile(args[1], "<string>", "exec")
            else:
                sys.argv = ["-"] + args[1:]
                code = compile(sys.stdin.read(), "<stdin>", "exec")
            exec(code, main.__dict__)
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
    """Appends this command's CPU seconds (with its own children) to $ZYGOTE_CPU_LOG: the
    server's children are reaped by no one who would count them."""
    import resource
    path = os.environ.get("ZYGOTE_CPU_LOG")
    if path:
        usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                      resource.RUSAGE_CHILDREN)]
        with open(path, "a") as f:
            f.write(f"{sum(u.ru_utime + u.ru_stime for u in usage):.2f} {sys.argv[:2]}\n")


@functools.cache
def _pth_paths():
    """The directories the site-packages' .pth files put on sys.path (absolute; read once)."""
    found = set()
    for sitedir in site.getsitepackages() + [site.getusersitepackages()]:
        for pth in glob.glob(os.path.join(sitedir, "*.pth")):
            with open(pth, encoding="utf-8", errors="replace") as f:
                found.update(os.path.abspath(os.path.join(sitedir, line.strip()))
                             for line in f if line.strip() and not line.startswith(("#",
                                                                                    "import")))
    return found


def _exec_as_child(path, args):
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
    # The command's PYTHONPATH in place of the server's, where a fresh interpreter puts it. An
    # entry a .pth file adds too stays (a checkout installed with `pip install -e` is both).
    own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
           if p and os.path.abspath(p) not in _pth_paths()]
    sys.path[:] = [p for p in sys.path if p not in own]
    theirs = [os.path.abspath(p) for p in request["env"].get("PYTHONPATH", "").split(os.pathsep)
              if p]
    sys.path[1:1] = theirs
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]
    # A client killed (a test's timeout, kill -9) takes its command along, as it would a process
    # it were: the client never writes, so its end of the socket reads empty only when it dies.
    def watch():
        try:
            if not conn.recv(1):
                os.killpg(0, signal.SIGKILL)
        except OSError:
            pass
    threading.Thread(target=watch, daemon=True).start()
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
    server.settimeout(5)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    parent = os.getppid()
    print("ready", flush=True)
    while True:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            if os.getppid() != parent:  # the test process is gone (killed): so is its server
                return
            continue
        conn.settimeout(None)
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
