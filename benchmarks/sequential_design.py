#!/usr/bin/env python3
"""The sequential gate's false alarms, power and repetitions, by seeded simulation.

Pure and fast (numpy, no server): ``--gates`` simulated gates of one comparison per
row, at the CVs measured on this machine (3 % quiet, 10 % with two stressed cores),
through :mod:`dbrig.analysis.sequential`'s design and compare's verdict rule. Prints,
per design and CV: the share of A/A gates that raised better/worse (false alarms:
at most alpha = 5 %, each look's level calibrated for Welch's t),
the share of 10 % (and 25 %) slowdowns called worse (power), the mean repetitions
per side, and the repetitions a fixed design needs for the same power
(``runs_needed``, compare's t-corrected formula at alpha 5 %). Then the A/A rate
at CV 30 %, where compare's threshold seldom turns a significant change into
"unchanged": the design's own rate with Welch's t, calibrated and, for comparison,
at the exact z boundaries' nominal levels (``boundaries: exact``, dbrig before the
calibration: exact for a normal statistic only). Then Welch's t alone on 100 000
A/A gates per design (the rate the calibration is for, to 0.07 points). A last
block shows why alpha is spent: "stop at the
first look with p < 0.05" on the same A/A gates.

    .venv/bin/python benchmarks/sequential_design.py --gates 2000
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from dbrig.analysis.sequential import Design, Look, simulate, welch_false_alarms
from dbrig.analysis.stats import runs_needed

CVS = (0.03, 0.10)
DESIGNS = (Design(3, 20), Design(3, 40), Design(3, 40, spending="pocock"))


@dataclass(frozen=True)
class Naive:
    """Every look at the full alpha: the rule the design replaces."""

    min: int
    max: int
    alpha: float = 0.05

    @property
    def looks(self) -> tuple[Look, ...]:
        return tuple(Look(r, r / self.max, self.alpha) for r in range(self.min, self.max + 1))


def _fixed(shift: float, cv: float, power: float) -> str:
    if power <= 0.05:
        return "-"
    return str(runs_needed(abs(shift), cv, 0.05, min(power, 0.999)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gates", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--welch-gates", type=int, default=100_000)
    args = ap.parse_args()
    print(f"{args.gates} gates per row, seed {args.seed}, alpha 0.05, threshold 5 %")
    print("design                 CV   shift  flagged  unchanged  mean reps  fixed n, same power")
    for design in DESIGNS:
        name = f"{design.spending[:6]} {design.min}..{design.max}"
        for cv in CVS:
            for shift in (0.0, -0.10, -0.25):
                found = simulate(design, cv=cv, shift=shift, gates=args.gates, seed=args.seed)
                fixed = "-" if shift == 0 else _fixed(shift, cv, found.flagged)
                print(
                    f"{name:<20} {100 * cv:4.0f}% {100 * shift:5.0f}%  {100 * found.flagged:6.1f}%"
                    f"  {100 * found.unchanged:8.1f}%  {found.mean_rounds:9.1f}  {fixed:>8}"
                )
    print("A/A at CV 30 % (the t statistic's own false-alarm rate):")
    for design in DESIGNS:
        for kind in ("calibrated", "exact"):
            tried = replace(design, boundaries=kind)
            name = f"{design.spending[:6]} {design.min}..{design.max} {kind[:5]}"
            found = simulate(tried, cv=0.30, shift=0.0, gates=args.gates, seed=args.seed)
            print(f"{name:<20} {30:4.0f}%     0%  {100 * found.flagged:6.1f}%")
    print(f"Welch's t alone (no threshold, no MDE), A/A, {args.welch_gates} gates, seed 8:")
    print("design             calibrated   exact")
    for spending in ("obrien-fleming", "pocock"):
        for rounds in (10, 20, 40):
            design = Design(3, rounds, spending=spending)  # type: ignore[arg-type]
            rates = [
                welch_false_alarms(replace(design, boundaries=kind), gates=args.welch_gates, seed=8)
                for kind in ("calibrated", "exact")
            ]
            name = f"{spending[:6]} 3..{rounds}"
            print(f"{name:<20} {100 * rates[0]:6.2f}%  {100 * rates[1]:6.2f}%")
    print("stop at the first p < 0.05 (no spending), A/A:")
    for cv in CVS:
        found = simulate(Naive(3, 20), cv=cv, shift=0.0, gates=args.gates, seed=args.seed)  # type: ignore[arg-type]
        print(f"naive 3..20           {100 * cv:4.0f}%     0%  {100 * found.flagged:6.1f}%")


if __name__ == "__main__":
    main()
