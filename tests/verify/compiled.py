"""A real CPython extension module, built here from a few lines of C with the system compiler and this
interpreter's headers: what an accelerator (markupsafe's ``_speedups``) or a mypyc build puts beside a
package's ``.py`` files, for the proof to meet as Python imports it."""
from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

C_FUNCTION = '''
static PyObject *f_{name}(PyObject *self, PyObject *arg) {{
    return PyUnicode_FromFormat("{prefix}%S", arg);
}}
'''

C_MODULE = '''#define PY_SSIZE_T_CLEAN
#include <Python.h>
{functions}
static PyMethodDef methods[] = {{
{table}
    {{NULL, NULL, 0, NULL}}
}};

static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{dotted}", NULL, -1, methods}};

PyMODINIT_FUNC PyInit_{last}(void) {{ return PyModule_Create(&module); }}
'''


def build_extension(package_dir: Path, dotted: str, functions: dict[str, str]) -> Path:
    """``package_dir/LAST.<EXT_SUFFIX>``: the module ``dotted`` whose functions (name -> the prefix each
    returns before ``str(arg)``) are C functions (``builtin_function_or_method``)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    include = sysconfig.get_paths()["include"]
    if gcc is None or not (Path(include) / "Python.h").exists():
        pytest.skip("no C compiler or Python headers to build an extension module")
    last = dotted.rpartition(".")[2]
    source = package_dir / f"{last}.c"
    source.write_text(C_MODULE.format(
        functions="".join(C_FUNCTION.format(name=n, prefix=p) for n, p in functions.items()),
        table="\n".join(f'    {{"{n}", f_{n}, METH_O, NULL}},' for n in functions), dotted=dotted, last=last))
    out = package_dir / f"{last}{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([gcc, "-shared", "-fPIC", "-O0", f"-I{include}", "-o", str(out), str(source)], check=True,
                   capture_output=True)
    source.unlink()
    return out
