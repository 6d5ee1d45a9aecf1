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
