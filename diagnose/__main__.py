"""`python -m diagnose`: the command line (cli/app.py)."""
from diagnose.cli.app import main

if __name__ == "__main__":     # a triage's Dask workers start by spawning, which imports this module again
    main()
