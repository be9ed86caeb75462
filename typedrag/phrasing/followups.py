"""How a follow-up question leans on the conversation (typedrag.followup reads it with these and with
typedrag.phrasing.words' REFERRING and ASKING_WORDS)."""

from __future__ import annotations

import re

# Openings of a question that continues the previous one ("and ...", "what about ...", "why?").
CONTINUES = re.compile(
    r"^(?:and|but|or|also|so|then|what about|how about|what else|anything else|any other|why not|how come|how so|"
    r"in what way|which one|which of)\b",
    re.I,
)
