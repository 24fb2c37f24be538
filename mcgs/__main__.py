from mcgs.cli import main

main()
