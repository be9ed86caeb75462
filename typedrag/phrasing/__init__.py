"""The English typedrag reads: every word list and every pattern that reads how something is phrased, in one
place, counted (tests/test_phrasing_budget.py holds the budget a new rule must raise in the same commit).

- `words`: the vocabulary (stop words, abbreviations, the words that point back); it imports nothing, so
  `typedrag.text` builds its tokens and sentences on it;
- `content`: which words of a text carry its meaning (content words, key phrases), on `words` alone;
- `questions`: how a question is phrased (its pleasantries, its lead words, what a comparison compares, whether
  it asks for an amount);
- `kinds`: the phrasings that decide a question's type between COMPARISON and the model's pick;
- `followups`: how a follow-up leans on the conversation;
- `denials`: how a sentence says its sources lack something;
- `plans`: the offline planners, a strategy's plan read from the question's phrasing.

Nothing here imports anything of typedrag but itself (pyproject.toml's contract): patterns and words, and the
small functions that read with them; `typedrag.text` reads with them.
"""
