"""Process targets for tests that spawn workers (a spawned child imports its target by module
name, which test modules imported by path do not have)."""

from reward.judge import Verdict, VerdictCache


def cache_writer(path, start: int) -> None:
    """Write 50 verdicts, keys ``k{start}``..``k{start+49}``, one transaction each."""
    c = VerdictCache(path)
    for i in range(start, start + 50):
        c.put_many([(f"k{i}", Verdict(met=True, p_yes=i / 1000))])
