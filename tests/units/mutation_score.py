"""`make mutate`'s summary: the mutation score and every mutant the fast tests did not kill.

Reads mutmut 3's results in mutants/ (run from the repository root, after `mutmut run`); with
`--min P` it exits 1 when fewer than P % were killed. Killed
means a test failed on the mutant; everything else (survived, no test reached it, timeout) counts
against the score. Each surviving mutant is printed with file:line and the line it changed.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from mutmut.__main__ import (  # type: ignore[import-not-found]
    SourceFileMutationData,
    get_diff_for_mutant,
    status_by_exit_code,
    walk_mutatable_files,
)

# x_<function>__mutmut_N, or xǁ<Class>ǁ<method>__mutmut_N
_FUNC = re.compile(r"\.x(?:ǁ[^ǁ]+ǁ|_)(?P<func>.+?)__mutmut_\d+$")


def _where(path: Path, name: str, removed: str) -> int | None:
    """Line of `removed` in the function the mutant belongs to (mutmut's diff has no file lines)."""
    m = _FUNC.search(name)
    lines = path.read_text().splitlines()
    start = 0
    if m:
        define = re.compile(rf"\s*(async\s+)?def\s+{re.escape(m.group('func'))}\b")
        start = next((i for i, line in enumerate(lines) if define.match(line)), 0)
    for i in range(start, len(lines)):
        if lines[i].strip() == removed.strip():
            return i + 1
    return None


def main(argv: list[str]) -> int:
    floor = float(argv[argv.index("--min") + 1]) if "--min" in argv else 0.0
    counts: Counter[str] = Counter()
    survivors: list[str] = []
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, code in data.exit_code_by_key.items():
            status = status_by_exit_code[code]
            counts[status] += 1
            if status == "killed":
                continue
            diff = get_diff_for_mutant(name, path=data.path).splitlines()
            minus = [d[1:] for d in diff if d.startswith("-") and not d.startswith("---")]
            plus = [d[1:] for d in diff if d.startswith("+") and not d.startswith("+++")]
            line = _where(Path(path), name, minus[0]) if minus else None
            survivors.append(
                f"{path}:{line or '?'} [{status}] {name}\n      - {(minus or [''])[0].strip()}\n"
                f"      + {(plus or [''])[0].strip()}"
            )
    total = sum(counts.values())
    if not total:
        print("no mutants: run `mutmut run` first", file=sys.stderr)
        return 1
    score = 100 * counts["killed"] / total
    others = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "killed")
    print(
        f"mutation score: {counts['killed']}/{total} killed ({score:.1f} %)"
        + (f"; {others}" if others else "")
    )
    if survivors:
        print(f"\nnot killed ({len(survivors)}):")
        print("\n".join(survivors))
    if score < floor:
        print(f"\nmutation score {score:.1f} % is below the required {floor:g} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
