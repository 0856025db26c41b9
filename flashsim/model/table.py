"""A small table that shows as HTML in Jupyter and as aligned text in a terminal.

Results at every layer return one (the simulator's reports, the kernels' IO comparisons, the checkers' read/write
tables), so it lives at the bottom, in the model layer, with no dependency beyond the standard library.
"""
from __future__ import annotations

__all__ = ["Table"]


class Table:
    """A small table (chapter 00; checkers and real_gpu use it) that shows as HTML in Jupyter and as aligned text in a terminal."""

    def __init__(self, header: list[str], rows: list[list], caption: str = ""):
        self.header = list(header)
        self.rows = [list(r) for r in rows]
        self.caption = caption

    @staticmethod
    def _fmt(v) -> str:
        if v is None:
            return "—"
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, int):
            return f"{v:,}"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    def __str__(self) -> str:
        cells = [self.header] + [[self._fmt(v) for v in r] for r in self.rows]
        numeric = [[False] * len(self.header)] + [[isinstance(v, (int, float)) or v is None for v in r]
                                                   for r in self.rows]
        widths = [max(len(str(r[i])) for r in cells) for i in range(len(self.header))]
        lines = [self.caption] if self.caption else []
        for k, r in enumerate(cells):
            lines.append("  ".join(str(c).rjust(w) if numeric[k][i] else str(c).ljust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self.header)
        def td(v):
            align = "right" if isinstance(v, (int, float)) or v is None else "left"
            return f"<td style='text-align:{align}'>{self._fmt(v)}</td>"
        body = "".join("<tr>" + "".join(td(v) for v in r) + "</tr>" for r in self.rows)
        cap = f"<caption>{self.caption}</caption>" if self.caption else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
