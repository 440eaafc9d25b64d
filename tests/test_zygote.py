"""tests/zygote.py, the fork server the tests' commands run in: a command runs as `python ARGS`
would, one that needs another interpreter (or whose server is gone) gets a fresh one, and
killing the client kills it."""

import json
import os
import signal
import subprocess
import sys
import time

import zygote

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _client():
    """The shared server's client (asked for twice: the first ask may get sys.executable)."""
    zygote.shared_python(ENV)
    return zygote.shared_python(ENV)


_PROBE = (
    "import json, os, sys\n"
    "print(json.dumps({'argv': sys.argv, 'cwd': os.getcwd(), 'stdin': sys.stdin.read(),\n"
    "                  'var': os.environ.get('ZYGOTE_TEST_VAR'), 'path': sys.path[:3],\n"
    "                  'main': sys.modules['__main__'].__dict__ is globals(),\n"
    "                  'preloaded': 'tensorflow' in sys.modules,\n"
    "                  'executable': sys.executable}))\n"
    "sys.exit(3)\n")


def _probe(tmp_path, **env):
    proc = subprocess.run([_client(), "-c", _PROBE, "a b", "--flag"],
                          input="from stdin", capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=dict(ENV, ZYGOTE_TEST_VAR="x", **env))
    assert proc.returncode == 3, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_a_command_runs_as_python_would_in_a_forked_child(tmp_path):
    seen = _probe(tmp_path, PYTHONPATH=str(tmp_path / "lib"))
    assert seen == {"argv": ["-c", "a b", "--flag"], "cwd": str(tmp_path),
                    "stdin": "from stdin", "var": "x",
                    # A fresh interpreter's path: '' (the directory) first, then PYTHONPATH.
                    "path": [str(tmp_path), str(tmp_path / "lib"), seen["path"][2]],
                    "main": True, "preloaded": True, "executable": _client()}


def test_another_import_time_environment_gets_a_fresh_interpreter(tmp_path):
    seen = _probe(tmp_path, TF_ENABLE_ONEDNN_OPTS="0")
    assert seen["preloaded"] is False and seen["executable"] == sys.executable
    assert (seen["argv"], seen["stdin"], seen["var"]) == (["-c", "a b", "--flag"],
                                                          "from stdin", "x")


def test_killing_the_client_kills_the_command(tmp_path):
    pid_file = tmp_path / "pid"
    proc = subprocess.Popen(
        [_client(), "-c",
         f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
         "time.sleep(300)"], env=ENV)
    deadline = time.time() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert child != proc.pid  # the command runs in the server's child, not in the client
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.time() + 10
    while True:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        assert time.time() < deadline, f"the command {child} outlived its killed client"
        time.sleep(0.05)


def test_a_client_whose_server_is_gone_runs_the_command_afresh(tmp_path):
    bin_dir, server = zygote.start(str(tmp_path / "zygote"), env=ENV)
    server.terminate()
    server.wait(timeout=60)
    proc = subprocess.run([os.path.join(bin_dir, "python"), "-c",
                           "import sys; print('tensorflow' in sys.modules)"],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert (proc.returncode, proc.stdout) == (0, "False\n"), proc.stderr[-2000:]
