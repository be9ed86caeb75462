"""typedrag's English vocabulary: each word list once, a list that extends another built from it.

Imports nothing: `typedrag.text` tokenises, stems and splits sentences with these words.
"""

from __future__ import annotations

# English Snowball stopwords. The index drops them from queries (they match most passages and add
# almost nothing to BM25); the offline planners drop them, plus PLANNING_NOISE, from key phrases.
SNOWBALL_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself
    yourselves""".split()
)
# Words that carry no subject in a question ("what is the best way to get ..."): never search terms.
PLANNING_NOISE = frozenset(
    """get got also may might must shall one ones thing things really much many way ways best better good make
    someone something anyone anything people person""".split()
)
STOPWORDS = SNOWBALL_STOPWORDS | PLANNING_NOISE

# Endings `typedrag.text.terms` cuts, each with the shortest stem it may leave: a plain plural may leave three
# letters ("zoos"), but not where the "s" is the word's own ("glass", "virus", "axis").
ENDINGS = (("ing", 4), ("ed", 4), ("es", 4), ("s", 3))
OWN_S = ("ss", "us", "is")

# Words that end with a period without ending a sentence: titles, Latin and reference abbreviations.
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof st jr sr rev gen col lt sgt capt cmdr gov sen rep pres mt ft vs etc al cf eg ie ca
    approx no nos op vol vols fig figs pp ed eds inc ltd co corp bros dept univ jan feb mar apr jun jul aug
    sep sept oct nov dec est""".split()
)

# What a sentence opening with one of these is about was said before it (the reader's feature of a sentence).
PRONOUNS = frozenset("it its they their this these he she his her".split())
# A sentence that opens with one of these takes its subject from the sentence before it ("This makes Memcheck
# run more slowly", "These phenomena are due to ..."); so does one opening with a quantifier standing for a
# noun, a verb after it ("Many are fragments of comets", STANDING_IN and VERBS_AFTER). Quoted without that
# sentence, it speaks of nothing the asker can see (typedrag.engines.offline.sentences).
POINTING = PRONOUNS | frozenset("that those them such".split())
# Words of a question that point back at something said before ("it", "the other one", "both").
REFERRING = POINTING | frozenset(
    """it's itself theirs themselves him hers there then one ones other others another former latter both either
    neither same""".split()
)
STANDING_IN = frozenset("many some most several both others each few".split())
# "It is important to ...", "It may happen that ...": after "it" and a verb, one of these says "it" stands for nothing.
EXTRAPOSING = frozenset({"to", "that"})
VERBS_AFTER = frozenset(
    "is are was were have has had can could will would may might do does did also remain remained".split()
)

# Words that say what is asked rather than what about ("what is the difference", "how does it work"): carried
# into a follow-up they would pull in passages about differences or work in general. (Read among a question's
# key phrases, which hold no STOPWORDS, so none of those is listed again.)
ASKING_WORDS = frozenset(
    """difference differences differ different compare comparison similar similarity work works working happen
    happens happened mean means meaning use used using need needs want wants explain tell describe example
    examples kind kinds type types reason reasons cause causes start started change changes look looks show
    find know like actually usually often possible""".split()
)

# How a judge model says neither answer is better ("TIE", "neither"; typedrag.evaluation.pairwise).
TIE_WORDS = ("tie", "neither", "equal", "both", "draw")
