"""rubricstree reward core: the rubric tree, the judge, routers, scoring and rule rewards.

This package imports in milliseconds: nothing here imports torch, transformers, TRL or verl at
module level. Trainer adapters and the in-process judge backend import them lazily.
"""

__version__ = "0.1.0"
