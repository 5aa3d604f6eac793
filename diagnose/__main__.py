from diagnose.cli.app import main

main()
