"""A study judged: ``judge_study(study, models) -> StudyJudgement`` (:mod:`.analysis`, by
:mod:`simulate.claims`), the judgement object and its tables (:mod:`.tables`), a row in words (:mod:`.rows`), laws
across depth (:mod:`.across_depth`) and width (:mod:`.across_width`), the predictions committed before the models
they predict and their judgement (:mod:`.preregistration`: a prediction is made by the laws fitted here), variance
laws tested blind (:mod:`.extrapolation`; a study's, one record per law: :mod:`.variance_laws`), two runs' verdicts
compared (:mod:`.changes`)."""
