"""Oracle stress tests of the rubric reward (the RubricsTree paper's validation).

Cases (``cases``) pair a clean reply with one written under a perturbation (missing instructions,
missing user data, inappropriate instructions, inaccurate user data) and label the leaves it fails.
``runner`` routes and scores both replies, from the labels (oracle mode) or with our judge, and
optionally asks a holistic 1-10 judge (``baseline``); ``metrics`` gives detection rate and mean
penalty overall, by perturbation, scenario and cell; ``report`` writes md/html and a heatmap.
The command is ``rubricstree stress``.
"""

from reward.stress.cases import FAMILIES, PERTURBATIONS, SCENARIOS, StressCase, default_cases_path, load_cases
from reward.stress.metrics import DEFAULT_MARGIN, public_summary, summarise
from reward.stress.runner import CaseResult, oracle_met, oracle_scores, oracle_variant_table, run_stress, with_labels

__all__ = ["DEFAULT_MARGIN", "FAMILIES", "PERTURBATIONS", "SCENARIOS", "CaseResult", "StressCase", "default_cases_path",
           "load_cases", "oracle_met", "oracle_scores", "oracle_variant_table", "public_summary", "run_stress",
           "summarise", "with_labels"]
