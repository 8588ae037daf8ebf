"""``python -m simulate bench``: this simulator against a naive one, and what each technique buys.

Each row runs one setting through :func:`simulate.simulate` ("ours") and, where the
row says so, through :func:`simulate.naive.naive_simulate` (an nn.Module stack run one
sample after another), checks that both give the same statistics within Monte-Carlo
error (z-score of the final-layer ``var`` and ``angular``), and records

=====================  =============================================================
setting                row name: preset, width, tokens, depth, samples, variant
device                 cpu or cuda
ours_s, naive_s        wall-clock seconds of one run (device synchronised)
speedup                naive_s / ours_s
layer_samples_per_s    samples * depth / ours_s
tflops                 dense-equivalent model matmul flops / ours_s, in TFLOP/s (the
                       implicit product skips work, so this can beat the peak)
peak_fraction          tflops / a square-matmul peak measured in the same run
peak_mem_mb            GPU: torch.cuda.max_memory_allocated; CPU: growth of the
                       resident set during the run (sampled every 2 ms)
=====================  =============================================================

in ``DIR/bench.csv`` (written atomically) and the statistical checks in
``DIR/bench_checks.csv``; the printed table adds process CPU seconds (``ours_cpu_s``,
``naive_cpu_s``, ``cpu_speedup``: on a shared machine closer to the time on an idle core
than wall-clock) and each row's time over the base row's (``vs_base``, ``vs_base_cpu``).
``--quick`` shrinks everything to seconds (the CI smoke test). Ablation rows (on by
default, ``--no-ablate`` skips them) switch one technique off at a time, same setting:
batched samples (``looped-samples``: one ``simulate`` call per sample), the implicit
Gaussian product (``dense``; ``implicit`` = always factored, vs the cost model's
``auto``), one factorisation for the weights that share rows (``unshared-factors``),
drawing the next blocks' numbers on a background thread (``no-prefetch``), the JVP
probes of ``jac_dev`` (their cost over a var-only run; a full Jacobian would take T*d
JVPs per block); on CUDA also ``matmul_precision`` tf32 and bf16 against fp32.
Two rows time the same stack with independent and with correlated input tokens
(``input-std-1`` and ``input-std-0.02``, P1's embedding std, where the tokens collapse
towards one direction and the Gram of the rows meeting a weight is numerically singular
in float32; :func:`simulate.engine.implicit.refactor_rows`): the printed ``vs_pair`` is the
correlated row's time over the independent one's, and a line gives both throughputs.
``--scaling`` also sweeps depth, width, tokens and samples (:mod:`simulate.scaling`)
into ``DIR/scaling.csv``. Each of our runs is timed as the best of ``--repeat`` (default
3, 1 with ``--quick``); the naive one runs once. Nothing here asserts a time.

The package: :mod:`~simulate.bench.cases` (the rows), :mod:`~simulate.bench.timing` (running and
timing a row, the statistical checks), :mod:`~simulate.bench.cli` (the command line);
``--train`` is the trainer's bench (:mod:`simulate.bench.training`; with ``--batches``
:mod:`simulate.bench.batches`), ``--sweep`` the sweep engines' (:mod:`simulate.bench.sweep`),
``--scaling`` :mod:`simulate.scaling`. Every benchmark of the workbench lives here: the
services it times import nothing of it.
"""
