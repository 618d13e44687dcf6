"""EvoRAG feedback learning: contribution scores, hybrid priority, backpropagation, path utility
evaluators and relation-centric KG evolution (EvoRAG §4–5, §6.12; DESIGN §4).

- :mod:`.scores` — raw scores (init 100) in the store, normalized S_c = clip(raw/200, 0, 1);
- :mod:`.priority` — P(t) (eq. 2) and path priority P(L_i) (eq. 3);
- :mod:`.backprop` — loss (eq. 4), exact gradients (eq. 5–7) and the bounded update (eq. 8–9);
- :mod:`.evaluators` — path utility U ∈ [−1, 1]: LLM judge, answer support, gold;
- :mod:`.evolution` — relation fusion and suppression (§5.1, Algorithm 1).

The default plugin that wires them to the hooks is
:class:`triage_plugins.plugins.feedback.FeedbackLearner`.
"""
