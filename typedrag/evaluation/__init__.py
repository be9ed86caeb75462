"""The evaluation harness: Wiki-NFQA (or your own graded data) judged with LINKAGE, scored by MRR and MPR.

- datasets: load questions with graded references; the seeded, source-stratified --limit sample
- linkage: reference selection, the judge prompt, verdict parsing, rank conventions, rounds
- judges: the LLM judge and the offline embedding-similarity proxy
- metrics: MRR / MPR per method x type x source
- runner: `evaluate(EvalOptions, Settings)`, concurrent, resumable and crash-safe
- report: Markdown/CSV tables, the MPR chart, summary.json
- command: `typedrag eval`

Nothing is imported here, so `import typedrag.evaluation.command` stays light.
"""
