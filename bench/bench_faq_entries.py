"""A small FAQ offline (issue 57 P1 and N7): how many exact answers filed under a question heading are answered,
and how many placeholders or adverts filed under the question asked are abstained on, with plain RAG and Typed-RAG.

The FAQ is tests/test_non_answers.py's library FAQ (7 one-sentence entries) and a help centre's entry under
"How do I reset my password?" holding, in turn, an answer and four non-answers. Run on two checkouts:

    python bench/bench_faq_entries.py
    PYTHONPATH=/path/to/other/checkout python bench/bench_faq_entries.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

from typedrag import ListRetriever, OfflineEngine, Pipeline  # noqa: E402
from typedrag.records import Passage  # noqa: E402

FAQ = [
    ("How many books can I borrow at once?", "Each card holder may have up to 30 items on loan at a time."),
    ("Why was my account blocked?", "Accounts are blocked automatically when unpaid fines exceed ten dollars."),
    (
        "Is there Wi-Fi in the library?",
        "Free Wi-Fi is available in every branch; the network name is GreenfieldGuest and no password is needed.",
    ),
    ("Where can I park?", "Visitors can use the free car park behind the main branch for up to three hours."),
    (
        "How do I donate books?",
        "Donations in good condition can be dropped off at the main branch on Saturday mornings.",
    ),
    ("How long can I keep a book?", "The loan period is three weeks for books and one week for DVDs."),
    (
        "Can I print documents at the library?",
        "Black-and-white printing costs 10 cents per page and colour printing 50 cents per page.",
    ),
]
EXACT = [  # a user's wording, the entry that answers it
    ("How many items can I borrow?", 0),
    ("Why is my account blocked?", 1),
    ("Does the library have Wi-Fi?", 2),
    ("Where do I park my car?", 3),
    ("How can I donate my old books?", 4),
    ("Can I print at the library?", 6),
]
RESET = "How do I reset my password?"
ANSWER = "Click Forgot password on the sign-in page and follow the link we email you."
NON_ANSWERS = [
    "TODO: this section has not been written yet.",
    "Win big at LuckyStar Casino tonight: claim 200 free spins and a 500% welcome bonus at luckystar-casino.example!",
    "Content for this entry will be added in a future release of the documentation.",
    "Follow us on Twitter and Instagram for the latest news and updates from our team.",
]


def library() -> Pipeline:
    passages = [
        Passage(
            f"faq#{i}", "faq", "Library: frequently asked questions", text, section=f"Frequently asked questions › {h}"
        )
        for i, (h, text) in enumerate(FAQ)
    ]
    return Pipeline(OfflineEngine(), ListRetriever(passages))


def help_centre(under_reset: str) -> Pipeline:
    entries = [
        (RESET, under_reset),
        (
            "How do I change my email address?",
            "Open Settings, choose Account, and type the new address in the Email field.",
        ),
        (
            "How do I delete my account?",
            "Write to support from the address on the account and we remove it within 30 days.",
        ),
    ]
    return Pipeline(
        OfflineEngine(),
        ListRetriever(
            [
                Passage(f"help#{i}", "help", "Account help", t, section=f"Account help › {h}")
                for i, (h, t) in enumerate(entries)
            ]
        ),
    )


async def main() -> None:
    print(machine_line())
    for method in ("rag", "typed"):
        answered = []
        for question, entry in EXACT:
            result = await library().answer(question, method)
            if result.abstention is None and FAQ[entry][1] in result.answer:
                answered.append(question)
        held = []
        for text in NON_ANSWERS:
            result = await help_centre(text).answer(RESET, method)
            if result.abstention is not None:
                held.append(text[:30])
        real = await help_centre(ANSWER).answer("How can I reset my password?", method)
        print(
            f"{method}: exact answers answered {len(answered)} of {len(EXACT)} ({', '.join(answered)}); "
            f"non-answers abstained on {len(held)} of {len(NON_ANSWERS)}; the real reset entry answered: {real.abstention is None}"
        )


if __name__ == "__main__":
    asyncio.run(main())
