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

C_CLASS = '''
typedef struct {{ PyObject_HEAD }} {cls}Object;

static PyObject *{cls}_append(PyObject *self, PyObject *arg) {{
    return PyUnicode_FromFormat("{prefix}%S", arg);
}}

static PyMethodDef {cls}_methods[] = {{
    {{"append", {cls}_append, METH_O, NULL}},
    {{NULL, NULL, 0, NULL}}
}};

static PyTypeObject {cls}Type = {{
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "{dotted}.{cls}",
    .tp_basicsize = sizeof({cls}Object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_methods = {cls}_methods,
}};

static PyObject *f_{factory}(PyObject *self, PyObject *unused) {{
    return PyObject_CallObject((PyObject *)&{cls}Type, NULL);
}}
'''

C_READY = '''    if (PyType_Ready(&{cls}Type) < 0) return NULL;
    Py_INCREF(&{cls}Type);
    if (PyModule_AddObject(m, "{cls}", (PyObject *)&{cls}Type) < 0) return NULL;'''

C_MODULE = '''#define PY_SSIZE_T_CLEAN
#include <Python.h>
{functions}
static PyMethodDef methods[] = {{
{table}
    {{NULL, NULL, 0, NULL}}
}};

static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{dotted}", NULL, -1, methods}};

PyMODINIT_FUNC PyInit_{last}(void) {{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
{ready}
    return m;
}}
'''


def build_extension(package_dir: Path, dotted: str, functions: dict[str, str],
                    classes: dict[str, tuple[str, str]] | None = None) -> Path:
    """``package_dir/LAST.<EXT_SUFFIX>``: the module ``dotted`` whose functions (name -> the prefix each
    returns before ``str(arg)``) are C functions (``builtin_function_or_method``), and whose classes
    (name -> (factory, prefix)) are C types with a method ``append`` returning the prefix before
    ``str(arg)``, each built by a C function ``factory()`` of the module (pyrsistent's ``pvectorc``)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    include = sysconfig.get_paths()["include"]
    if gcc is None or not (Path(include) / "Python.h").exists():
        pytest.skip("no C compiler or Python headers to build an extension module")
    last = dotted.rpartition(".")[2]
    source = package_dir / f"{last}.c"
    classes = classes or {}
    table = [f'    {{"{n}", f_{n}, METH_O, NULL}},' for n in functions]
    table += [f'    {{"{f}", f_{f}, METH_NOARGS, NULL}},' for f, _ in classes.values()]
    source.write_text(C_MODULE.format(
        functions="".join(C_FUNCTION.format(name=n, prefix=p) for n, p in functions.items())
        + "".join(C_CLASS.format(cls=c, factory=f, prefix=p, dotted=dotted) for c, (f, p) in classes.items()),
        table="\n".join(table), dotted=dotted, last=last,
        ready="\n".join(C_READY.format(cls=c) for c in classes)))
    out = package_dir / f"{last}{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([gcc, "-shared", "-fPIC", "-O0", f"-I{include}", "-o", str(out), str(source)], check=True,
                   capture_output=True)
    source.unlink()
    return out
