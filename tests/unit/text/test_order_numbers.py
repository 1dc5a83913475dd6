"""Order numbers in a message: whole, closed up, mistyped; and the example's fit."""

from __future__ import annotations

import pytest

from kefu import demo
from kefu.text.order_numbers import example_fits, read_order_number


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("where is LH-100234?", "LH-100234"),
        ("my order lh100234 has not arrived", "LH-100234"),
        ("Order #LH-100234, please", "LH-100234"),
        ("订单LH-100187到哪了", "LH-100187"),
        ("LH100599发货了吗", "LH-100599"),
        # full-width, as Chinese keyboards type it
        ("订单号：\uff2c\uff28\uff0d\uff11\uff10\uff10\uff12\uff13\uff14", "LH-100234"),
        ("first LH-100001 then LH-100002", "LH-100001"),
        ("LH-1002345 has seven digits", None),
        ("LH-10023 has five", None),
        ("XLH-100234 is not ours", None),
        ("call me on 100234", None),
        ("", None),
    ],
)
def test_order_number_default_pattern(message: str, expected: str | None) -> None:
    assert read_order_number(message, demo.ORDER_PATTERN).id == expected


def test_order_number_custom_patterns() -> None:
    assert read_order_number("order ab12345 please", r"\bAB\d{5}\b").id == "AB12345"
    assert read_order_number("order ab12345 please", r"\bAB-?\d{5}\b").id == "AB-12345"
    assert read_order_number("#98765432 where", r"\b\d{8}\b").id == "98765432"
    assert read_order_number("订单98765432到了吗", r"\b\d{8}\b").id == "98765432"
    assert read_order_number("LH-100234", r"\bAB\d{5}\b").id is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("where's my order LH-10023", "LH-10023"),  # five digits, not six
        ("订单 lh 88310 现在什么状态", "LH 88310"),  # as typed: the customer finds it
        ("LH-1002345到哪了", "LH-1002345"),
        ("\uff2c\uff28\uff0d\uff11\uff10\uff10\uff12\uff13", "LH-10023"),  # full-width
        ("where is LH-100234?", None),  # a whole number is no mistake
        ("XLH-10023 is not ours", None),
        ("LH-10023A is a product code", None),
        ("lh 5 stars", None),  # too few digits to be meant as an order number
        ("where is my order LH 100234", None),  # closed up, it is one: not mistyped
        ("call me on 10023", None),
        ("", None),
    ],
)
def test_a_mistyped_order_number(message: str, expected: str | None) -> None:
    assert read_order_number(message, demo.ORDER_PATTERN, demo.ORDER_EXAMPLE).mistyped == expected


def test_a_mistyped_number_is_looked_for_by_the_example_s_letters() -> None:
    assert read_order_number("order ab1234", r"\bAB\d{5}\b", "AB12345").mistyped == "AB1234"
    assert read_order_number("order lh-10023", r"\bAB\d{5}\b", "AB12345").mistyped is None
    # Short words before a number are not order numbers of a shop whose letters they are.
    assert read_order_number("so 2 of them broke", r"\bSO\d{6}\b", "SO123456").mistyped is None
    # One letter is an English word as often as a prefix: nothing to look for.
    assert read_order_number("a 2345678 deposit", r"\bA\d{7}\b", "A1234567").mistyped is None
    # Bare digits are prices and postcodes as often as orders: nothing to point out.
    assert read_order_number("order 1234567", r"\b\d{8}\b", "12345678").mistyped is None


def test_a_number_typed_with_a_space_is_the_order() -> None:
    assert read_order_number("where is my order LH 100234", demo.ORDER_PATTERN).id is None
    found = read_order_number("where is my order LH 100234", demo.ORDER_PATTERN, "LH-100234").id
    assert found == "LH-100234"
    assert read_order_number("order AB-12345 please", r"\bAB\d{5}\b", "AB12345").id == "AB12345"


def test_the_example_must_be_a_whole_order_number() -> None:
    assert example_fits(" LH-100234 ", demo.ORDER_PATTERN)
    assert example_fits("12345678", r"\b\d{8}\b")
    assert not example_fits("Order LH-100234", demo.ORDER_PATTERN)
    assert not example_fits("LH-10023", demo.ORDER_PATTERN)
