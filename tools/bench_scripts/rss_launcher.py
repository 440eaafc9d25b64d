"""Forks and execs a command, then writes the child's exit code, ru_maxrss (KB) and CPU
seconds to argv[1]; for bench_common.time_process.

Linux carries the RSS of the process that forks into the child's ru_maxrss, so the measured
command must be forked from this small interpreter (run with python -S), not from the
benchmark's own big one.
Usage: python -S rss_launcher.py <result file> <comma list of CPU ids or ""> <command...>
"""

import os
import sys

pid = os.fork()
if pid == 0:
    try:
        if sys.argv[2]:
            os.sched_setaffinity(0, {int(c) for c in sys.argv[2].split(",")})
        os.execvp(sys.argv[3], sys.argv[3:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss} "
            f"{usage.ru_utime + usage.ru_stime}")
