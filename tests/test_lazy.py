"""workbench.lazy: a module stands in until its first attribute is read; `sag2wb` no longer
imports pandas to start."""

import subprocess
import sys

import pytest

from workbench.lazy import LazyModule


def test_the_module_is_imported_on_the_first_attribute_read():
    code = (
        "import sys; from workbench.lazy import LazyModule; m = LazyModule('colorsys'); "
        "before = 'colorsys' in sys.modules; v = m.rgb_to_hsv(1.0, 0.0, 0.0); "
        "print(before, 'colorsys' in sys.modules, v)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "(0.0,", "1.0,", "1.0)"]


def test_a_missing_attribute_is_the_modules_own_error():
    m = LazyModule("math")
    assert m.sqrt(9.0) == 3.0
    with pytest.raises(AttributeError, match="no_such_function"):
        _ = m.no_such_function


def test_the_cli_starts_without_pandas():
    code = "import sys, workbench.cli.main; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
