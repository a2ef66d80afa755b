"""Money as integer cents: parsed from decimal strings, printed with exactly two decimals."""

from decimal import ROUND_HALF_UP, Decimal


def to_cents(text: str) -> int:
    """'49.90' -> 4990; '7.1' -> 710; '3' -> 300 (half a cent rounds up)."""
    value = Decimal(text.strip()).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return int(value * 100)


def format_cents(cents: int) -> str:
    """4990 -> '49.90'; -5 -> '-0.05'."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"
