from colbench.cli import main

main()
