"""A study written: ``study.md`` (:mod:`.report`), the results README (:mod:`.headline`, :mod:`.provenance`),
the extrapolation report (:mod:`.extrapolation_report`); each formats the judgement it is given."""
