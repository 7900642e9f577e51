# The compiled CFFI module (see build_libsw.py for the declarations).
from typing import Any

ffi: Any
lib: Any
