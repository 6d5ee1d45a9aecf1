"""check/_raised.py: what learner host code raised, in catalogue words."""

from cudacourse.check import _raised


def test_a_float_grid_is_singled_out_with_the_value_numba_refused():
    assert _raised.launch_not_integers(
        TypeError("griddim must be a sequence of integers, got [4.90234375]")) == "[4.90234375]"
    assert _raised.launch_not_integers(TypeError(
        "expected a sequence of integers or a single integer, got '142.8'")) == "'142.8'"
    assert _raised.launch_not_integers(TypeError("unsupported operand type(s)")) == ""
    assert _raised.launch_not_integers(ValueError("griddim must be a sequence of integers, "
                                                  "got [1.5]")) == ""


def test_known_python_texts_become_catalogue_words_and_others_stay_as_raised():
    assert _raised.words(IndexError("list index out of range")) == \
        "an index past the end of a Python list"
    assert _raised.words(ZeroDivisionError("division by zero")) == "a division by zero"
    assert _raised.words(KeyError("x")) == "'x'"


def _raise(code: str) -> BaseException:
    try:
        exec(code, {})
    except Exception as exc:  # noqa: BLE001 - the exception is the subject
        return exc
    raise AssertionError("did not raise")


def test_host_exceptions_that_single_out_the_mistake_are_named():
    def f():
        n = n + 1  # noqa: F821
        return n

    try:
        f()
    except UnboundLocalError as exc:
        cause, text = _raised.named(exc, f, "f")
        assert cause == "used_before_assigned" and "n = n + 1" in str(text)
    assert _raised.named(AttributeError("'list' object has no attribute 'squeeze'"), None,
                         "f")[0] == "list_for_array"
    assert _raised.named(AttributeError("'float' object has no attribute 'shape'"), None,
                         "f")[0] == "number_for_array"
    assert _raised.named(TypeError("unsupported operand type(s) for +: 'int' and 'device "
                                   "array'"), None, "f")[0] == "array_for_number"
    # two numbers, or an attribute a number's class really lacks: nothing singled out
    assert _raised.named(TypeError("unsupported operand type(s) for +: 'int' and 'str'"),
                         None, "f") is None
    assert _raised.named(AttributeError("'Stream' object has no attribute 'sync'"), None,
                         "f") is None
    assert _raised.named(_raise("x = 1 / 0"), None, "f") is None
    assert _raised.launch_not_numbers(ValueError("something else")) == ""


def test_a_list_indexed_with_a_non_integer_is_said_in_catalogue_words():
    assert str(_raised.words(TypeError("list indices must be integers or slices, not "
                                       "DeviceNDArray"))) == \
        "a Python list indexed with a DeviceNDArray, where an integer belongs"

def test_python_texts_with_a_name_become_catalogue_words_around_the_name():
    # issue 45 (mutants): a host name read in place of another
    unbound = UnboundLocalError("cannot access local variable 'grid' where it is not "
                                "associated with a value")
    assert str(_raised.words(unbound)) == \
        "the variable `grid` is read before anything is assigned to it"
    assert str(_raised.words(NameError("name 'd_tmpp' is not defined"))) == \
        "the name `d_tmpp` is not defined"
    assert str(_raised.words(TypeError("'device array' object cannot be interpreted as an "
                                       "integer"))) == \
        "a value of type `device array` where a whole number belongs (a count, a range or a size)"


def test_an_attribute_of_the_wrong_value_becomes_catalogue_words():
    assert str(_raised.words(AttributeError("'int' object has no attribute 'shape'"))) == \
        "a value of type `int` has no attribute `shape`: a name that holds something else " \
        "than the one meant"
