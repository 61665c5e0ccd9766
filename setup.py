"""Build hooks: compile libfocus.so with the Makefile and ship it inside the package.

The wheel is platform-specific (it carries a shared library) but not tied to a Python ABI,
because the library is loaded with ctypes: the tag is py3-none-<platform>.
"""

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover - wheel is a build requirement
    bdist_wheel = None

ROOT = Path(__file__).resolve().parent
LIBRARY = "libfocus.so"


class BuildWithLibrary(build_py):
    """Run `make lib` (reusing build/ when it is up to date) and copy the library in."""

    def run(self):
        super().run()
        subprocess.run(["make", "-C", str(ROOT), "lib"], check=True)
        target = Path(self.build_lib) / "focus_go" / LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "build" / LIBRARY, target)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildWithLibrary}

if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
