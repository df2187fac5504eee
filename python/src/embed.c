/* Python layers in the `cortado` command: the extension's code is built
 * into the command, and the first Python layer of a net starts an
 * interpreter, whose `cortado._cortado` is this built-in copy (one
 * libcortado in the process).  The package's Python files come from the
 * build tree or the install prefix (whichever exists, before sys.path),
 * the layers' modules from PYTHONPATH as in Caffe. */
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

#include "pyext.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* With the GIL: the package's folder first on sys.path, the built-in
 * extension as cortado._cortado, then `import cortado`. */
static int load_package(void) {
  const char *dirs[] = {CT_PY_PKG_BUILD_DIR, CT_PY_PKG_INSTALL_DIR};
  PyObject *path = PySys_GetObject("path"); /* borrowed */
  for (int i = 1; i >= 0 && path; i--) {
    char pkg[4096];
    snprintf(pkg, sizeof pkg, "%s/cortado", dirs[i]);
    if (!is_dir(pkg)) continue;
    PyObject *d = PyUnicode_DecodeFSDefault(dirs[i]);
    if (!d || PyList_Insert(path, 0, d) < 0) {
      Py_XDECREF(d);
      return -1;
    }
    Py_DECREF(d);
  }
  PyObject *mod = PyInit__cortado();
  if (!mod) return -1;
  PyObject *modules = PyImport_GetModuleDict(); /* borrowed */
  int rc = PyDict_SetItemString(modules, "cortado._cortado", mod);
  Py_DECREF(mod);
  if (rc < 0) return -1;
  PyObject *pkg = PyImport_ImportModule("cortado");
  if (!pkg) return -1;
  Py_DECREF(pkg);
  return 0;
}

/* Starts the interpreter once (on whichever thread builds the first
 * Python layer), then lets every thread take the GIL in turn. */
static int ensure_interpreter(void) {
  pthread_mutex_lock(&g_mu);
  int rc = 0;
  if (!Py_IsInitialized()) {
    Py_InitializeEx(0); /* SIGINT stays the command's */
    if (load_package() < 0) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyObject *s = value ? PyObject_Str(value) : NULL;
      cortado_set_error(CORTADO_ERR_UNSUPPORTED, "Python layers: cannot import the cortado package: %s",
                        s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : "unknown error");
      Py_XDECREF(s);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(tb);
      rc = -1;
    }
    PyEval_SaveThread();
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

void ct_cli_python_setup(void) {
  ct_py_interpreter_hook = ensure_interpreter;
  ct_py_python_layer_class_register();
}
