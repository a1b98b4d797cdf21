"""One judge renders prompts from several threads at once: a pool's start-up probes (one thread
per endpoint) and the identity watch beside grading. A Rust fast tokenizer refuses a second
borrow while one encode runs ("RuntimeError: Already borrowed"); the renderer serialises its
tokenizer calls, so no thread's render fails and each gives what a lone render gives."""

from __future__ import annotations

import threading

from reward.judge import CHOICE, JudgeItem, Message
from reward.judge.render import PromptRenderer, load_tokenizer


def _items(n: int) -> list[JudgeItem]:
    # long, distinct texts: each render tokenises anew (no cache hit), the graded text with special
    # tokens split and the criterion without, which is when a second borrow is refused
    return [JudgeItem(conversation=(Message(role="user", content=f"question {k}: " + "why " * 1500),),
                      response=f"answer {k} " + "because " * 1500, criterion=f"criterion {k} " + "check " * 1500)
            for k in range(n)]


def test_renders_from_eight_threads_at_once_agree_with_a_lone_render(tiny_model_dir):
    tokenizer = load_tokenizer(str(tiny_model_dir))
    items = _items(160)
    alone = [PromptRenderer(tokenizer).render_ids(CHOICE, it) for it in items]  # one thread, a fresh cache
    shared = PromptRenderer(tokenizer)
    start, errors, got = threading.Barrier(8), [], {}

    def work(part: int) -> None:
        start.wait()
        try:
            for k in range(part, len(items), 8):
                got[k] = shared.render_ids(CHOICE, items[k])
        except Exception as exc:  # noqa: BLE001 - the failure this test looks for
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [got[k] for k in range(len(items))] == alone
