"""Loaded by Python at start-up in the job process ``statelens preflight`` runs (this folder is put
first on its ``PYTHONPATH``): patches PySpark's writers before the job's code runs
(``spark_io/preflight/redirect.py``), then hands over to a ``sitecustomize`` of the environment's
own, if there is one."""

import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "statelens_preflight_redirect", os.path.join(os.path.dirname(_here), "redirect.py")
)
if _spec and _spec.loader and os.environ.get("STATELENS_PREFLIGHT_CHECKPOINT"):
    _redirect = importlib.util.module_from_spec(_spec)
    sys.modules["statelens_preflight_redirect"] = _redirect
    _spec.loader.exec_module(_redirect)
    _redirect.install()

# the environment's own sitecustomize, shadowed by this one
_path, _me = sys.path, sys.modules.pop("sitecustomize", None)
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
try:
    import sitecustomize  # noqa: F401
except ImportError:
    pass
finally:
    sys.path = _path
    if _me is not None:
        sys.modules["sitecustomize"] = _me
