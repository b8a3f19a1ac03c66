#!/usr/bin/env python3
"""The sequential gate's false alarms, power and repetitions, by seeded simulation.

Pure and fast (numpy, no server): ``--gates`` simulated gates of one comparison per
row, at the CVs measured on this machine (3 % quiet, 10 % with two stressed cores),
through :mod:`dbrig.analysis.sequential`'s design and compare's verdict rule. Prints,
per design and CV: the share of A/A gates that raised better/worse (false alarms:
alpha = 5 % for a normal statistic by construction, about that with Welch's t),
the share of 10 % (and 25 %) slowdowns called worse (power), the mean repetitions
per side, and the repetitions a fixed design needs for the same power
(``runs_needed``, compare's t-corrected formula at alpha 5 %). Then the A/A rate
at CV 30 %, where compare's threshold seldom turns a significant change into
"unchanged": the design's own rate with Welch's t (the boundaries are exact for a
normal statistic). A last block shows why alpha is spent: "stop at the
first look with p < 0.05" on the same A/A gates.

    .venv/bin/python benchmarks/sequential_design.py --gates 2000
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from dbrig.analysis.sequential import Design, Look, simulate
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
        name = f"{design.spending[:6]} {design.min}..{design.max}"
        found = simulate(design, cv=0.30, shift=0.0, gates=args.gates, seed=args.seed)
        print(f"{name:<20} {30:4.0f}%     0%  {100 * found.flagged:6.1f}%")
    print("stop at the first p < 0.05 (no spending), A/A:")
    for cv in CVS:
        found = simulate(Naive(3, 20), cv=cv, shift=0.0, gates=args.gates, seed=args.seed)  # type: ignore[arg-type]
        print(f"naive 3..20           {100 * cv:4.0f}%     0%  {100 * found.flagged:6.1f}%")


if __name__ == "__main__":
    main()
