"""Sentence shapes: what a cause, a step, a stance, a piece of advice or a contrast looks like in words.

Each typed answer adds to plain RAG's lead only sentences of its own shape, so these read how a
sentence is built (a causal connective, an imperative, a contrast), never what a corpus is about.
"""

from __future__ import annotations

import re

# States a cause, a reason or a mechanism.
CAUSE = re.compile(
    r"\b(?:because|due to|caus\w*|reasons?|owing to|since|after|following|so that|therefore|thus|hence|as a result of|"
    r"factors?|explain\w*|why|responsible for|triggered|contributed|blamed|attributed|in order to|needed to|"
    r"necessary|prevents?|otherwise)\b",
    re.I,
)
# States an effect.
CONSEQUENCE = re.compile(
    r"\b(?:result(?:s|ed|ing)? in|led to|leads? to|as a (?:result|consequence)|consequen\w*|effects?|"
    r"so that|therefore|thus|hence|afterwards|which (?:means|meant|made|makes|caused))\b",
    re.I,
)
# Tells the reader what to do: an imperative opening (after "First," "Then," or "To do X,"), a modal
# addressed to the reader, or a sequence word. A sentence that defines something ("X is a Y") is none.
_IMPERATIVE = (
    r"add|adjust|allow|apply|avoid|bake|boil|build|call|change|check|choose|clean|click|close|compile|configure|"
    r"connect|copy|create|cut|define|delete|disable|do|download|drain|edit|enable|enter|install|keep|knead|"
    r"leave|let|list|load|make|mix|mount|move|open|pass|place|plug|pour|prepare|press|put|read|reboot|"
    r"register|reload|remove|rename|repeat|replace|restart|restore|run|save|select|send|set|shape|start|stir|"
    r"stop|store|switch|take|test|try|turn|type|uninstall|unplug|update|upgrade|use|verify|wait|wash|write"
)
STEP = re.compile(
    rf"^(?:(?:first|then|next|now|finally|afterwards|after that|second|third|to [\w\s-]{{1,40}}),?\s+)?(?:{_IMPERATIVE})\b|"
    r"\byou (?:can|should|must|need to|have to|will need to|may want to)\s+\w+|"
    r"^(?:first|then|next|finally|afterwards|once)\b",
    re.I,
)
# Argues: for, against, or any stance at all.
FOR = re.compile(
    r"\b(?:support\w*|benefit\w*|advantage\w*|argue\w*|in favou?r|proponents?|advocat\w*|improv\w*|help\w*|"
    r"reduc\w*|protect\w*|effective|positive|safer|saves?|promot\w*|allow\w*|enabl\w*|necessary)\b",
    re.I,
)
AGAINST = re.compile(
    r"\b(?:oppos\w*|critic\w*|against|risks?|harm\w*|concerns?|danger\w*|costs?|negative|problems?|ban\w*|"
    r"controvers\w*|objections?|threat\w*|damag\w*|fail\w*|ineffective|abuse\w*|violat\w*|unfair|drawbacks?|"
    r"disadvantages?|however|but)\b",
    re.I,
)
STANCE = re.compile(f"{FOR.pattern}|{AGAINST.pattern}", re.I)
# Advises, recommends or reports what worked.
ADVICE = re.compile(
    r"\b(?:should|recommend\w*|advis\w*|advice|tips?|suggest\w*|best|ideal|avoid\w*|prefer\w*|consider\w*|"
    r"important|helps?|useful|beginners?|choose|choice|must|try|usually|better to|good idea|make sure)\b",
    re.I,
)
# Relates compared items, by the purpose of the comparison.
RELATION = {
    "difference": re.compile(r"\b(?:whereas|while|unlike|than|differ\w*|distinct\w*|contrast|instead|but|rather|only)\b", re.I),
    "similarity": re.compile(r"\b(?:both|similar\w*|alike|also|same|share\w*|common|like|as well)\b", re.I),
    "superiority": re.compile(
        r"\b(?:better|worse|more|less|faster|slower|advantage\w*|prefer\w*|superior|than|best|recommend\w*|instead)\b", re.I
    ),
}
