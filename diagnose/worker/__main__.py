import os
import sys

from diagnose.worker.main import main

code = main(sys.argv[1])
sys.stdout.flush()
sys.stderr.flush()
# Skip interpreter teardown: Inductor's compile-worker pool can hold exit for minutes (torch #162199).
os._exit(code)
