"""Token amounts: atto-units (int) <-> human strings, exactly."""

import pytest

from tenzro_operator.units import format_tokens, parse_tokens


@pytest.mark.parametrize("text,atto", [
    ("1", 10**18), ("1.5", 15 * 10**17), ("0.000000000000000001", 1), ("1,000 TNZO", 1000 * 10**18),
    ("250atto", 250), (7, 7), ("0", 0),
])
def test_parse(text, atto):
    assert parse_tokens(text) == atto


@pytest.mark.parametrize("bad", ["abc", "-1", "1.0000000000000000001", "nan", "1.5atto", -3])
def test_parse_rejects(bad):
    with pytest.raises(ValueError):
        parse_tokens(bad)


def test_format():
    assert format_tokens(15 * 10**17) == "1.5 TNZO"
    assert format_tokens(1234 * 10**18, symbol="") == "1,234"
    assert format_tokens(1) == "0.000000000000000001 TNZO"
    assert format_tokens(10**18 + 10**15, places=2) == "1.00 TNZO"  # rounded down to 2 places
    assert parse_tokens(format_tokens(123456789123456789123).replace(" TNZO", "")) == 123456789123456789123
    with pytest.raises(TypeError):
        format_tokens(1.5)
