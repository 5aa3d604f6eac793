"""The command line: the only code that writes files and decides exit codes.

Takes the user's arguments; gives reports on disk, the terminal's output and an exit code. app.py (the
commands), prepare.py (arguments to typed settings), wiring.py (engine, progress and signals for a
command), bisect.py (`diagnose bisect`), progress.py (the live progress), exits.py (the exit-code rules),
files.py (atomic writes).
"""
