"""Figures as people read them: thousands separators, about four significant digits, never
scientific notation (``1.981e+04 MB/s`` reads as ``19,810 MB/s``). Every message, console
line and report that prints a measured or expected figure goes through :func:`figure`.

>>> figure(19810.4), figure(610.34), figure(0.05), figure(42.0), figure(-1234567.8)
('19,810', '610.3', '0.05', '42', '-1,234,568')
>>> figure(float("nan")), figure(float("inf")), figure(1e30)
('nan', 'inf', '1,000,000,000,000,000,019,884,624,838,656')
>>> with_unit(19810.4, "MB/s"), with_unit(3.0, "")
('19,810 MB/s', '3')
"""

from __future__ import annotations

import math

SIGNIFICANT = 4  # digits kept below 1,000; from 1,000 up, whole numbers
MAX_DECIMALS = 12  # below 1e-12 a figure prints as 0


def figure(value: float) -> str:
    """``value`` with separators and about four significant digits, never as 1e+04."""
    if not math.isfinite(value):
        return str(value)  # 'nan', 'inf', '-inf': judges make these errors, named as such
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{round(value):,}"
    decimals = min(MAX_DECIMALS, max(0, SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))))
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def with_unit(value: float, unit: str) -> str:
    """:func:`figure` followed by its unit, when it has one."""
    return f"{figure(value)} {unit}".strip()
