"""A study trained: what one model computes (:mod:`.point`, the sweep task ``study``), each distinct model
once and resumable (:mod:`.runner`), a float32 copy to commit (:mod:`.export`)."""
