"""One line for an error from user code: the line that says what went wrong."""

from __future__ import annotations

from study.errors import one_line, show, summary_line

#: The shape of the error TensorFlow and Keras raise for a model whose layer fails while traced.
TRACED = """in user code:

    File "/tmp/paced.py", line 19, in call
        pause = tf.numpy_function(_pause, [], tf.float64, stateful=True)
    File "/venv/keras/src/utils/traceback_utils.py", line 122, in error_handler
        raise e.with_traceback(filtered_tb) from None

    ValueError: Exception encountered when calling Sequential.call().

    \x1b[1mas_list() is not defined on an unknown TensorShape.\x1b[0m

    Arguments received by Sequential.call():
      \u2022 inputs=tf.Tensor(shape=(8, 20), dtype=float32)
"""


def test_a_traced_keras_error_gives_the_line_keras_marks() -> None:
    assert summary_line(ValueError(TRACED)) == (
        "ValueError: as_list() is not defined on an unknown TensorShape."
    )


def test_a_traced_error_without_a_marked_line_gives_its_last_named_error() -> None:
    text = 'in user code:\n\n    File "m.py", line 3, in build\n\n    TypeError: bad units\n'
    assert summary_line(ValueError(text)) == "ValueError: TypeError: bad units"


def test_keras_plain_report_gives_the_line_after_the_layer_it_names() -> None:
    text = TRACED.replace("\x1b[1m", "").replace("\x1b[0m", "")
    assert summary_line(ValueError(text)) == (
        "ValueError: as_list() is not defined on an unknown TensorShape."
    )
    layer = "Exception encountered when calling Shapeless.call().\n\nas_list() is not defined."
    assert summary_line(ValueError(layer)) == "ValueError: as_list() is not defined."


def test_any_other_error_gives_its_first_line_or_its_type() -> None:
    assert summary_line(KeyError("label")) == "KeyError: 'label'"
    assert summary_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert summary_line(RuntimeError()) == "RuntimeError"


def test_a_mapping_key_with_a_line_break_is_shown_quoted_on_one_line() -> None:
    assert show({"low": 1, "a\nb": "x"}) == "{low: 1, 'a\\nb': 'x'}"
    assert one_line("FILE: key\nrest\r") == "FILE: key\\nrest\\r"
