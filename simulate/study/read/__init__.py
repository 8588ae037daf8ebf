"""A study read back: a point's long table as the claims' evidence (:mod:`.point_table`) and the models of a
study (:mod:`.models`)."""
