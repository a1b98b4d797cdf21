"""Know the judge before training on it (``rubricstree judge calibrate``).

``items`` builds the labelled items of the stress cases; ``run`` grades them and measures how the
judge errs (rates with intervals, re-read correlation, systematic leaves, soft calibration) and
what that predicts for the reward; ``record`` keeps the result by judge identity and turns it into
the stress test's error model; ``gate`` refuses a rubric stage whose judge the reward cannot
survive; ``report`` writes the Markdown report and the reliability plot.
"""

from reward.calibration.gate import JudgeGateSettings, check_judge
from reward.calibration.record import CalibrationRecord, find_calibration, load_calibration, save_calibration

__all__ = ["CalibrationRecord", "JudgeGateSettings", "check_judge", "find_calibration", "load_calibration",
           "save_calibration"]
