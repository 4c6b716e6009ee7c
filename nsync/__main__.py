from nsync.cli import main

main()
