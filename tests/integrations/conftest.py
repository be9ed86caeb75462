"""Every test here runs with no network but loopback (the OpenAI stub), and fails if anything tried."""

from __future__ import annotations

import json
import os

import pytest

from . import network_guard

# Haystack decides at import whether to send usage statistics (to PostHog, from a background thread), and the
# test modules import it at collection, before any fixture: so it is switched off here, for the whole session.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

# The documents are short, as a framework hands them in, but of two sentences: an offline answer takes on-topic
# sentences beyond those that answer only from the passages it quotes, so a streamed answer is of several sentences.
TITANIC = [
    "RMS Titanic sank in the North Atlantic in April 1912 after she struck an iceberg on her maiden voyage. "
    "She went down less than three hours after the collision.",
    "The Titanic carried lifeboats for only about half of those on board, which made the disaster far deadlier. "
    "More than 1,500 of the 2,224 people aboard died when the ship sank.",
    "Titanic's hull plates and rivets became brittle in the icy water, and the collision opened six compartments. "
    "The ship was built to stay afloat with no more than four of them flooded.",
    "Warnings of ice from other ships went unheeded, and the Titanic kept close to full speed through the ice field. "
    "At that speed the lookouts saw the iceberg too late to turn away.",
    "An iceberg is a large piece of fresh-water ice that has broken off a glacier and floats in open water.",
]
QUESTION = "Why did the Titanic sink?"
PLAN = json.dumps({"sub_queries": ["Titanic iceberg collision", "Titanic lifeboats shortage"]})


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    network_guard.attempts.clear()
    network_guard.install()
    try:
        yield
    finally:
        network_guard.uninstall()
    assert network_guard.attempts == [], f"the test tried to reach the network: {network_guard.attempts}"


def is_repair(prompt: str) -> bool:
    """Whether a request is typedrag's repair round (it quotes the rejected reply and asks again)."""
    return "could not be used" in prompt


def replies_by_kind(plan: str, repair: str, answer: str):
    """A reply chosen by what a prompt asks, not by call order (a decomposing type asks its overview while it
    plans, so the order of calls is not fixed): the repair round, a plan request, or anything else."""

    def reply(prompt: str) -> str:
        if is_repair(prompt):
            return repair
        return plan if '"sub_queries"' in prompt else answer

    return reply


# A conversation whose follow-up names nothing itself: alone, "it" finds the Lusitania (its passage says
# "lifeboats" twice); read with the first question, the Titanic's passage comes first.
SHIPS = [
    "The Lusitania carried lifeboats, and more lifeboats were added after 1912, enough for all on board.",
    "RMS Titanic was a British ocean liner; she carried twenty lifeboats, too few for everyone on board.",
    "An iceberg is a large piece of fresh-water ice that has broken off a glacier and floats in open water.",
]
FIRST, FOLLOW_UP = "Tell me about the Titanic ocean liner.", "How many lifeboats did it carry?"


def read_with_history(result) -> bool:
    """Whether an answer to FOLLOW_UP was read with the first question: the Titanic carried in, its passage first."""
    return (
        bool(result.standalone_question)
        and "Titanic" in result.standalone_question
        and "twenty lifeboats" in result.sources[0].text
    )


# A long document, as a framework hands one in whole (issue 41 #18: valgrind's 212 KB NEWS made one answer take
# minutes): release notes of some 25,000 words, one sentence of which answers LONG_QUESTION.
LONG_QUESTION = "Why would I use the --track-origins option?"
LONG_ANSWER = (
    "The --track-origins=yes option makes Memcheck report where uninitialised values came from, at some cost in speed."
)
MOST_WORDS = 150  # typedrag's longest passage: 1.5 times its 100 words


def long_document() -> str:
    components = ["Memcheck", "Cachegrind", "Callgrind", "Helgrind", "DRD", "Massif", "the core", "the debugger server"]
    platforms = ["ARM64/Linux", "AMD64/FreeBSD", "X86/Solaris", "PPC64LE/Linux", "S390X/Linux", "MIPS32/Linux"]
    lines = []
    for release in range(120):
        lines.append(f"Release 3.{release}.0")
        for n in range(12):
            component, platform = components[(release + n) % len(components)], platforms[(release * n) % len(platforms)]
            lines.append(
                f"{component} on {platform} now handles {n + 2} more system calls, and bug {1000 + release * 13 + n} "
                f"about wrong results under load was fixed."
            )
        if release == 61:
            lines.append(LONG_ANSWER)
    return "\n".join(lines)
