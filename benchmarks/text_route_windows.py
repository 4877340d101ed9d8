"""Does ``litseg_nb.segment(text=...)`` segment a benchmark window as the boundary benchmark does?

For every window of the profile's boundary benchmark (:mod:`litseg_nb.evaluation.boundaries`, built
from the local books) the window's text is given to the public text route; its chunk starts (character
offsets into the text) are compared with the benchmark's own chunks of that window, same method and
profile. Counts the windows whose boundaries or chunk spans differ and those the text route cut into
several units (the profile's ``corpus.max_unit_words``; ``--whole`` lifts the cap, as the benchmark
keeps each window one unit).

    python benchmarks/text_route_windows.py --profile smoke --method token [--whole]

Smoke, token, 451 windows: before, 370 differed with the smoke cap (900 words) and 99
with the cap lifted (heading detection on a text: short first paragraphs dropped as titles, some
windows cut at heading-like lines); after, 329 with the cap (every one of them cut into units by
the cap) and 0 with it lifted.
"""
from __future__ import annotations

import argparse
import sys
import time

from litseg_nb.api import segment
from litseg_nb.segmenters.registry import chunk_units
from litseg_nb.evaluation.boundaries import BoundaryConfig, baselines_config, load_gold


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="smoke", choices=("test", "smoke"))
    ap.add_argument("--method", default="token")
    ap.add_argument("--whole", action="store_true", help="lift the unit cap (corpus.max_unit_words)")
    args = ap.parse_args()
    from litseg_nb.segmenters.registry import get_method
    from litseg_nb.errors import LitsegError

    try:
        if get_method(args.method).needs != "text":
            raise LitsegError(f"{args.method} needs a model: this check runs the rule-based methods only")
    except LitsegError as exc:
        print(f"text_route_windows: {exc}", file=sys.stderr)
        return 2
    opts = {"corpus": {"max_unit_words": 10 ** 6}} if args.whole else {}
    t0 = time.perf_counter()
    cfg = BoundaryConfig.for_profile(args.profile)
    gold = load_gold(cfg)
    bcfg = baselines_config(cfg, gold.books)
    n = cuts_differ = spans_differ = multi = 0
    examples = []
    for b in gold.books:
        for u in b.units:
            n += 1
            ref, _ = chunk_units(args.method, [(b, u)], bcfg)
            got = segment(text=u.text(b.text), method=args.method, profile=args.profile, **opts)
            first = min(c.spans[0][0] for c in got)
            rb = sorted({c.spans[0][0] - u.start for c in ref if c.from_idx > 1})
            gb = sorted({c.spans[0][0] for c in got} - {first})
            rs = sorted((c.spans[0][0] - u.start, c.spans[-1][1] - u.start) for c in ref)
            gs = sorted((c.spans[0][0], c.spans[-1][1]) for c in got)
            units = len({c.unit_id for c in got})
            multi += units > 1
            spans_differ += rs != gs
            if rb != gb:
                cuts_differ += 1
                if len(examples) < 5:
                    examples.append(f"{b.book_id}/{u.unit_id}: benchmark {rb[:4]} text route {gb[:4]} ({units} units)")
    print(f"profile={args.profile} method={args.method} unit cap={'lifted' if args.whole else 'profile'}: "
          f"{n} windows, boundaries differ in {cuts_differ}, chunk spans differ in {spans_differ}, "
          f"cut into several units {multi} ({time.perf_counter() - t0:.0f} s)")
    for e in examples:
        print("  " + e)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
