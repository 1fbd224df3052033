"""Token units: every amount in the operator is an ``int`` of atto-units (18 decimals).

These helpers convert to and from the decimal strings people read and type.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

DECIMALS = 18
ATTO_PER_TOKEN = 10**DECIMALS

__all__ = ["ATTO_PER_TOKEN", "DECIMALS", "format_tokens", "parse_tokens"]


def format_tokens(atto: int, symbol: str = "TNZO", places: int | None = None) -> str:
    """``1500000000000000000`` -> ``"1.5 TNZO"``: exact (no float), trailing zeros trimmed,
    or rounded down to ``places`` decimals when given."""
    if not isinstance(atto, int):
        raise TypeError(f"amounts are int atto-units, got {type(atto).__name__}")
    sign = "-" if atto < 0 else ""
    whole, frac = divmod(abs(atto), ATTO_PER_TOKEN)
    frac_s = f"{frac:0{DECIMALS}d}"
    frac_s = frac_s[:places] if places is not None else frac_s.rstrip("0")
    frac_s = frac_s.rstrip("0") if places is None else frac_s
    text = f"{sign}{whole:,}" + (f".{frac_s}" if frac_s else "")
    return f"{text} {symbol}" if symbol else text


def parse_tokens(text: str | int) -> int:
    """Amount typed by a person -> atto-units.

    ``"1.5"`` or ``"1.5 TNZO"`` -> 1.5e18; ``"250atto"`` or an ``int`` -> as is (already atto).

    Raises:
        ValueError: not a number, negative, or more than 18 decimals.
    """
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"negative amount {text}")
        return text
    s = text.strip().replace("_", "").replace(",", "")
    if s.lower().endswith("atto"):
        digits = s[:-4].strip()
        if not digits.isdigit():
            raise ValueError(f"{text!r}: atto amounts are whole numbers")
        return int(digits)
    for suffix in (" TNZO", "TNZO", " tnzo", "tnzo"):
        if s.endswith(suffix):
            s = s[: -len(suffix)].strip()
            break
    try:
        d = Decimal(s)
    except InvalidOperation as exc:
        raise ValueError(f"{text!r} is not an amount (e.g. '1.5' tokens or '1500atto')") from exc
    if not d.is_finite() or d < 0:
        raise ValueError(f"{text!r}: amounts are finite and non-negative")
    atto = d * ATTO_PER_TOKEN
    if atto != atto.to_integral_value():
        raise ValueError(f"{text!r} has more than {DECIMALS} decimals")
    return int(atto)
