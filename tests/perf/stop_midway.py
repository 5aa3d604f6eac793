"""Start a command, and stop it with a signal a given number of seconds after a line of its stderr matches a
pattern, the way a user's Ctrl-C or a CI's cancel stops it halfway: what `check` says when stopped during its
benchmark stage, shown on a real machine.

    python tests/perf/stop_midway.py PATTERN SECONDS SIGNAL -- COMMAND...

Prints the command's stdout and stderr as they come and exits with the command's exit code."""
import re
import signal
import subprocess
import sys
import threading
import time


def main(argv: list[str]) -> int:
    pattern, after, sig = re.compile(argv[0]), float(argv[1]), getattr(signal, argv[2])
    cmd = argv[argv.index("--") + 1:]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    seen = threading.Event()

    def read():
        for line in proc.stderr:
            sys.stderr.write(line)
            if not seen.is_set() and pattern.search(line):
                seen.set()
    threading.Thread(target=read, daemon=True).start()
    while proc.poll() is None:
        if seen.wait(0.2):
            time.sleep(after)
            if proc.poll() is None:
                sys.stderr.write(f"[stop_midway] sending {argv[2]} {after:g} s after /{argv[0]}/\n")
                proc.send_signal(sig)
            break
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
