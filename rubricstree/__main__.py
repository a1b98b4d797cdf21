"""``python -m rubricstree``: the same command line as the ``rubricstree`` console script."""

from rubricstree import main

main()
