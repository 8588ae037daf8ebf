"""``python -m simulate study SPEC.toml [SPEC.toml ...] --out DIR``: trained studies and their trend reports.

Validates every spec first (one line naming the file and the key, exit 2, nothing
written), runs the models that have no point in ``DIR`` yet (each distinct model once,
:mod:`simulate.study.train.runner`), then writes each study's reports into ``DIR/NAME/``
(:mod:`simulate.study.write.report`) and, with a depth study among them, ``DIR/extrapolation.md``
(:mod:`simulate.study.write.extrapolation_report`). ``--report-only`` rebuilds the reports from
the points on disk without training anything; ``--export DEST`` also writes a copy without
weights, small enough to commit (:mod:`simulate.study.train.export`), with its own reports and a
``README.md`` (:mod:`simulate.study.write.provenance`); ``--compare OLD`` beside it lists the verdicts
that changed from OLD's reports (:mod:`simulate.study.judge.changes`). Engine flags are the sweep's. An interrupt
keeps the finished points and exits 130/143; re-running the same command resumes (an
interrupted training resumes from its last checkpoint).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from simulate.study.train.runner import ORDERS
from simulate.sweep.cli import add_engine_arguments, check_engine, lost_points, run_points
from theory.cli import CliParser, fail, output_path

__all__ = ["PROG", "build_parser", "main"]

PROG = "python -m simulate study"


def build_parser() -> CliParser:
    """The ``study`` parser."""
    parser = CliParser(prog=PROG, description="Train and score the models of one or more studies (resumable; a "
                       "model shared by two studies is trained once) and write each study's trend report. Spec "
                       "format and outputs: docs/studies.md.")
    parser.add_argument("specs", nargs="*", metavar="SPEC.toml", help="study specs (TOML)")
    add_engine_arguments(parser)
    parser.add_argument("--order", choices=ORDERS, default="longest",
                        help="the order the models train in: longest first (the shortest wall time when the study "
                             "runs to its end), or cheapest first (whole cells of the cheaper axis values early, for "
                             "a study that spans several sittings); default: %(default)s")
    parser.add_argument("--report-only", action="store_true",
                        help="write the reports from the points on disk; train nothing")
    parser.add_argument("--export", default=None, metavar="DEST",
                        help="also copy DIR without its weights to DEST (points in float32, zstd) and write the "
                             "reports there: a results folder to commit")
    parser.add_argument("--predict", nargs="+", default=None, metavar="DEPTH|width=D",
                        help="train nothing: fit the laws across depth of the depth study on the models in DIR and "
                             "write their predictions at these depths (outside the trained ones) to "
                             "DIR/prediction-L<first DEPTH>.csv and .md; with width=D (D outside the trained widths), "
                             "the laws across depth and width of the study along width, to DIR/prediction-d<D>.csv "
                             "and .md, and the values the laws were fitted on to <name>-fitted.csv: files to commit "
                             "together before the models that test them train "
                             "(simulate.study.judge.preregistration)")
    parser.add_argument("--compare", default=None, metavar="OLD",
                        help="with --export: also write DEST/changes-from-NAME (NAME: the last part of OLD, with "
                             ".md), every verdict that changed from the same studies' reports in the folder OLD "
                             "(simulate.study.judge.changes)")
    return parser


def _load(paths) -> list:
    from simulate.study.plan.spec import StudyError, check_names, load_study

    try:
        studies = [load_study(path) for path in paths]
        check_names(studies)
    except StudyError as error:
        fail(PROG, str(error))
    return studies


def _check_compare(old: str, dest, studies) -> None:
    """``--compare OLD`` needs ``--export`` and OLD's reports of every study it has (a study OLD has no folder of is
    new: nothing to compare): else one line, exit 2."""
    if dest is None:
        fail(PROG, "--compare is allowed only with --export DEST (the changes are written beside the copy)")
    for study in studies:  # what simulate.study.judge.changes reads of a run (an earlier analysis may have had no more)
        if not (Path(old) / study.name).is_dir():
            continue
        missing = [name for name in ("levels.csv", "trends.csv") if not (Path(old) / study.name / name).is_file()]
        if missing:
            fail(PROG, f"--compare {old} is not allowed: it has no {study.name}/{missing[0]} (a folder of the "
                       "same studies' reports, as --export writes)")


def main(argv: list[str] | None = None) -> int:
    """The ``study`` command; returns the exit code."""
    from simulate.study.plan.tuning import resolve_studies
    from simulate.study.train.runner import run_studies, union_sweep

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if not args.specs or args.out is None:
        fail(PROG, "one or more specs and --out DIR are needed (see --help)")
    studies = _load(args.specs)
    dest = output_path(PROG, args.export, directory=True) if args.export is not None else None
    if dest is not None and dest.resolve() == Path(args.out).resolve():
        fail(PROG, f"--export {dest} is not allowed: the copy needs a directory other than --out")
    if args.compare is not None:
        _check_compare(args.compare, dest, studies)
    if args.predict is not None:
        return _predict(studies, args, argv)
    if args.report_only:
        out = output_path(PROG, args.out, directory=True)
    else:
        check_engine(args, union_sweep(studies, args.out, args.order), PROG)
        out = output_path(PROG, args.out, directory=True)
        report = run_points(PROG, out, lambda: run_studies(
            studies, out, engine=args.engine, workers=args.workers, address=args.address,
            progress=args.progress, retry_failed=args.retry_failed, order=args.order))
        if isinstance(report, int):
            return report
        print(f"{PROG}: {report.total} models ({report.skipped} done before, {report.ran} run now, {report.failed} "
              f"failed) in {report.seconds:.1f} s on {args.engine}", file=sys.stderr)
        if lost_points(PROG, report):
            return 1
    command = " ".join([PROG, *argv])
    studies = resolve_studies(studies, out)  # a tuned study's models: those at its cells' chosen rates
    _write_reports(studies, out, command)
    if args.export is not None:
        from simulate.study.train.export import export_study_points
        from simulate.study.write.provenance import write_results_readme

        count = export_study_points(studies, out, dest)
        print(f"{PROG}: {count} models copied without weights to {dest}", file=sys.stderr)
        readme = write_results_readme(studies, _write_reports(studies, dest, command), args.export, args.specs,
                                      args.out, command)
        print(f"what the copy holds and how to go on -> {readme}")
        if args.compare is not None:
            from simulate.study.judge.changes import write_changes

            print(f"verdicts changed from {args.compare} -> {write_changes(args.compare, dest, studies)}")
    return 0


def _predict_targets(values: list[str]) -> tuple[str, list[int]]:
    """``(axis, targets)`` of ``--predict``'s values: depths (``64``, ``depth=64``) or widths (``width=128``), one
    axis, each a whole number >= 1 (one line and exit 2 otherwise)."""
    parsed = []
    for value in values:
        axis, _, number = value.rpartition("=")
        axis = axis or "depth"
        if axis not in ("depth", "width") or not number.isdigit() or int(number) < 1:
            fail(PROG, f"--predict {value} is not allowed: a depth (64 or depth=64) or a width (width=128), a whole "
                       "number >= 1")
        parsed.append((axis, int(number)))
    axes = {axis for axis, _ in parsed}
    if len(axes) > 1:
        fail(PROG, f"--predict {' '.join(values)} is not allowed: depths or widths, not both in one file")
    return axes.pop(), [number for _, number in parsed]


def _predict(studies, args, argv) -> int:
    """``--predict``: the prediction file of the depth study among ``studies``, or with ``width=D`` of the study
    along width (one line and exit 2 without one, for a target inside the trained ones or with too few trained
    depths or widths; nothing written)."""
    from simulate.study.judge.across_depth import PredictionError
    from simulate.study.judge.preregistration import FITTED_SUFFIX, write_prediction
    from simulate.study.plan.tuning import resolve_studies

    if args.export is not None or args.report_only:
        fail(PROG, "--predict is allowed without --export and --report-only: it writes the prediction file alone")
    axis, targets = _predict_targets(args.predict)
    if axis == "depth":
        study = next((s for s in studies if "depth" in s.axes), None)
        if study is None:
            fail(PROG, "--predict needs a study along depth ([study] axes = [\"depth\", ...])")
    else:
        study = next((s for s in studies if {"width", "depth"} <= set(s.axes)), None)
        if study is None:
            fail(PROG, "--predict width=... needs a study along width and depth ([study] axes = [\"width\", "
                       "\"depth\"])")
    out = Path(args.out)
    if not out.is_dir():
        fail(PROG, f"--out {out} is not allowed with --predict: no such study directory (its points are fitted)")
    try:
        path = write_prediction(resolve_studies([study], out)[0], out, targets, " ".join([PROG, *argv]), axis)
    except PredictionError as error:
        fail(PROG, str(error))
    print(f"predictions at {axis} {', '.join(map(str, targets))} -> {path}, {path.with_suffix('.md')}, "
          f"{path.with_name(path.stem + FITTED_SUFFIX + '.csv')} (commit the three alone, before any model of this "
          f"{axis} trains)")
    return 0


def _write_reports(studies, out, command: str) -> dict:
    """Every study's reports in ``out``, then the variance laws when a study runs along depth, then the judged
    pre-registrations; ``{name: the study's judgement}``, each with the pre-registrations judged against it."""
    from simulate.study.judge.variance_laws import judge_variance_laws
    from simulate.study.write.extrapolation_report import write_extrapolation
    from simulate.study.write.report import write_reports

    judgements = {}
    for study in studies:
        written = write_reports(study, out, command)
        judgements[study.name] = written.judgement
        print(f"study {study.name}: {written.points} models, {written.claims} claim rows, "
              f"{written.warnings} warnings -> {written.folder}")
    laws = judge_variance_laws(studies, out)
    if laws is not None:
        print(f"variance laws, their extrapolation test and the papers' sizes -> {write_extrapolation(laws, out)}")
        if len(laws.frame):  # (as read back: no table where no scheme was fitted)
            judgements[laws.depth_study] = dataclasses.replace(judgements[laws.depth_study], variance_laws=laws.frame)
    from simulate.study.judge.preregistration import write_judgements

    judged = write_judgements(studies, out)
    for one in judged:
        print(f"pre-registered {one.name} judged -> {Path(out) / one.name}-judged.md"
              + (f" (not judged: {one.problem})" if one.problem else ""))
    return {name: dataclasses.replace(judgement, blind_tests=tuple(one for one in judged if one.study == name))
            for name, judgement in judgements.items()}
