"""The embedding router's critical safety net: its setting for prompts read by the multilingual
encoder is never stricter than the English one, and switching the net off switches both off."""

from __future__ import annotations

import pytest

from reward.router.embedding import CRITICAL_THRESHOLD, CRITICAL_THRESHOLD_MULTILINGUAL, EmbeddingRouter
from reward.tree import load_tree


@pytest.fixture(scope="module")
def tree():
    return load_tree()


def test_defaults_and_the_config_record_both_nets(tree):
    r = EmbeddingRouter(tree, multilingual=None)
    assert (r.critical_threshold, r.critical_threshold_multilingual) == (CRITICAL_THRESHOLD,
                                                                          CRITICAL_THRESHOLD_MULTILINGUAL)
    assert CRITICAL_THRESHOLD_MULTILINGUAL < CRITICAL_THRESHOLD  # a cross-lingual match is weaker
    cfg = r.config()
    assert cfg["critical_threshold"] == CRITICAL_THRESHOLD
    assert cfg["critical_threshold_multilingual"] == CRITICAL_THRESHOLD_MULTILINGUAL


def test_a_lowered_net_lowers_the_multilingual_one_too(tree):
    r = EmbeddingRouter(tree, multilingual=None, critical_threshold=0.35)
    assert r.critical_threshold_multilingual == 0.35
    r = EmbeddingRouter(tree, multilingual=None, critical_threshold=0.8, critical_threshold_multilingual=None)
    assert r.critical_threshold_multilingual == 0.8


def test_no_net_means_no_net_in_any_language(tree):
    r = EmbeddingRouter(tree, multilingual=None, critical_threshold=None)
    assert r.critical_threshold is None and r.critical_threshold_multilingual is None


def test_out_of_range_is_refused(tree):
    with pytest.raises(ValueError, match="critical_threshold_multilingual"):
        EmbeddingRouter(tree, multilingual=None, critical_threshold_multilingual=1.5)
