"""Taxonomy evolution: measure what the tree cannot check, propose leaves, review, version.

The RubricsTree paper grows its tree by lowering the residual clinical ambiguity E(q, L) (the
share of what a query needs that no leaf verifies) under a complexity penalty on added leaves.
HealthBench rows give a physician-written measure of what a query needs (its rubric items), so

    rows --coverage--> E per conversation (routed leaves and all leaves), uncovered items
         --propose---> clustered gaps, drafted leaves, predicted gain per leaf -> proposals.yaml
         --review----> accept / reject / edit each proposal (terminal or a ``decision:`` field)
         --apply-----> a new taxonomy version with a changelog entry, validated, re-weighted
         --diff------> added, removed, moved and changed leaves and weight changes

One module per step (``coverage``, ``propose``, ``review``, ``apply``, ``diff``) plus their
helpers (``encoder``, ``matchers``, ``cluster``, ``draft``, ``proposals``, ``taxonomy_io``).
Nothing here edits a taxonomy file in place, and nothing imports ``training``.
"""
