"""An HTML table as the grid a reader sees: each cell's text in every row and column it spans."""

from __future__ import annotations

from html.parser import HTMLParser


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: list[list[tuple[int, int, str]]] = []  # (rowspan, colspan, text) per cell
        self._text: list[str] | None = None
        self._span = (1, 1)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            a = dict(attrs)
            self._span = (int(a.get("rowspan") or 1), int(a.get("colspan") or 1))
            self._text = []

    def handle_endtag(self, tag):
        if tag == "td" and self._text is not None:
            self.rows[-1].append((*self._span, "".join(self._text).strip()))
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def html_grid(table_html: str) -> list[list[str]]:
    """Rows x columns of cell texts; a spanning cell's text fills every slot it covers."""
    parser = _Cells()
    parser.feed(table_html)
    slots: dict[tuple[int, int], str] = {}
    for r, row in enumerate(parser.rows):
        c = 0
        for rowspan, colspan, text in row:
            while (r, c) in slots:
                c += 1
            for i in range(r, r + rowspan):
                for j in range(c, c + colspan):
                    slots[(i, j)] = text
            c += colspan
    rows = 1 + max((r for r, _ in slots), default=-1)
    cols = 1 + max((c for _, c in slots), default=-1)
    return [[slots.get((r, c), "") for c in range(cols)] for r in range(rows)]
