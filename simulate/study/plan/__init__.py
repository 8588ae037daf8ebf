"""A study planned: the spec (:mod:`.spec`, by declared constraints) and the rates tuned per cell
(:mod:`.tuning`)."""
