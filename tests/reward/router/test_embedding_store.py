"""The durable embedding store: a text embedded once per machine, read back in a new process (here:
a cleared in-memory map), and missed after a library upgrade (the key carries the versions)."""

from __future__ import annotations

import numpy as np

import reward.router.embedding_store as store


def test_stored_once_read_back_and_missed_after_an_upgrade(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, str(tmp_path / "emb.sqlite"))
    monkeypatch.setattr(store, "_memory", {})
    calls: list[list[str]] = []

    def compute(texts):
        calls.append(list(texts))
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)

    first = store.embed("enc", ["a", "bb"], compute)
    store._memory.clear()  # a new process: only the file remains
    again = store.embed("enc", ["bb", "a"], compute)
    assert calls == [["a", "bb"]]
    np.testing.assert_array_equal(again, first[::-1])  # exact: the stored float32 bytes

    store._memory.clear()
    monkeypatch.setattr(store, "_versions", lambda: "torch=99")  # an upgraded library
    store.embed("enc", ["a"], compute)
    assert calls == [["a", "bb"], ["a"]]
