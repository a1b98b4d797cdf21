"""Meta-evaluation of the reward: agreement with experts, the HealthBench grader meta-eval and
stability across temperatures and judge backbones.

``agreement`` holds the pure statistics; ``formats`` the input records; ``experts``,
``healthbench`` and ``stability`` the runners (they use judges and routers, never ``training``);
``report`` writes markdown, HTML and PNG reports (matplotlib imported lazily).
"""
