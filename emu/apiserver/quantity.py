"""``resource.Quantity`` as admission needs it: exact values, kube's formats and canonical text.

apimachinery keeps a quantity as a number plus the format it was written in (``DecimalSI`` for
``500m`` or ``2``, ``BinarySI`` for ``1Gi``, ``DecimalExponent`` for ``1e3``) and prints it in
canonical form in that format (``1000m`` prints ``1``, ``1024Mi`` prints ``1Gi``). Sums keep the
format of the left operand unless it is zero (``Quantity.Add``). Quota and limit messages print
quantities this way, so the arithmetic here is exact (`fractions.Fraction`) and the text is
kube's.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Any, NamedTuple

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {e: s for s, e in _DECIMAL.items()}
_BINARY_SUFFIX = {p: s for s, p in _BINARY.items()}
_TEXT = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|"
                   r"[numkMGTPE]?)$")
_NANO = Fraction(1, 10**9)


class Quantity(NamedTuple):
    """A quantity's exact ``value`` and the ``fmt`` it prints in."""

    value: Fraction
    fmt: str = DECIMAL_SI

    def __str__(self) -> str:
        return format_quantity(self.value, self.fmt)

    def add(self, other: Quantity) -> Quantity:
        """``Quantity.Add``: the sum, in this quantity's format unless this one is zero."""
        return Quantity(self.value + other.value, other.fmt if self.value == 0 else self.fmt)

    def milli(self) -> int:
        """``MilliValue``: thousandths, rounded up."""
        return math.ceil(self.value * 1000)


ZERO = Quantity(Fraction(0), DECIMAL_SI)


def parse(value: Any) -> Quantity:
    """``resource.ParseQuantity`` of a JSON value (a string, or a number as kube decodes one);
    ValueError naming the value when it is not a quantity."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', not {value!r}")
    return _parse_text(str(value).strip() if isinstance(value, str) else repr(value))


@functools.lru_cache(maxsize=1024)
def _parse_text(text: str) -> Quantity:
    m = _TEXT.match(text)
    if m is None:
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', not {text!r}")
    number, suffix = Fraction(m.group(1)), m.group(2)
    if suffix in _BINARY:
        value, fmt = number * 1024 ** _BINARY[suffix], BINARY_SI
    elif suffix[:1] in ("e", "E"):
        value, fmt = number * Fraction(10) ** int(suffix[1:]), DECIMAL_EXPONENT
    else:
        value, fmt = number * Fraction(10) ** _DECIMAL[suffix], DECIMAL_SI
    # kube keeps nine decimal places at most, rounding up
    if (value / _NANO).denominator != 1:
        value = Fraction(math.ceil(value / _NANO)) * _NANO
    return Quantity(value, fmt)


def format_quantity(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """``Quantity.String``: the canonical text of ``value`` in ``fmt`` (``CanonicalizeBytes``):
    BinarySI for whole values of at least 1024 in magnitude (the largest power of 1024 that
    divides them), else the largest exponent that is a multiple of three and leaves a whole
    mantissa, with an SI suffix (``DecimalSI``) or ``e<n>`` (``DecimalExponent``)."""
    if value == 0:
        return "0"
    if fmt == BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        n, power = int(value), 0
        while power < 6 and n % 1024 == 0:
            n //= 1024
            power += 1
        return f"{n}{_BINARY_SUFFIX[power]}" if power else str(n)
    exp = -9
    while exp < 18 and (value / Fraction(10) ** (exp + 3)).denominator == 1:
        exp += 3
    mantissa = int(value / Fraction(10) ** exp)
    if fmt == DECIMAL_EXPONENT:
        return f"{mantissa}e{exp}" if exp else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exp]}"


def canonical(value: Any) -> str:
    """The canonical text of a quantity given as JSON (what kube stores for ``1024Mi``)."""
    return str(parse(value))
