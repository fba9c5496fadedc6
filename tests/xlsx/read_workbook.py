"""Reads an .xlsx with openpyxl (what a Python user opens Excel files with) and prints, per
worksheet, its cells (numbers as JSON numbers, text as strings, empty as null), its frozen
pane and the number format of each cell. Usage: read_workbook.py FILE"""
import json
import sys

import openpyxl

book = openpyxl.load_workbook(sys.argv[1])
out = {"sheets": []}
for ws in book.worksheets:
    rows, formats = [], []
    for row in ws.iter_rows():
        rows.append([c.value for c in row])
        formats.append([c.number_format for c in row])
    out["sheets"].append({"name": ws.title, "freeze": ws.freeze_panes, "rows": rows, "formats": formats, "bold_header": all(c.font.b for c in ws[1] if c.value is not None)})
print(json.dumps(out, default=str))
