"""The command line: the only code that writes files and decides exit codes.

Takes the user's arguments; gives reports on disk, the terminal's output and an exit code. app.py (the
commands), options.py (the options every command shares: declared once, one typed record that checks them and
writes them as a child's argv), prepare.py (arguments to typed settings), wiring.py (engine, progress and signals
for a command), bisect.py (`diagnose bisect`), triage_cmd.py and triage.py (`diagnose triage`: its arguments, and
the rows diagnose/triage/ yields written), ledger_file.py (the triage's ledger on disk), progress.py (the live
progress), exits.py (the exit-code rules), files.py (atomic writes).
"""
